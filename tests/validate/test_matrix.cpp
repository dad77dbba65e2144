// Validation matrices: expansion, and errors located at file:line with the key.
#include <doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.hpp"
#include "validate/matrix.hpp"
#include "validate/validation.hpp"

using namespace dptwin;
using namespace dptwin::validate;

namespace {
std::string error_of(const std::string& text) {
  try {
    parse_matrix(load_yaml_string(text, "m.yaml"), ".");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("the default matrix expands to single + 3 strategies x 2 rank counts x 2 models x 2 precisions") {
  ValidationMatrix m = parse_matrix(load_yaml_string(default_matrix_text(), "default"), ".");
  CHECK(m.cases.size() == 4 + 24);
  CHECK(m.backend == "gloo");
  CHECK(m.cluster == "localhost-cpu");
  CHECK(m.bind == "auto");  // as mpirun: bound while the ranks fit the cores
  CHECK(m.cases.front().strategy == "single");
  CHECK(m.cases.front().ranks == 1);
  // Tiny cases run 120 steps (20 warm-up), small ones the matrix's 24 (6).
  for (const auto& c : m.cases) {
    CHECK(c.steps == (c.model == "tiny" ? 120 : 24));
    CHECK(c.warmup_steps == (c.model == "tiny" ? 20 : 6));
  }
  // The shipped file is the built-in text.
  const auto file = std::filesystem::path(DPTWIN_SOURCE_DIR) / "scenarios/validation/localhost-default.yaml";
  if (std::filesystem::exists(file)) {
    std::ifstream f(file);
    std::stringstream ss;
    ss << f.rdbuf();
    CHECK(ss.str() == default_matrix_text());
  }
}

TEST_CASE("matrix errors name the file, line and key") {
  const std::string base = "name: x\ngrids:\n  - {model: tiny, strategy: dps, ranks: 2}\n";
  CHECK(error_of(base).empty());
  std::string e = error_of("name: x\nstepz: 3\ngrids:\n  - {model: tiny, strategy: dps, ranks: 2}\n");
  CHECK(e.find("m.yaml:2") != std::string::npos);
  CHECK(e.find("stepz") != std::string::npos);
  e = error_of("name: x\ngrids:\n  - {model: tiny, strategy: zero3, ranks: 2}\n");
  CHECK(e.find("m.yaml:3") != std::string::npos);
  CHECK(e.find("unknown strategy 'zero3'") != std::string::npos);
  e = error_of("name: x\ngrids:\n  - {model: tiny, strategy: single, ranks: [1, 2]}\n");
  CHECK(e.find("single runs on 1 rank") != std::string::npos);
  e = error_of("name: x\nbackend: nccl\ngrids:\n  - {model: tiny, strategy: dps, ranks: 2}\n");
  CHECK(e.find("m.yaml:2") != std::string::npos);
  e = error_of("name: x\nsteps: 4\nwarmup_steps: 4\ngrids:\n  - {model: tiny, strategy: dps, ranks: 2}\n");
  CHECK(e.find("warmup_steps") != std::string::npos);
  // A grid's own run length: warm-up below its steps, and its steps above the matrix's warm-up.
  e = error_of("name: x\ngrids:\n  - {model: tiny, strategy: dps, ranks: 2, steps: 10, warmup_steps: 10}\n");
  CHECK(e.find("m.yaml:3") != std::string::npos);
  CHECK(e.find("warmup_steps must be below steps") != std::string::npos);
  e = error_of("name: x\nwarmup_steps: 8\ngrids:\n  - {model: tiny, strategy: dps, ranks: 2, steps: 6}\n");
  CHECK(e.find("m.yaml:4") != std::string::npos);
  CHECK(e.find("above the matrix's warmup_steps (8)") != std::string::npos);
  CHECK(error_of("name: x\nwarmup_steps: 8\ngrids:\n  - {model: tiny, strategy: dps, ranks: 2, steps: 6, warmup_steps: 2}\n").empty());
  e = error_of("name: x\nemulated: true\ngrids:\n  - {model: tiny, strategy: dps, ranks: 2}\n");
  CHECK(e.find("netns") != std::string::npos);
  e = error_of("name: x\nbind: socket\ngrids:\n  - {model: tiny, strategy: dps, ranks: 2}\n");
  CHECK(e.find("m.yaml:2") != std::string::npos);
  CHECK(e.find("bind must be auto, core or none") != std::string::npos);
  e = error_of("name: x\ngrids:\n  - {model: tiny, strategy: dps, ranks: 2, precision: fp8}\n");
  CHECK(e.find("unknown precision 'fp8'") != std::string::npos);
}

TEST_CASE("a case runs with its grid's steps, else the matrix's") {
  ValidationMatrix m = parse_matrix(
      load_yaml_string("name: x\nsteps: 12\nwarmup_steps: 2\ngrids:\n"
                       "  - {model: tiny, strategy: dps, ranks: 2, steps: 50, warmup_steps: 5}\n"
                       "  - {model: small, strategy: dps, ranks: 2}\n"
                       "  - {model: small, strategy: sps, ranks: 2, steps: 30}\n",
                       "m.yaml"),
      ".");
  REQUIRE(m.cases.size() == 3);
  auto arg_after = [](const std::vector<std::string>& a, const std::string& flag) {
    for (size_t i = 0; i + 1 < a.size(); ++i)
      if (a[i] == flag) return a[i + 1];
    return std::string();
  };
  const auto tiny = exec_args(m, m.cases[0]), small = exec_args(m, m.cases[1]), sps = exec_args(m, m.cases[2]);
  CHECK(arg_after(tiny, "--steps") == "50");
  CHECK(arg_after(tiny, "--warmup-steps") == "5");
  CHECK(arg_after(small, "--steps") == "12");
  CHECK(arg_after(small, "--warmup-steps") == "2");
  CHECK(arg_after(sps, "--steps") == "30");  // its own steps, the matrix's warm-up
  CHECK(arg_after(tiny, "--bind") == "auto");   // the matrix's binding (default auto), passed to dptwin exec
  m = parse_matrix(load_yaml_string("name: x\nbind: none\ngrids:\n  - {model: tiny, strategy: dps, ranks: 2}\n", "m.yaml"), ".");
  CHECK(arg_after(exec_args(m, m.cases[0]), "--bind") == "none");
  CHECK(arg_after(sps, "--warmup-steps") == "2");
}

TEST_CASE("case labels and ranking groups") {
  ValidationCase a{"small", "dps", 4, "bf16", 8, 0}, b{"small", "sps", 4, "bf16", 8, 0}, c{"small", "dps", 2, "bf16", 8, 0};
  CHECK(a.label() == "small dps x4 bf16 mb8");
  CHECK(a.group_key() == b.group_key());
  CHECK(a.group_key() != c.group_key());
}

TEST_CASE("the speed probes run bound as the matrix's ranks are") {
  ValidationMatrix m =
      parse_matrix(load_yaml_string("name: x\nbind: none\ngrids:\n  - {model: tiny, strategy: dps, ranks: 2}\n", "m.yaml"), ".");
  auto specs = speed_probe_specs(m, "/bin/mb", {"a.json"});
  REQUIRE(specs.size() == 1);
  CHECK(specs[0].cpus.empty());
  CHECK(specs[0].argv == std::vector<std::string>{"/bin/mb", "--mode", "speed", "--threads", "1", "--out", "a.json"});
  m.bind = "core";
  specs = speed_probe_specs(m, "/bin/mb", {"a.json", "b.json"});
  REQUIRE(specs.size() == 2);
  const int cores = dptwin::exec::usable_cores();
  CHECK(specs[0].cpus == std::vector<int>{0});
  CHECK(specs[1].cpus == std::vector<int>{1 % cores});  // rank 1's core, as dptwin exec binds it
  CHECK(specs[1].argv.back() == "b.json");
  m.bind = "auto";  // one probe: bound to the first core, as a one-rank calibration's suite
  CHECK(speed_probe_specs(m, "/bin/mb", {"a.json"})[0].cpus == std::vector<int>{0});
  // --run-states' probes take the cores in turn: the slot-th on rank slot's core.
  for (int slot = 0; slot < 5; ++slot)
    CHECK(speed_probe_specs(m, "/bin/mb", {"a.json"}, slot)[0].cpus == std::vector<int>{slot % cores});
  specs = speed_probe_specs(m, "/bin/mb", {"a.json", "b.json"}, 1);  // two at once, shifted by one core
  if (cores >= 2) {
    CHECK(specs[0].cpus == std::vector<int>{1});
    CHECK(specs[1].cpus == std::vector<int>{2 % cores});
  }
  m.bind = "none";  // unbound: the shift changes nothing
  CHECK(speed_probe_specs(m, "/bin/mb", {"a.json"}, 3)[0].cpus.empty());
}
