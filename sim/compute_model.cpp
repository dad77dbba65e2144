#include "sim/compute_model.hpp"

#include <algorithm>

namespace dptwin::sim {

using models::OpClass;

int kernels_of(const models::OpSpec& op) {
  const bool fwd = op.pass == models::Pass::Forward;
  if (op.kernels > 0) return op.kernels;  // set by the workload (GELU: eager chain or fused)
  switch (op.cls) {
    case OpClass::Matmul:
    case OpClass::BatchedMatmul:
    case OpClass::Softmax:
      return 1;
    case OpClass::LayerNorm:
      return fwd ? 1 : 2;  // backward: input grad + weight/bias reductions
    case OpClass::CrossEntropy:
      return 2;  // log_softmax + nll_loss (and their backward pair)
    case OpClass::Embedding:
      return fwd ? 3 : 4;  // two gathers + add / zero-fill + two index_add + tied-weight add
    case OpClass::Elementwise:
    case OpClass::Activation:
      return 1;
  }
  return 1;
}

static DType arithmetic_dtype(const models::OpSpec& op, const PrecisionMode& prec) {
  switch (prec.amp) {
    case AmpLevel::None: return DType::FP32;
    case AmpLevel::O2: return prec.half;
    case AmpLevel::O1:
      // O1 runs whitelisted ops (matmuls) in half, blacklisted ones (softmax,
      // layernorm, loss) in fp32, and the rest in the widest input type.
      if (op.cls == OpClass::Matmul || op.cls == OpClass::BatchedMatmul) return prec.half;
      if (op.cls == OpClass::Softmax || op.cls == OpClass::LayerNorm || op.cls == OpClass::CrossEntropy)
        return DType::FP32;
      return prec.half;
  }
  return DType::FP32;
}

Time memory_pass_time(double bytes, int kernels, const DeviceProfile& dev) {
  double per_kernel = bytes / std::max(kernels, 1);
  double bw = dev.spec.memory_bandwidth.value() * dev.memory.at(std::max(per_kernel, 1.0));
  double s = bytes / bw;
  return Time::from_seconds(s) + dev.launch_overhead * kernels;
}

Time tensor_pass_time(double bytes, int kernels, const DeviceProfile& dev) {
  const double mem = bytes / (dev.spec.memory_bandwidth.value() * dev.memory.at(bytes / std::max(kernels, 1)));
  return Time::from_seconds(std::max(kernels * dev.launch_overhead.seconds(), mem));
}

namespace {
// The GEMM efficiency curve for a dtype: the measured 16-bit table when there is one.
const EfficiencyCurve& gemm_curve(bool batched, DType dtype, const DeviceProfile& dev) {
  const bool half = dtype_size(dtype) < 4;
  if (batched) return half && !dev.batched_matmul_half.table.empty() ? dev.batched_matmul_half : dev.batched_matmul;
  return half && !dev.matmul_half.table.empty() ? dev.matmul_half : dev.matmul;
}

// The measured activation curve for a pass and dtype; nullptr when not measured.
const EfficiencyCurve* activation_curve(models::Pass pass, DType dtype, const DeviceProfile& dev) {
  const bool half = dtype_size(dtype) < 4;
  const bool fwd = pass == models::Pass::Forward;
  const EfficiencyCurve& c = half ? (fwd ? dev.activation_half : dev.activation_half_backward)
                                  : (fwd ? dev.activation : dev.activation_backward);
  return c.table.empty() ? nullptr : &c;
}
}  // namespace

double matmul_seconds(double flops, DType dtype, const DeviceProfile& dev) {
  double peak = dev.spec.peak(dtype).value();
  return flops / (peak * gemm_curve(false, dtype, dev).at(flops));
}

// Framework calls without a kernel cost host time on CPU devices only: a GPU
// host dispatches them while earlier kernels run.
static int dispatched_views(const models::OpSpec& op, const DeviceProfile& dev) {
  return dev.spec.kind == topology::DeviceKind::Cpu ? op.views : 0;
}

OpCost op_cost(const models::OpSpec& op, const DeviceProfile& dev, const PrecisionMode& prec) {
  OpCost c;
  DType dt = arithmetic_dtype(op, prec);
  int kernels = kernels_of(op);
  double elem = dtype_size(dt);
  c.flops = op.flops;
  c.bytes = (op.elements_read + op.elements_written) * elem;
  // Pointwise chains (GELU) re-read and re-write their tensor in every kernel.
  if (op.cls == OpClass::Elementwise && kernels > 1) c.bytes *= kernels * 0.75;
  double compute_s = 0;
  // A measured fused activation: its per-element compute rate in this dtype is the whole cost.
  if (op.cls == OpClass::Activation && op.flops > 0)
    if (const EfficiencyCurve* act = activation_curve(op.pass, dt, dev)) {
      c.memory_bound = false;
      c.launch = dev.launch_overhead * (kernels + dispatched_views(op, dev));
      c.time = Time::from_seconds(op.flops / (dev.spec.fp32_peak.value() * act->at(op.flops))) + c.launch;
      return c;
    }
  if (op.flops > 0) {
    double peak = dev.spec.peak(dt).value();
    double eff = 0.5;
    // Linears under O1 and fp32 linears have their own measured tables (see
    // DeviceProfile::matmul_o1, matmul_linear); other GEMMs the dtype's table.
    const bool o1_linear = prec.amp == AmpLevel::O1 && op.cls == OpClass::Matmul && !dev.matmul_o1.table.empty();
    const bool fp32_linear = prec.amp != AmpLevel::O1 && dt == DType::FP32 && op.cls == OpClass::Matmul &&
                             !dev.matmul_linear.table.empty();
    switch (op.cls) {
      case OpClass::Matmul:
        eff = (o1_linear ? dev.matmul_o1 : fp32_linear ? dev.matmul_linear : gemm_curve(false, dt, dev)).at(op.flops);
        break;
      case OpClass::BatchedMatmul: eff = gemm_curve(true, dt, dev).at(op.flops); break;
      default: eff = 0.5; break;  // vector units: non-matmul FLOPs rarely reach the matmul peak
    }
    if (op.cls != OpClass::Matmul && op.cls != OpClass::BatchedMatmul) peak = dev.spec.fp32_peak.value();
    compute_s = op.flops / (peak * eff);
  }
  // Measured 16-bit memory-class rates replace the fp32 curve for half data (see DeviceProfile::memory_half).
  const EfficiencyCurve& memc = dtype_size(dt) < 4 && !dev.memory_half.table.empty() ? dev.memory_half : dev.memory;
  double mem_s = c.bytes > 0 ? c.bytes / (dev.spec.memory_bandwidth.value() * memc.at(c.bytes / kernels)) : 0;
  // O1 casts fp32 weights and activations to half on every matmul call (in
  // `matmul_o1` when that was measured).
  if (prec.amp == AmpLevel::O1 && op.cls == OpClass::Matmul && op.pass == models::Pass::Forward &&
      dev.matmul_o1.table.empty()) {
    double weight_elems = static_cast<double>(op.k) * static_cast<double>(op.n);
    mem_s += weight_elems * 6.0 / (dev.spec.memory_bandwidth.value() * dev.memory.max);
    kernels += 1;
  }
  c.memory_bound = mem_s > compute_s;
  c.launch = dev.launch_overhead * (kernels + dispatched_views(op, dev));
  c.time = Time::from_seconds(std::max(compute_s, mem_s)) + c.launch;
  return c;
}

}  // namespace dptwin::sim
