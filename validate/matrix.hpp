// validate/matrix.hpp — a validation matrix: the real runs `dptwin validate` compares.
//
// YAML format (scenarios/validation/README.md has the full reference):
//
//   name: localhost-default
//   description: text
//   cluster: localhost-cpu        # preset, or a cluster YAML path (relative to the matrix)
//   backend: gloo                 # gloo | mpi: the exec comm backend
//   threads: 1                    # intra-op threads per rank
//   steps: 10                     # optimizer steps run per case
//   warmup_steps: 3               # first steps excluded from the measured median
//   repeats: 1                    # runs per case; the median of their medians is used
//   emulated: false               # ranks run in network namespaces of one machine (see netns)
//   netns: {namespaces: [dpt0, dpt1], addresses: [10.77.0.1, 10.77.0.2], interface: veth0, port: 29500}
//   ranking_tie_pct: 3            # measured step times closer than this are a tie for the ranking
//   grids:                        # each grid is a cartesian product; cases are their union
//     - {model: [tiny, small], strategy: [sps, dps, horovod], ranks: [2, 4],
//        precision: [fp32, bf16], micro_batch: [4], seq_len: [0],
//        steps: 120, warmup_steps: 20}   # optional: this grid's own run length
//
// Every key is checked (unknown keys are errors naming file, line and key).
// Precision fp32 runs without amp; bf16 runs Apex-O1-style autocast in bf16.
//
// Thread-safety: value types and pure functions.
#pragma once

#include <string>
#include <vector>

#include "core/yaml_reader.hpp"

namespace dptwin::validate {

struct ValidationCase {
  std::string model = "tiny";      // models/ preset
  std::string strategy = "dps";    // single | sps | dps | horovod
  int ranks = 1;
  std::string precision = "fp32";  // fp32 | bf16
  int micro_batch = 4;
  int seq_len = 0;                 // 0 = the model's n_ctx
  int steps = 0;                   // this case's run length; 0 = the matrix's steps / warmup_steps
  int warmup_steps = 0;
  // Label used in tables, e.g. "small dps x4 bf16 mb4".
  std::string label() const;
  // The configuration without the strategy: strategies are ranked within it.
  std::string group_key() const;
};

struct NetnsLaunch {
  std::vector<std::string> namespaces;  // one per rank (rank r runs in namespaces[r])
  std::vector<std::string> addresses;   // IPv4 address of rank r's interface
  std::string interface = "veth0";      // GLOO_SOCKET_IFNAME inside each namespace
  int port = 29500;                     // TCP store port on addresses[0]
};

struct ValidationMatrix {
  std::string name;
  std::string description;
  std::string file;                 // the matrix file ("" for built-in)
  std::string cluster = "localhost-cpu";  // preset name or absolute path of a cluster YAML
  std::string backend = "gloo";
  int threads = 1;
  std::string bind = "auto";        // ranks bound to cores: auto (while they fit, as mpirun) | core | none (dptwin exec --bind)
  int steps = 10;
  int warmup_steps = 3;
  int repeats = 1;
  bool emulated = false;
  NetnsLaunch netns;
  double ranking_tie_pct = 3.0;
  std::vector<ValidationCase> cases;
};

// Parses a matrix; errors are InputError naming file, line, column and key.
// `base_dir` resolves relative cluster paths.
ValidationMatrix parse_matrix(const YamlNode& root, const std::string& base_dir);
ValidationMatrix load_matrix(const std::string& path);

// The built-in default matrix (scenarios/validation/localhost-default.yaml's text).
std::string default_matrix_text();

}  // namespace dptwin::validate
