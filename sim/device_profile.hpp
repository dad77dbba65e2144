// sim/device_profile.hpp — how close real kernels get to a device's datasheet.
//
// A DeviceProfile starts from the datasheet (topology::DeviceSpec) and adds
// efficiencies by op class and size, per-op launch cost and framework figures.
// Defaults are datasheet-derived; `dptwin calibrate` replaces them with fitted
// values (a profile YAML, see sim/README.md).
//
// Thread-safety: value types.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/units.hpp"
#include "core/yaml_reader.hpp"
#include "sim/collectives.hpp"
#include "topology/device_spec.hpp"

namespace dptwin::sim {

// What a timed call is, for how it follows the speed probes (dispatch_share).
enum class CallKind { GemmFp32, GemmHalf, MemoryFp32, MemoryHalf, HostCopy };

// The share of a compute call's time that follows the dispatch speed rather
// than its class's probe, by kind and call time. The fit rescales a case by
// this blend of its probes' ratios (validate/profile_fit), and
// DeviceProfile::at_speed a table point by the same.
// - bf16 GEMMs and bf16 memory-class calls (the curve): 1 below 30 us, 0
//   above 1 ms, log-linear between. Between two calibrations whose dispatch
//   probe read 1.42x apart and the bf16 GEMM probe 1.07x (rb12), bf16 GEMMs
//   of 10-30 us moved 1.44-1.54x, of 100 us 1.30x, of 300 us 1.15x and of
//   1 ms 1.10x.
// - fp32 GEMMs and fp32 memory-class calls: a table by time, 1 at 10 us
//   (the fit reads such calls by the dispatch probe alone), from 30 us on
//   the shares that the passes of rsb8-rsb15's 16 calibrations show,
//   smoothed (bench/calibration_spread.py, table 5: a pass's change of a
//   case regressed on its pass's probe levels; the corpus is in sample for
//   them): fp32 GEMMs 0.50 at 30 us, 0.45 at 100 us, 0.28 at 300 us, 0.20
//   at 1 ms, down to 0 at 100 ms; fp32 memory-class calls (cached adds,
//   layernorm, softmax, the optimizer) 0.75 at every size (the table's
//   0.48-1.0): the add probe streams beyond the cache and they mostly do
//   not. A core slow on dispatch alone (rsb11: core 0 read dispatch 1.54x
//   core 1's, the fp32 GEMM probe 1.13x) moved fp32 GEMMs of 100 us 1.18x,
//   which the curve above put at 1.4x. The bf16 kinds keep that curve:
//   bf16 GEMMs' pass-level shares are lower too (0.25 at 100 us), but the
//   pairs whose host moved between the calibrations (rb12, rsb15) follow it
//   (bench/corpus: rsb15 5.2% apart at one state with the table's shares
//   for bf16 GEMMs as well, 6.9% with them for every kind, 2.5% with the
//   curve for bf16).
// - host copies (`host_memcpy`, read on 32 MiB, beyond the cache): none; they
//   follow the add probe, as at_speed moves host_memcpy.
double dispatch_share(CallKind kind, double seconds);

// Saturating efficiency: eff(work) = max * work / (work + half_work).
// `work` is the op's FLOPs (compute) or bytes (memory); half_work is the size
// at which half of `max` is reached.
//
// Measured form (calibration): when `table` is non-empty it replaces the
// saturating form: points (work, efficiency) in ascending work, interpolated
// linearly in log(work) and held constant beyond the ends. CPUs need it: a GEMM
// or a copy runs fastest while its operands fit in cache and slows down beyond
// (the saturating form can only rise). `max` is then the table's largest value.
struct EfficiencyCurve {
  EfficiencyCurve() = default;
  EfficiencyCurve(double max_eff, double half) : max(max_eff), half_work(half) {}
  double max = 0.7;
  double half_work = 0;  // 0 = always `max`
  std::vector<std::pair<double, double>> table;  // (work, efficiency), ascending work; empty = the form above
  double at(double work) const { return table.empty() ? (half_work <= 0 ? max : max * work / (work + half_work)) : from_table(work); }
  double from_table(double work) const;
  // Every efficiency divided by `f` (> 0).
  void slow_down(double f);
  // Every table point divided by f^(1-s) x fd^s, s = dispatch_share of its
  // call (a `kind` call of `launch` + its work at its efficiency of `peak`):
  // short calls follow the dispatch ratio `fd`. The saturating form: by `f`.
  void slow_down_blended(double f, double fd, double peak, Time launch, CallKind kind);
};

// The machine's speed at one moment: seconds of a fixed 512x768x768 matmul in
// fp32 and in bf16, a 1M-element add and one dispatch (dptwin-microbench --mode speed).
struct SpeedProbe {
  double matmul_s = 0, elementwise_s = 0, dispatch_s = 0;
  double matmul_bf16_s = 0;  // 0: not read (older profiles): bf16 GEMMs follow matmul_s
  // How the add was read: "streaming" (each add on its own operands, beyond the
  // cache) or "cached" (one pair of 4 MiB tensors: profiles and probes before
  // the streaming form, hence the default). Readings of two forms are not
  // comparable: at_speed leaves the memory tables alone between them.
  std::string elementwise_form = "cached";
  bool empty() const { return !(matmul_s > 0 && elementwise_s > 0 && dispatch_s > 0); }
  // Whether this reading's elementwise figure compares with `other`'s.
  bool elementwise_comparable(const SpeedProbe& other) const { return elementwise_form == other.elementwise_form; }
};

// How the machine's speed spreads while it is measured, per speed-probe class:
// the readings' quantiles (ascending) as ratios to speed_reference (1 = the
// reference, 2 = twice as slow). On a shared host each core switches between
// speed states on its own (probably a tenant on its sibling hyperthread; two
// probes run at once here read a bf16 matmul at 0.73 and 2.0 ms), so a synchronous step
// of N ranks runs at the pace of its slowest core: DeviceProfile::shared_by
// prices compute at the expected slowest of N draws while N <= cores, and at
// the mean state (one draw) beyond, where every rank is time-sliced over all cores.
struct SpeedStates {
  int cores = 0;  // the machine's cores (0: unknown, no cap)
  std::vector<double> matmul, matmul_bf16, elementwise, dispatch;
  // How far apart the cores ran while N ranks with a core each were measured
  // (the step-skeleton probe): (N, fraction), ascending N; the last of the N
  // ranks reaches a meeting `fraction` of its compute since their previous
  // one after the mean rank (DeviceProfile::sync_skew). Which core is slower
  // is a state of the host like the speeds above (one core 40% slower on
  // dispatch for a whole calibration, none in the next): a state taken over
  // from another profile (`validate --at-speed-of`) carries it. Empty: the
  // skew is in rank_sync's lag (profiles before it).
  std::vector<std::pair<int, double>> rank_skew;
  // The probe classes, as the profile YAML and the microbench name them.
  static constexpr std::array<const char*, 4> kClasses{"matmul", "matmul_bf16", "elementwise", "dispatch"};
  // The list of class `cls` (one of kClasses), or nullptr for another name.
  std::vector<double>* of(std::string_view cls);
  const std::vector<double>* of(std::string_view cls) const { return const_cast<SpeedStates*>(this)->of(cls); }
  bool empty() const { return matmul.empty() && matmul_bf16.empty() && elementwise.empty() && dispatch.empty(); }
};

// The expected largest of n independent draws from the equally weighted
// points `q` (ascending); 1 when `q` is empty.
double expected_slowest(const std::vector<double>& q, int n);

struct DeviceProfile {
  topology::DeviceSpec spec;
  EfficiencyCurve matmul{0.75, 2e9};          // dense GEMM, of peak in its dtype
  EfficiencyCurve batched_matmul{0.55, 2e9};  // attention bmm
  EfficiencyCurve memory{0.80, 4e6};          // elementwise / softmax / layernorm, of memory bandwidth
  // The same ops on 16-bit data, when measured (a table): CPUs convert bf16 to
  // fp32 and back in every pointwise kernel, so they move half the bytes at well
  // under the fp32 rate. Without a table, half-precision ops use `memory`.
  EfficiencyCurve memory_half{0.0, 0};
  // 16-bit GEMMs, when measured (tables, relative to the half peak): CPU bf16
  // kernels (oneDNN, AMX) lose far more to small shapes than fp32 ones (0.7x fp32
  // at 32x64x192, 6x at 2048x768x768 here), which one shared curve cannot express.
  EfficiencyCurve matmul_half{0.0, 0};
  EfficiencyCurve batched_matmul_half{0.0, 0};
  // Linears under O1 autocast, when measured (a table against the half peak by
  // per-GEMM FLOPs): one Linear's forward and backward under autocast (three
  // half GEMMs, the casts of the fp32 weight and input, gradients cast back)
  // divided by its three GEMMs. Replaces `matmul_half` for O1 linears: the casts
  // around small GEMMs cost as much as the GEMMs (1.5 ms vs 0.9 ms at 512x128x512 here).
  EfficiencyCurve matmul_o1{0.0, 0};
  // fp32 linears without autocast, when measured (a table against the fp32
  // peak by per-GEMM FLOPs): the same Linear's forward and backward in fp32 on
  // one module's operands, divided by its three GEMMs. Replaces `matmul` for
  // Linear-class GEMMs: training reuses a layer's weight and activations while
  // they are still in cache, and the GEMM table reads a pool of cold operands
  // (on a 2-vCPU Zen 5 guest the pool priced the tiny and small models' shapes
  // 3-14% slower than this pass; the two agree from 2048x256x1024 up).
  EfficiencyCurve matmul_linear{0.0, 0};
  // Fused activation kernels (tanh-GELU), when measured: tables of efficiency
  // against the fp32 peak by the op's FLOPs, forward and backward, for fp32 and
  // 16-bit data. A CPU evaluates tanh per element, so the kernel is compute
  // bound (5 ns per element here, 20x a copy) and bf16 runs 2-3x slower than
  // fp32, not faster. Without a table the op is priced as a memory-bound one.
  EfficiencyCurve activation{0.0, 0};
  EfficiencyCurve activation_backward{0.0, 0};
  EfficiencyCurve activation_half{0.0, 0};
  EfficiencyCurve activation_half_backward{0.0, 0};
  Time launch_overhead;                       // per kernel (dispatch + launch); from the spec by default
  Time step_overhead = Time::us(500);         // fixed host cost per optimizer step (Python loop, data loader hand-off)
  double overlap_slowdown = 0.10;             // compute slowdown while communication runs on the same device
  // Compute slowdown for the whole step while a framework's background loop
  // (Horovod's negotiation cycle) ticks beside training on the same cores. 0 on
  // GPUs (the loop runs on host cores the kernels do not need); measured on CPU ranks.
  double background_loop_slowdown = 0.0;
  // The same by ranks on the machine, when measured ((ranks, slowdown),
  // ascending ranks; interpolated linearly, held at the ends); replaces the
  // single figure for the machine's rank count in shared_by().
  std::vector<std::pair<int, double>> background_loop_by_ranks;
  // The share of a data collective's transfer that waits while its ranks
  // compute (0: it progresses beside compute; 1: not at all), by ranks on the
  // machine (ascending; interpolated, held at the ends; measured by the comm
  // calibration's overlap probe). shared_by() resolves `comm_stall`; at 0.5 or
  // more the simulator starts a data collective only once none of its members
  // computes (ExecutorOptions::comm_waits_for_compute). Empty: 0.
  std::vector<std::pair<int, double>> comm_stall_by_ranks;
  double comm_stall = 0.0;
  // The same share when only one member computes and the others idle, by
  // ranks (`comm_stall_one`). Under 0.5 where `comm_stall` is 0.5 or more, a
  // computing member holds a collective up only while its machine has no core
  // to spare (unbound ranks: the communication thread moves to an idle core),
  // else while any member computes (ranks bound to cores, or not measured).
  // `dptwin calibrate` writes 0 for unbound ranks (validate/calibrate.cpp).
  std::vector<std::pair<int, double>> comm_stall_one_by_ranks;
  double comm_stall_one = 1.0;
  double compute_jitter = 0.0;                // relative std-dev of compute times (stragglers); 0 = deterministic
  // How ranks that time-share cores meet at a data collective, by ranks on the
  // machine (ascending; interpolated linearly, held at the ends), measured by
  // the comm calibration's step-skeleton probe. Identical simulated ranks reach
  // a collective together; real ones do not: where they meet (no member
  // computing) the slowest arrives after the mean one by `lag` x
  // (W / 100 ms)^`exponent`, W the compute since the previous meeting
  // (0.5: a random walk, each scheduler slice adding an
  // independent deviation), and a collective entered from compute lasts
  // `latency` longer than back to back (ranks asleep in it wake behind ranks
  // that compute). shared_by() resolves sync_lag, sync_exponent and
  // sync_latency for the machine's rank count. Empty = ranks meet without
  // delay (GPUs, datasheet profiles).
  struct SyncCost {
    int ranks = 1;
    Time lag;
    double exponent = 0.5;
    Time latency;
  };
  std::vector<SyncCost> sync_by_ranks;
  Time sync_lag;
  double sync_exponent = 0.5;
  Time sync_latency;
  double sync_skew = 0;  // speed_states.rank_skew resolved by shared_by() (1 < N <= its last rank count)
  Bytes framework_reserve = mib(512);         // CUDA context + allocator slack (CPU ranks: runtime)
  int optimizer_kernels_per_tensor = 10;      // eager AdamW (PyTorch 1.8, no foreach): kernels per parameter tensor
  double optimizer_bytes_per_param = 96;      // eager AdamW: bytes its kernels move per fp32 parameter (priced on `memory`)
  Bandwidth host_memcpy = gbyte_per_s(10);    // host-side copies (Horovod fusion on CPU, DataParallel scatter)
  // Ranks that share one machine's cores slow each other's compute (CPU ranks,
  // more processes than cores): (ranks on the machine, compute-time factor),
  // ascending ranks, measured by calibration; empty = no sharing. Between
  // measured counts the factor is interpolated linearly; beyond the last it
  // grows in proportion to the ranks (time-slicing).
  std::vector<std::pair<int, double>> host_sharing;
  // Every rank of a job runs on this one machine, whatever the cluster's hosts
  // (an emulated cluster of network namespaces): host_sharing uses the job's rank count.
  bool ranks_share_machine = false;
  // Calibrated collective costs (profile YAML `network:` section); see CommCalibration.
  std::vector<CommCalibration> network;
  // The host's communication state while `network` was measured: seconds of a
  // 4 KiB allreduce among N ranks (exec's probe_comm_state), (N, seconds) in
  // ascending N (`network: state_reference`). Empty: not recorded.
  std::vector<std::pair<int, double>> comm_reference;
  // How far the collectives of N ranks follow that probe: (N, b), the costs
  // scale by (now / reference)^b (`state_reference: exponent`, set by hand;
  // calibrate reports a fitted b as a diagnostic, validate::comm_state_exponent).
  // A rank count without one follows the probe fully (b = 1).
  std::vector<std::pair<int, double>> comm_state_exponent;
  double comm_state_exponent_for(int ranks) const;
  // This profile with the network tables of every rank count that both `now`
  // and comm_reference read priced at the state `now` finds (validation
  // `--run-states`, `--at-speed-of`): a table's alphas multiplied and its
  // bandwidth factors divided by (now / reference)^b (the ratio clamped to
  // [0.2, 5]; b = comm_state_exponent_for(N)), so its every cost scales by
  // that factor. comm_reference becomes `now` where read.
  DeviceProfile at_comm_state(const std::vector<std::pair<int, double>>& now) const;

