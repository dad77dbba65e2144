#include <doctest.h>

#include "sim/compute_model.hpp"

using namespace dptwin;
using namespace dptwin::sim;

namespace {
DeviceProfile test_device() {
  DeviceProfile p;
  p.spec.name = "test";
  p.spec.fp32_peak = tflop_per_s(10);
  p.spec.fp16_peak = tflop_per_s(100);
  p.spec.bf16_peak = tflop_per_s(100);
  p.spec.memory_bandwidth = gbyte_per_s(1000);
  p.spec.memory = gib(16);
  p.matmul = {0.5, 0};
  p.batched_matmul = {0.5, 0};
  p.memory = {0.5, 0};
  p.launch_overhead = Time::us(5);
  return p;
}
}  // namespace

TEST_CASE("a large matmul is compute bound: FLOPs / (peak x efficiency) + launch") {
  models::OpSpec op;
  op.cls = models::OpClass::Matmul;
  op.m = 4096, op.n = 4096, op.k = 4096;
  op.flops = 2.0 * 4096 * 4096 * 4096;  // 137.4 GFLOP
  op.elements_read = 2.0 * 4096 * 4096;
  op.elements_written = 4096.0 * 4096;
  PrecisionMode fp32;
  OpCost c = op_cost(op, test_device(), fp32);
  // 137.44e9 / (10e12 * 0.5) = 27.49 ms, plus 5 us launch.
  CHECK_FALSE(c.memory_bound);
  CHECK(c.time.seconds() == doctest::Approx(op.flops / 5e12 + 5e-6).epsilon(1e-6));
  // Under O2 fp16 the same matmul uses the 100 TFLOP/s peak: 10x faster compute.
  PrecisionMode o2{AmpLevel::O2, DType::FP16};
  CHECK(op_cost(op, test_device(), o2).time.seconds() == doctest::Approx(op.flops / 50e12 + 5e-6).epsilon(1e-6));
}

TEST_CASE("an elementwise op is memory bound: bytes / (bandwidth x efficiency) + launch") {
  models::OpSpec op;
  op.cls = models::OpClass::Elementwise;
  op.name = "h.0.attn.residual.fwd";
  op.flops = 1e6;
  op.elements_read = 2e6;
  op.elements_written = 1e6;
  PrecisionMode fp32;
  OpCost c = op_cost(op, test_device(), fp32);
  // 3e6 elements x 4 bytes = 12 MB at 500 GB/s effective = 24 us, + 5 us.
  CHECK(c.memory_bound);
  CHECK(c.time.seconds() == doctest::Approx(24e-6 + 5e-6).epsilon(1e-6));
  // Halving the element size halves the memory time (O2 in fp16).
  PrecisionMode o2{AmpLevel::O2, DType::FP16};
  CHECK(op_cost(op, test_device(), o2).time.seconds() == doctest::Approx(12e-6 + 5e-6).epsilon(1e-6));
}

TEST_CASE("GELU launches eight kernels in eager mode") {
  models::OpSpec op;
  op.cls = models::OpClass::Elementwise;
  op.name = "h.0.mlp.gelu.fwd";
  CHECK(kernels_of(op) == 8);
  op.name = "h.0.attn.residual.fwd";
  CHECK(kernels_of(op) == 1);
}

TEST_CASE("efficiency curves saturate") {
  EfficiencyCurve c{0.8, 1e9};
  CHECK(c.at(1e9) == doctest::Approx(0.4));
  CHECK(c.at(1e12) == doctest::Approx(0.8).epsilon(0.01));
  CHECK(EfficiencyCurve{0.7, 0}.at(5) == doctest::Approx(0.7));
}
