// tests/exec/worker_helpers.hpp — what the tests that launch dptwin-exec share:
// the worker binary (DPTWIN_EXEC_WORKER, set by meson) and reading its result
// JSON. Include after torch_doctest.hpp (uses doctest's REQUIRE_MESSAGE).
#pragma once

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

inline std::string worker() {
  const char* w = std::getenv("DPTWIN_EXEC_WORKER");
  REQUIRE_MESSAGE(w != nullptr, "DPTWIN_EXEC_WORKER must point at dptwin-exec");
  return w;
}

inline nlohmann::json load_json(const std::string& path) {
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), "no result at " << path);
  nlohmann::json j;
  in >> j;
  return j;
}
