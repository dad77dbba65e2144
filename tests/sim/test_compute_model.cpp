#include <doctest.h>

#include <algorithm>

#include "models/gpt2.hpp"
#include "models/workload.hpp"
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

models::OpSpec find_op(const std::vector<models::OpSpec>& ops, const std::string& name) {
  for (const auto& op : ops)
    if (op.name == name) return op;
  FAIL("no op " << name);
  return models::OpSpec{};
}

// A Linear's GEMM C[m,n] = A[m,k] B[k,n] in one pass.
models::OpSpec linear_op(int64_t m, int64_t k, int64_t n, models::Pass pass) {
  models::OpSpec op;
  op.cls = models::OpClass::Matmul;
  op.pass = pass;
  op.m = m, op.k = k, op.n = n;
  op.flops = 2.0 * m * k * n;
  op.elements_read = static_cast<double>(m * k + k * n);
  op.elements_written = static_cast<double>(m * n);
  return op;
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
  CHECK(c.time.seconds() == doctest::Approx(op.flops / 5e12 + 5e-6).epsilon(1e-6).scale(0));
  // Under O2 fp16 the same matmul uses the 100 TFLOP/s peak: 10x faster compute.
  PrecisionMode o2{AmpLevel::O2, DType::FP16};
  CHECK(op_cost(op, test_device(), o2).time.seconds() == doctest::Approx(op.flops / 50e12 + 5e-6).epsilon(1e-6).scale(0));
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
  CHECK(c.time.seconds() == doctest::Approx(24e-6 + 5e-6).epsilon(1e-6).scale(0));
  // Halving the element size halves the memory time (O2 in fp16).
  PrecisionMode o2{AmpLevel::O2, DType::FP16};
  CHECK(op_cost(op, test_device(), o2).time.seconds() == doctest::Approx(12e-6 + 5e-6).epsilon(1e-6).scale(0));
}

TEST_CASE("GELU: eight kernels forward and twelve backward in eager mode, one each way fused, and faster fused") {
  auto gelu_ops = [](models::Gpt2Config::Gelu g, bool dropout) {
    models::Gpt2Config cfg = *models::find_gpt2_preset("small");
    cfg.gelu = g;
    cfg.dropout = dropout;
    return models::build_gpt2_workload(cfg, 8);
  };
  const models::Workload eager = gelu_ops(models::Gpt2Config::Gelu::Eager, true);
  const models::Workload fused = gelu_ops(models::Gpt2Config::Gelu::Fused, false);
  CHECK(kernels_of(find_op(eager.forward, "h.0.mlp.gelu.fwd")) == 8);
  CHECK(kernels_of(find_op(eager.backward, "h.0.mlp.gelu.bwd")) == 12);
  CHECK(kernels_of(find_op(fused.forward, "h.0.mlp.gelu.fwd")) == 1);
  CHECK(kernels_of(find_op(fused.backward, "h.0.mlp.gelu.bwd")) == 1);
  CHECK(kernels_of(find_op(eager.forward, "h.0.attn.residual.fwd")) == 1);
  const PrecisionMode fp32{AmpLevel::None, DType::FP32};
  CHECK(op_cost(find_op(fused.forward, "h.0.mlp.gelu.fwd"), test_device(), fp32).time <
        op_cost(find_op(eager.forward, "h.0.mlp.gelu.fwd"), test_device(), fp32).time);
  // Without dropout the dropout ops are gone, nothing else.
  auto count = [](const models::Workload& w, const std::string& part) {
    int n = 0;
    for (const auto& o : w.forward) n += o.name.find(part) != std::string::npos;
    return n;
  };
  CHECK(count(eager, "dropout") == 1 + 3 * 4);
  CHECK(count(fused, "dropout") == 0);
  CHECK(eager.forward.size() - fused.forward.size() == 13);
}

TEST_CASE("a measured 16-bit GEMM table prices half GEMMs; fp32 GEMMs keep the fp32 curve") {
  models::OpSpec op;
  op.cls = models::OpClass::Matmul;
  op.flops = 1e9;
  DeviceProfile dev = test_device();
  const PrecisionMode o2{AmpLevel::O2, DType::BF16}, fp32{AmpLevel::None, DType::FP32};
  const double shared = op_cost(op, dev, o2).time.seconds();
  const double fp32_time = op_cost(op, dev, fp32).time.seconds();
  dev.matmul_half.table = {{1e6, 0.25}, {1e12, 0.25}};  // half the shared curve's 0.5
  CHECK(op_cost(op, dev, o2).time.seconds() - 5e-6 == doctest::Approx(2 * (shared - 5e-6)).scale(0));
  CHECK(op_cost(op, dev, fp32).time.seconds() == doctest::Approx(fp32_time));
}

