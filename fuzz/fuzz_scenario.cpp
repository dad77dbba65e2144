// fuzz/fuzz_scenario.cpp — libFuzzer harness: scenario YAML -> parse_scenario.
// Paths in the input (cluster files, calibration) resolve against the current
// directory, as for a scenario file there; run it from the repository root.
#include "core/yaml_reader.hpp"
#include "fuzz/fuzz_common.hpp"
#include "sim/scenario.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dptwin::fuzz::expect_input_errors_only([&] {
    dptwin::YamlNode root = dptwin::load_yaml_string(dptwin::fuzz::as_text(data, size), "fuzz-scenario.yaml");
    dptwin::sim::Scenario sc = dptwin::sim::parse_scenario(root);
    (void)sc;
  });
  return 0;
}
