// fuzz/fuzz_profile.cpp — libFuzzer harness: device profile / calibration
// `device:` section -> apply_profile_yaml, and device spec -> parse_device_spec
// (both are mappings of figures with units; each input goes to both).
#include "core/yaml_reader.hpp"
#include "fuzz/fuzz_common.hpp"
#include "sim/device_profile.hpp"
#include "topology/device_spec.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text = dptwin::fuzz::as_text(data, size);
  dptwin::fuzz::expect_input_errors_only([&] {
    dptwin::YamlNode root = dptwin::load_yaml_string(text, "fuzz-profile.yaml");
    dptwin::sim::DeviceProfile p = dptwin::sim::default_profile(dptwin::topology::device_catalog().front());
    dptwin::sim::apply_profile_yaml(root, p);
  });
  dptwin::fuzz::expect_input_errors_only([&] {
    dptwin::YamlNode root = dptwin::load_yaml_string(text, "fuzz-device.yaml");
    dptwin::topology::DeviceSpec d = dptwin::topology::parse_device_spec(root);
    (void)d;
  });
  return 0;
}
