// fuzz/fuzz_cluster.cpp — libFuzzer harness: cluster YAML (template or explicit
// graph, with device specs) -> parse_cluster, then build_topology for a small
// job (1..64 devices, taken from the input's length) so that expansion and
// graph validation run too.
#include "core/yaml_reader.hpp"
#include "fuzz/fuzz_common.hpp"
#include "topology/cluster.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  dptwin::fuzz::expect_input_errors_only([&] {
    dptwin::YamlNode root = dptwin::load_yaml_string(dptwin::fuzz::as_text(data, size), "fuzz-cluster.yaml");
    dptwin::topology::ClusterSpec spec = dptwin::topology::parse_cluster(root);
    int devices = 1 + static_cast<int>(size % 64);
    if (spec.max_devices() > 0 && devices > spec.max_devices()) devices = spec.max_devices();
    dptwin::topology::Topology t = dptwin::topology::build_topology(spec, devices);
    (void)t;
  });
  return 0;
}
