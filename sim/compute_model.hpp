// sim/compute_model.hpp — how long an op takes on a device.
//
// Roofline per op: time = max(FLOPs / (peak(dtype) x eff_class(FLOPs)),
//                              bytes / (memory bandwidth x eff_mem(bytes)))
//                         + (kernels + framework view calls) x launch overhead,
// with fused activations (tanh-GELU) and O1 linears on their own measured tables.
// where the dtype is the op's arithmetic type under the precision mode and
// bytes = elements x element size. Pure functions of plain structs.
#pragma once

#include "core/precision.hpp"
#include "core/units.hpp"
#include "models/workload.hpp"
#include "sim/device_profile.hpp"

namespace dptwin::sim {

struct OpCost {
  Time time;        // total, including launch overhead
  Time launch;      // of which: launch/dispatch overhead
  double flops = 0;
  double bytes = 0;
  bool memory_bound = false;
};

// Eager-mode kernels launched for an op (GELU in HF GPT-2 is 8 pointwise kernels,
// the attention softmax block is scale + mask + softmax + dropout, ...).
int kernels_of(const models::OpSpec& op);

// REQUIRES: the device profile has positive peaks and bandwidth.
OpCost op_cost(const models::OpSpec& op, const DeviceProfile& dev, const PrecisionMode& prec);

// Roofline of a memory-bound pass over `bytes` in `kernels` kernels.
Time memory_pass_time(double bytes, int kernels, const DeviceProfile& dev);
// One tensor's eager per-tensor pass (optimizer, clipping, zeroing): `kernels`
// launches or the memory sweep of `bytes`, whichever is longer.
Time tensor_pass_time(double bytes, int kernels, const DeviceProfile& dev);

// Seconds of a dense matmul of `flops` in `dtype` (no launch), for calibration fits.
double matmul_seconds(double flops, DType dtype, const DeviceProfile& dev);

}  // namespace dptwin::sim
