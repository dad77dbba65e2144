// Validation matrices: expansion, and errors located at file:line with the key.
#include <doctest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.hpp"
#include "validate/matrix.hpp"

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
  CHECK(m.cases.front().strategy == "single");
  CHECK(m.cases.front().ranks == 1);
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
  e = error_of("name: x\nemulated: true\ngrids:\n  - {model: tiny, strategy: dps, ranks: 2}\n");
  CHECK(e.find("netns") != std::string::npos);
  e = error_of("name: x\ngrids:\n  - {model: tiny, strategy: dps, ranks: 2, precision: fp8}\n");
  CHECK(e.find("unknown precision 'fp8'") != std::string::npos);
}

TEST_CASE("case labels and ranking groups") {
  ValidationCase a{"small", "dps", 4, "bf16", 8, 0}, b{"small", "sps", 4, "bf16", 8, 0}, c{"small", "dps", 2, "bf16", 8, 0};
  CHECK(a.label() == "small dps x4 bf16 mb8");
  CHECK(a.group_key() == b.group_key());
  CHECK(a.group_key() != c.group_key());
}
