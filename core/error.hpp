// core/error.hpp — the one error policy of dptwin.
//
// Bad user input raises InputError, which carries where it was found (file,
// line, column) and the key path ("topology.links[2].bandwidth"), plus what was
// expected. Layers add context as the error travels up ("while loading scenario
// 'x.yaml': ..."). Broken invariants are assertions (DPTWIN_ASSERT), not
// InputErrors. Library code never exits; only main() maps errors to exit codes
// (kExitInputError for InputError).
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

namespace dptwin {

inline constexpr int kExitInputError = 2;
inline constexpr int kExitRuntimeError = 1;

// Where in an input file something was found. line/column are 1-based; 0 = unknown.
struct SourceLocation {
  std::string file;
  int line = 0;
  int column = 0;
};

class InputError : public std::runtime_error {
 public:
  InputError(SourceLocation where, std::string key, std::string message);

  const SourceLocation& where() const { return where_; }
  const std::string& key() const { return key_; }
  const std::string& message() const { return message_; }
  const std::vector<std::string>& context() const { return context_; }

  // Returns a copy with one more layer of context, outermost first when printed.
  InputError with_context(std::string ctx) const;

 private:
  void rebuild_what();
  SourceLocation where_;
  std::string key_;
  std::string message_;
  std::vector<std::string> context_;  // innermost last
  std::string what_;
};

// Formats "file:line:col: key: message" (the part of what() without context).
std::string format_location(const SourceLocation& where, const std::string& key);

[[noreturn]] void assertion_failed(const char* expr, const char* file, int line, const std::string& msg);

}  // namespace dptwin

#define DPTWIN_ASSERT(cond, msg)                                          \
  do {                                                                    \
    if (!(cond)) ::dptwin::assertion_failed(#cond, __FILE__, __LINE__, msg); \
  } while (0)
