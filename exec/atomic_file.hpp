// exec/atomic_file.hpp — crash-safe file replacement.
//
// write_file_atomically writes `path.tmp.<pid>` in the same directory, fsyncs
// it, renames it over `path` and fsyncs the directory, so a reader (or a
// process restarted after a crash or SIGKILL at any point) sees either the old
// complete file or the new complete file, never a torn one.
// Throws std::runtime_error with the path and errno text on failure.
//
// Torch-free. Thread-safety: concurrent calls for different paths are safe.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace dptwin::exec {

// `before_rename` (tests: fault injection) runs after the temp file is durable
// and before it replaces `path`.
void write_file_atomically(const std::string& path, std::string_view bytes,
                           const std::function<void()>& before_rename = {});
std::string read_file(const std::string& path);  // throws std::runtime_error when unreadable
bool file_exists(const std::string& path);
void make_directories(const std::string& path);  // mkdir -p; throws on failure

}  // namespace dptwin::exec
