// validate/profile_fit.hpp — from microbenchmark measurements to a device profile.
//
// `dptwin calibrate` runs dptwin-microbench (exec/microbench/) and hands its JSON
// documents to fit_profile(), which fits the figures the simulator consumes
// (sim/device_profile.hpp) and writes them as a profile YAML. Only
// microbenchmarks feed the fit: never the step times that `dptwin validate`
// predicts.
//
// The fits are closed-form weighted least squares on relative error (no
// optimizer library):
//  * efficiency curves: the roofline time t = launch + w / (peak · max · w/(w+h))
//    is linear in the work w: t - launch = a·w + b with a = 1/(peak·max),
//    b = h/(peak·max);
//  * collective regimes: the simulator's own price of each measured collective
//    on the calibration topology, split into hop latency L, algorithm steps K
//    and bulk-transfer time X at datasheet link speeds, gives the linear model
//    t - L = alpha·K + X / bandwidth_factor per regime; regimes are contiguous
//    size ranges chosen by exhaustive search over breakpoints, a split kept
//    only when it cuts the residual clearly (see fit_comm_regimes).
//
// Thread-safety: pure functions.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "sim/collectives.hpp"
#include "sim/device_profile.hpp"
#include "topology/cluster.hpp"

namespace dptwin::validate {

// One timed op: work (FLOPs or bytes) and seconds.
struct WorkSample {
  double work = 0;
  double seconds = 0;
};

struct CurveFit {
  sim::EfficiencyCurve curve;
  double peak = 0;            // the rate the curve is relative to (FLOP/s or bytes/s)
  double rms_rel_error = 0;   // of the fitted times vs the samples
  int samples = 0;
};

// Fits t = launch_s + w / (peak · curve.at(w)). When `fit_peak` is true and the
// data need an efficiency above `max_cap`, the peak is raised so that
// curve.max == max_cap (measured peaks replace datasheet ones); otherwise the
// peak is kept and max is clamped to [0.01, 1].
// REQUIRES: at least two samples with distinct work.
CurveFit fit_efficiency_curve(const std::vector<WorkSample>& samples, double launch_s, double peak, bool fit_peak,
                              double max_cap = 0.9);

// Measured table curve (sim::EfficiencyCurve::table): samples binned by work
// (factor-4 bins in log space); per bin the median efficiency (w / peak) / (t -
// launch_s) at the bin's geometric-mean work. With `fit_peak` the peak becomes
// the best bin's rate / max_cap, among bins whose median call takes at least
// twice launch_s (dispatch-bound bins keep their entry, clamped to 1); otherwise
// efficiencies are clamped to [0.001, 1]. For CPUs, whose GEMMs and copies slow
// down once operands leave the cache, which the saturating form cannot show.
CurveFit fit_efficiency_table(const std::vector<WorkSample>& samples, double launch_s, double peak, bool fit_peak,
                              double max_cap = 0.95);

// Relative RMS error of a curve on samples.
double curve_rms_rel_error(const std::vector<WorkSample>& samples, double launch_s, double peak,
                           const sim::EfficiencyCurve& c);

// A collective measurement decomposed by the simulator's nominal price.
struct CommSample {
  double bytes = 0;          // collective buffer
  double seconds = 0;        // measured
  double steps = 0;          // algorithm steps K (sum of phase repeats)
  double latency_s = 0;      // hop latencies of those steps at datasheet figures
  double transfer_s = 0;     // bulk-transfer time at datasheet link bandwidths
};

struct RegimeFit {
  std::vector<sim::CommRegime> regimes;  // ascending; the last has up_to = 0
  double rms_rel_error = 0;
};

// Piecewise fit of t = latency + alpha·steps + transfer / factor over contiguous
// size ranges (samples sorted by bytes). At most `max_regimes` regimes of at
// least `min_points` samples each; a split into k+1 regimes is kept only when
// it lowers the RMS relative error below `keep_ratio` times that of k regimes
// and by at least 2 percentage points. alpha >= 0, factor > 0.
RegimeFit fit_comm_regimes(std::vector<CommSample> samples, int max_regimes = 3, int min_points = 3,
                           double keep_ratio = 0.7);

// The simulator's nominal decomposition of a collective (datasheet links, no
// calibration) on `topo` for `ranks` ranks: fills steps, latency_s, transfer_s.
// `algorithm` is the one the strategies use for this kind (see the README).
CommSample nominal_comm(const topology::Topology& topo, sim::CollectiveKind kind, sim::Algorithm algorithm,
                        int ranks, double bytes, double measured_seconds);

// Everything calibrate fits, with diagnostics for the report.
struct FitReport {
  sim::DeviceProfile profile;        // defaults of the device + fitted figures
  nlohmann::json diagnostics;        // per fit: samples, error
};

// Speed normalisation of compute documents. On a shared host the machine's
// speed switches between states within seconds, so each case of a compute
// document carries a quick reading of the speed probe's class next to it
// ("probe": {"class", "s"}; dispatch_probe, fp32_probe / o1_probe likewise).
// probe_reference(): per class, the median of those readings over `docs` (the
// suite's typical speed; empty without readings). normalized_to_speed(): the
// document with every probed figure ("seconds", "min_s", the dispatch figures,
// fp32_s / o1_s) scaled by reference / reading (clamped to [0.2, 5]), i.e. as
// if measured at the reference speed, which it records as "normalized_to"
// (short calls and fused activations by parts, below).
// A case whose probe also carries the dispatch reading taken next to it
// ("dispatch_s") is scaled by a blend of both ratios, dispatch_share(its kind,
// its time) of it by the dispatch one (its kind: a GEMM of its probe's class,
// else a memory-class call of its row's dtype): short calls follow the framework's dispatch
// speed (validate/README, known gap 8); a fused activation's ("op":
// "activation", read next to its class's probe and the dispatch one) is its
// plain dispatch ("plain_s" brought to the reference), scaled by the
// dispatch ratio, and the rest by its class's ratio, however short
// (sim::DeviceProfile::slow_down_by_class). Older documents' activations
// read by the dispatch probe alone: by its ratio, as before. Dispatch figures read several times
// (`dispatch_reads`: {key: [{"seconds", "probe"}, ...]}) are each rescaled by
// their own reading and the figure in "dispatch" becomes their median.
// A document already normalised, or without readings, is returned as it is.
using SpeedReference = std::map<std::string, double>;
// The form of the elementwise speed probe one probe result was read with
// (dptwin-microbench's "speed" object, or a compute document's
// speed_reference.start/end: its "elementwise_form"; where it names none, the
// form before "streaming", sim::SpeedProbe's default), and that of a compute
// document (its speed_reference's).
std::string elementwise_form_of(const nlohmann::json& probe);
std::string elementwise_probe_form(const nlohmann::json& doc);
SpeedReference probe_reference(const std::vector<nlohmann::json>& docs);
nlohmann::json normalized_to_speed(const nlohmann::json& doc, const SpeedReference& ref);
// The comm passes of one rank count, each with its collective tables' figures
// ("mean_s", "seconds", "min_s", "reads_s", "rounds_s" of every collective
// the profile prices as a table) scaled by reference / the pass's comm-state
// reading, the reference being the median of the passes' readings, which
// becomes every pass's "comm_state" "seconds" and is recorded as
// "normalized_to_state": the passes as if measured in one state, the one the
// profile's state_reference names, before their median is taken (as compute
// passes are brought to one speed). Passes without a reading, or a single
// pass, are returned as they are. The scaling is the ratio itself (exponent
// 1), as a profile maps its tables unless its YAML sets
// `state_reference: exponent`, which the fit never writes.
std::vector<nlohmann::json> normalized_to_comm_state(const std::vector<nlohmann::json>& passes);
// The share of a call's time that follows the dispatch speed: sim::dispatch_share.
using sim::CallKind;
using sim::dispatch_share;
// Every probe reading of `docs` ({"class", "s"}, one per probed case), or a
// document's own "probe_readings" where it has them (the median of several
// passes keeps all its passes' readings there). With several documents (the
// passes of one calibration) every reading names its document's index
// ("pass").
nlohmann::json probe_readings(const std::vector<nlohmann::json>& docs);
// The spread of a compute document's probe readings: per class with at least
// 8 readings, `points` quantiles of reading / level (clamped to [0.2, 5]),
// where a reading's level is the median of its pass's readings of its class
// when the readings name their pass (several passes), else `ref`; `cores`
// from the document.
sim::SpeedStates speed_states(const nlohmann::json& doc, const SpeedReference& ref, int points = 20);

// How far a rank count's collectives follow the comm-state probe (a 4 KiB
// allreduce read next to them), from the comm documents of several passes of
// one calibration: over every pair of passes, the least-squares b (through
// the origin) of log(collective's mean_s ratio) on log(probe ratio), every
// collective kind and size the sim prices (not ps_round), clamped to [0, 1].
// A diagnostic (calibrate's log, `.fit.json` comm_state_exponent): over
// three passes it read 0.97, 1.00, 0.00 and 0.00 at 2 ranks and 0.60, 0.60,
// 0.00 and 0.68 at 4 in four calibrations (bench/comm_state_slopes.py), too
// unsteady to price with. Nullopt with fewer than two passes or no spread of
// the probe between them.
struct CommStateExponent {
  double exponent = 1.0;
  int pairs = 0;  // (pass pair, collective) points it was fitted on
};
std::optional<CommStateExponent> comm_state_exponent(const std::vector<nlohmann::json>& passes);

// Inputs: the compute document (--mode compute) and any comm documents (--mode
// comm, one per backend x rank count; only those of `backend` are used). The
// network fit prices collectives on `cluster` (normally localhost-cpu, or an
// emulated-cluster topology). A compute document with probe readings is
// normalised to its own probe_reference() first (unless already normalised);
// the profile's speed_reference is then that reference. Throws InputError on
// malformed documents.
FitReport fit_profile(const nlohmann::json& compute, const std::vector<nlohmann::json>& comm,
                      const std::string& backend, const topology::ClusterSpec& cluster);

// The profile YAML (`name`, `description`, `source`, `device:`, `network:`),
// readable by sim::apply_profile_document and by a scenario's `calibration:`.
std::string profile_yaml(const sim::DeviceProfile& p, const std::string& name, const std::string& source,
                         const std::string& backend);

}  // namespace dptwin::validate