TEST_CASE("efficiency curves saturate") {
  EfficiencyCurve c{0.8, 1e9};
  CHECK(c.at(1e9) == doctest::Approx(0.4));
  CHECK(c.at(1e12) == doctest::Approx(0.8).epsilon(0.01));
  CHECK(EfficiencyCurve{0.7, 0}.at(5) == doctest::Approx(0.7));
}

TEST_CASE("a fused GELU is an activation op priced by its measured per-pass, per-dtype table") {
  models::Gpt2Config cfg = *models::find_gpt2_preset("paper");
  cfg.gelu = models::Gpt2Config::Gelu::Fused;
  const models::Workload w = models::build_gpt2_workload(cfg, 2);
  const models::OpSpec fwd = find_op(w.forward, "h.0.mlp.gelu.fwd"), bwd = find_op(w.backward, "h.0.mlp.gelu.bwd");
  CHECK(fwd.cls == models::OpClass::Activation);
  CHECK(bwd.cls == models::OpClass::Activation);
  const double elems = fwd.elements_written;
  CHECK(fwd.flops == doctest::Approx(models::kGeluFlopsPerElementForward * elems));
  CHECK(bwd.flops == doctest::Approx(models::kGeluFlopsPerElementBackward * elems));
  DeviceProfile dev = test_device();
  const PrecisionMode fp32{AmpLevel::None, DType::FP32}, o1{AmpLevel::O1, DType::BF16};
  // Not measured: priced like any memory-bound op (bytes / bandwidth), bf16 moving half the bytes.
  const double mem_fp32 = op_cost(fwd, dev, fp32).time.seconds();
  CHECK(mem_fp32 == doctest::Approx((fwd.elements_read + fwd.elements_written) * 4 / 500e9 + 5e-6).scale(0));
  CHECK(op_cost(fwd, dev, o1).time.seconds() < mem_fp32);
  // Measured: FLOPs / (fp32 peak x table efficiency); here bf16 runs 2.5x slower than fp32.
  dev.activation.table = {{1e3, 0.02}, {1e12, 0.02}};
  dev.activation_backward.table = {{1e3, 0.03}, {1e12, 0.03}};
  dev.activation_half.table = {{1e3, 0.008}, {1e12, 0.008}};
  dev.activation_half_backward.table = {{1e3, 0.01}, {1e12, 0.01}};
  CHECK(op_cost(fwd, dev, fp32).time.seconds() == doctest::Approx(fwd.flops / (10e12 * 0.02) + 5e-6).scale(0));
  CHECK(op_cost(bwd, dev, fp32).time.seconds() == doctest::Approx(bwd.flops / (10e12 * 0.03) + 5e-6).scale(0));
  CHECK(op_cost(fwd, dev, o1).time.seconds() == doctest::Approx(fwd.flops / (10e12 * 0.008) + 5e-6).scale(0));
  CHECK(op_cost(bwd, dev, o1).time.seconds() == doctest::Approx(bwd.flops / (10e12 * 0.01) + 5e-6).scale(0));
  CHECK_FALSE(op_cost(fwd, dev, o1).memory_bound);
  // An eager GELU chain stays a memory-bound elementwise op.
  cfg.gelu = models::Gpt2Config::Gelu::Eager;
  const models::Workload eager = models::build_gpt2_workload(cfg, 2);
  CHECK(find_op(eager.forward, "h.0.mlp.gelu.fwd").cls == models::OpClass::Elementwise);
}

