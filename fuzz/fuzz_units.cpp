// fuzz/fuzz_units.cpp — libFuzzer harness: scalar readers of core/yaml_reader
// (numbers, integers, booleans, sizes, bandwidths, durations, FLOP rates) on
// any text, both as a YAML scalar and through the CLI parse_* functions.
#include <yaml-cpp/yaml.h>

#include <memory>

#include "core/yaml_reader.hpp"
#include "fuzz/fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace dptwin;
  const std::string text = fuzz::as_text(data, size);
  const YamlNode n(YAML::Node(text), std::make_shared<const std::string>("fuzz-units.yaml"), "value");
  fuzz::expect_input_errors_only([&] { (void)n.as<double>(); });
  fuzz::expect_input_errors_only([&] { (void)n.as<int>(); });
  fuzz::expect_input_errors_only([&] { (void)n.as<int64_t>(); });
  fuzz::expect_input_errors_only([&] { (void)n.as<bool>(); });
  fuzz::expect_input_errors_only([&] { (void)n.as_positive_int(); });
  fuzz::expect_input_errors_only([&] { (void)n.as_bytes(); });
  fuzz::expect_input_errors_only([&] { (void)n.as_bandwidth(); });
  fuzz::expect_input_errors_only([&] { (void)n.as_time(); });
  fuzz::expect_input_errors_only([&] { (void)n.as_flop_rate(); });
  fuzz::expect_input_errors_only([&] { (void)parse_bytes(text, "--size"); });
  fuzz::expect_input_errors_only([&] { (void)parse_bandwidth(text, "--bandwidth"); });
  fuzz::expect_input_errors_only([&] { (void)parse_time(text, "--time"); });
  (void)closest_match(text, {"micro_batch", "accumulation", "devices", "strategy"});
  return 0;
}
