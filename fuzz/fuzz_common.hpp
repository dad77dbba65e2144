// fuzz/fuzz_common.hpp — shared by the libFuzzer harnesses (fuzz/README.md).
//
// The contract under test: a parser given any bytes either returns or throws
// dptwin::InputError. Any other exception escapes the harness and aborts
// (std::terminate), which libFuzzer reports as a crash; ASan/UBSan report
// memory errors and undefined behaviour; -timeout reports hangs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.hpp"

namespace dptwin::fuzz {

// The input as text; the file name used in messages is `name`.
inline std::string as_text(const uint8_t* data, size_t size) { return std::string(reinterpret_cast<const char*>(data), size); }

// Runs `f`, swallowing InputError only.
template <typename F>
void expect_input_errors_only(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    // The message must be formed without touching freed memory.
    volatile size_t n = std::string(e.what()).size();
    (void)n;
  }
}

}  // namespace dptwin::fuzz