TEST_CASE("O1 linears use the measured autocast-linear table; O2 keeps the half GEMM table") {
  models::OpSpec op = linear_op(512, 128, 512, models::Pass::Forward);
  DeviceProfile dev = test_device();
  dev.matmul_half.table = {{1e3, 0.6}, {1e12, 0.6}};
  const PrecisionMode o1{AmpLevel::O1, DType::BF16}, o2{AmpLevel::O2, DType::BF16};
  // Without the O1 table: the half GEMM plus a cast of the weight (an extra kernel).
  const double cast_priced = op_cost(op, dev, o1).time.seconds();
  CHECK(cast_priced > op.flops / (100e12 * 0.6) + 5e-6);
  dev.matmul_o1.table = {{1e3, 0.2}, {1e12, 0.2}};
  // Times are whole nanoseconds: 1e-4 relative at a few microseconds.
  CHECK(op_cost(op, dev, o1).time.seconds() == doctest::Approx(op.flops / (100e12 * 0.2) + 5e-6).epsilon(1e-4).scale(0));
  // O2 at 0.6 of the bf16 peak (1.12 us) is memory-bound on this device: 786 KB of bf16 operands and
  // output at half of 1000 GB/s (1.57 us), the roofline's larger term.
  const double bytes = (op.elements_read + op.elements_written) * 2;
  CHECK(op_cost(op, dev, o2).time.seconds() ==
        doctest::Approx(std::max(op.flops / (100e12 * 0.6), bytes / (1000e9 * 0.5)) + 5e-6).epsilon(1e-4).scale(0));
  CHECK(op_cost(op, dev, o2).memory_bound);
  op.pass = models::Pass::Backward;
  CHECK(op_cost(op, dev, o1).time.seconds() == doctest::Approx(op.flops / (100e12 * 0.2) + 5e-6).epsilon(1e-4).scale(0));
}

TEST_CASE("fp32 linears use the measured fp32 Linear table; O1 linears and batched GEMMs do not") {
  models::OpSpec op = linear_op(2048, 768, 768, models::Pass::Backward);
  DeviceProfile dev = test_device();
  const PrecisionMode fp32, o1{AmpLevel::O1, DType::BF16};
  const double table = op_cost(op, dev, fp32).time.seconds();
  CHECK(table == doctest::Approx(op.flops / (dev.spec.fp32_peak.value() * dev.matmul.at(op.flops)) + 5e-6).epsilon(1e-4).scale(0));
  dev.matmul_linear.table = {{1e3, 0.9}, {1e12, 0.9}};
  CHECK(op_cost(op, dev, fp32).time.seconds() ==
        doctest::Approx(op.flops / (dev.spec.fp32_peak.value() * 0.9) + 5e-6).epsilon(1e-4).scale(0));
  CHECK(op_cost(op, dev, fp32).time.seconds() < table);
  // O1 linears keep their own path (no O1 table here: the half GEMM table and a cast).
  DeviceProfile no_linear = dev;
  no_linear.matmul_linear.table.clear();
  CHECK(op_cost(op, dev, o1).time.seconds() == doctest::Approx(op_cost(op, no_linear, o1).time.seconds()).scale(0));
  // Attention's batched GEMMs keep the batched table.
  op.cls = models::OpClass::BatchedMatmul;
  op.batch = 1;
  CHECK(op_cost(op, dev, fp32).time.seconds() == doctest::Approx(op_cost(op, no_linear, fp32).time.seconds()).scale(0));
}

TEST_CASE("framework view calls are dispatched like kernels: each adds one launch overhead") {
  models::Gpt2Config cfg = *models::find_gpt2_preset("paper");
  const models::Workload w = models::build_gpt2_workload(cfg, 1);
  // Conv1D: reshape + view around the addmm; attention scores: split heads and matmul's folding.
  CHECK(find_op(w.forward, "h.0.attn.c_attn.fwd").views == 2);
  CHECK(find_op(w.backward, "h.0.attn.c_attn.bwd_input").views == 2);
  CHECK(find_op(w.forward, "h.0.attn.scores.fwd").views == 13);
  CHECK(find_op(w.backward, "h.0.attn.scores.bwd_query").views == 13);
  CHECK(find_op(w.forward, "h.0.mlp.gelu.fwd").views == 0);
  models::OpSpec op = find_op(w.forward, "h.0.attn.c_attn.fwd");
  DeviceProfile cpu = test_device();
  cpu.spec.kind = topology::DeviceKind::Cpu;
  const DeviceProfile gpu = test_device();
  const PrecisionMode fp32;
  const Time cpu_views = op_cost(op, cpu, fp32).launch, gpu_views = op_cost(op, gpu, fp32).launch;
  op.views = 0;
  CHECK(cpu_views.seconds() == doctest::Approx(op_cost(op, cpu, fp32).launch.seconds() + 2 * 5e-6).scale(0));
  // On a GPU the host dispatches views while kernels run: no cost.
  CHECK(gpu_views.seconds() == doctest::Approx(op_cost(op, gpu, fp32).launch.seconds()));
}