  // Compute-time factor with `ranks` ranks on the machine (1 when host_sharing is empty).
  double sharing_factor(int ranks) const;
  // This profile with every compute figure (efficiency maxima, launch and step
  // overheads, host memcpy) slowed by sharing_factor(ranks), and, where
  // speed_states is known, by the expected slowest of `ranks` cores (ranks <=
  // cores) or the mean state (more ranks than cores), per probe class as at_speed scales.
  // Also resolves background_loop_slowdown, sync_lag, sync_exponent and sync_latency for
  // `ranks` from their tables, and sync_skew from speed_states.rank_skew
  // for 1 < ranks <= its last rank count (interpolated between its rank
  // counts, held below the first). SharingMode::ByExecutor leaves out the
  // sharing_factor: the simulator applies it task by task to the compute
  // running at each moment (ExecutorOptions::sharing_slowdown).
  enum class SharingMode { Fixed, ByExecutor };
  DeviceProfile shared_by(int ranks, SharingMode mode = SharingMode::Fixed) const;
  // The speed probe while this profile was measured (empty = not recorded).
  SpeedProbe speed_reference;
  // How `dptwin calibrate` ran the ranks it measured (`calibrated_with` in the
  // YAML; empty = not recorded): binding and threads decide the collective,
  // lag and sharing figures, so a validation that runs its ranks otherwise
  // is told (validate::calibration_mismatches).
  struct Conditions {
    int threads = 0;           // intra-op threads per rank (0 = not recorded)
    std::string bind;          // auto | core | none
    std::string backend;       // gloo, mpi, ...
    std::string cluster;       // preset or cluster file the ranks ran as
    bool empty() const { return threads == 0 && bind.empty() && backend.empty() && cluster.empty(); }
  };
  Conditions calibrated_with;
  // This profile on the machine as the probe `now` finds it (drift
  // compensation on shared hosts): fp32 GEMM and activation tables scaled by the matmul ratio
  // now/reference, bf16 ones (half and O1 GEMMs, half activations) by the matmul_bf16 ratio where both
  // probes read it (else the matmul ratio), memory-class tables and host copies by the
  // add ratio, launch and step overheads by the dispatch ratio (ratios clamped
  // to [0.2, 5]); a GEMM or memory table point whose call is short follows the
  // dispatch ratio in part, as the fit rescaled it (slow_down_blended,
  // dispatch_share); an activation point, the kernel alone, its class.
  // Collective tables are kept. Unchanged without a reference.
  DeviceProfile at_speed(const SpeedProbe& now) const;
  // The spread of the speed around speed_reference (empty = not recorded).
  SpeedStates speed_states;
  // Slows fp32 GEMM and activation tables by fm, bf16 ones (half and O1 GEMMs,
  // half activations) by fh, memory-class tables and host copies by fe,
  // launch and step overheads by fd. With `blend_short_calls`, each GEMM and
  // memory table point partly by fd, by the dispatch share of its call
  // (slow_down_blended); activation tables by their class alone either way.
  void slow_down_by_class(double fm, double fh, double fe, double fd, bool blend_short_calls = false);
};

// Datasheet-based defaults for a device.
DeviceProfile default_profile(const topology::DeviceSpec& spec);

// Applies a `device:` section of a profile YAML (keys: matmul {max, half_work} or
// {table: [[work, efficiency], ...]},
// batched_matmul, memory, launch_overhead, step_overhead, overlap_slowdown,
// background_loop_slowdown, optimizer_bytes_per_param,
// compute_jitter, rank_sync [{ranks, lag, exponent?, latency}, ...], framework_reserve,
// optimizer_kernels_per_tensor, host_memcpy).
// Also: peaks and memory bandwidth measured on the target replace the
// datasheet's (fp32_peak, fp16_peak, bf16_peak as FLOP rates, memory_bandwidth),
// host_sharing [{ranks, factor}, ...] and ranks_share_machine.
void apply_profile_yaml(const YamlNode& node, DeviceProfile& profile);

// Applies a `network:` section: {tables: [{link_kind?, collective?, ranks?,
// regimes: [{up_to?, alpha, bandwidth_factor, measured?: [from, to]}, ...]}, ...], state_reference?:
// [{ranks, allreduce_4k}, ...]}, plus free-text `backend` and `source`.
// Replaces profile.network and profile.comm_reference.
void apply_network_yaml(const YamlNode& node, DeviceProfile& profile);

// Applies a whole profile document (as written by `dptwin calibrate`): keys
// name, description, source, calibrated_with, device, network. Errors name
// file, line and key.
void apply_profile_document(const YamlNode& root, DeviceProfile& profile);
// The top-level keys of a profile document (a scenario's `calibration:` file checks them too).
const std::vector<std::string>& profile_document_keys();

}  // namespace dptwin::sim
