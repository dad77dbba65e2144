// fuzz/fuzz_model.cpp — libFuzzer harness: model YAML (a preset name or a GPT-2
// mapping) -> parse_gpt2_config, then the tensors, counts and the workload of
// one sample, which must stay finite for every accepted config.
#include <cmath>
#include <cstdlib>

#include "core/yaml_reader.hpp"
#include "fuzz/fuzz_common.hpp"
#include "models/gpt2.hpp"
#include "models/workload.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dptwin::fuzz::expect_input_errors_only([&] {
    dptwin::YamlNode root = dptwin::load_yaml_string(dptwin::fuzz::as_text(data, size), "fuzz-model.yaml");
    dptwin::models::Gpt2Config cfg = dptwin::models::parse_gpt2_config(root);
    auto tensors = dptwin::models::gpt2_tensors(cfg);
    if (tensors.empty() || dptwin::models::parameter_count(cfg) <= 0) std::abort();
    if (!std::isfinite(dptwin::models::training_flops_per_token_estimate(cfg))) std::abort();
    auto work = dptwin::models::build_gpt2_workload(cfg, 1);
    if (!std::isfinite(work.total_flops())) std::abort();
  });
  return 0;
}
