#include "core/error.hpp"

#include <fmt/format.h>

namespace dptwin {

InputError::InputError(SourceLocation where, std::string key, std::string message)
    : std::runtime_error(""), where_(std::move(where)), key_(std::move(key)), message_(std::move(message)) {
  rebuild_what();
}

InputError InputError::with_context(std::string ctx) const {
  InputError e = *this;
  e.context_.push_back(std::move(ctx));
  e.rebuild_what();
  return e;
}

std::string format_location(const SourceLocation& where, const std::string& key) {
  std::string out;
  if (!where.file.empty()) out += where.file;
  if (where.line > 0) out += fmt::format(":{}", where.line);
  if (where.line > 0 && where.column > 0) out += fmt::format(":{}", where.column);
  if (!key.empty()) out += (out.empty() ? "" : ": ") + std::string("key '") + key + "'";
  return out;
}

void InputError::rebuild_what() {
  std::string loc = format_location(where_, key_);
  std::string out;
  for (auto it = context_.rbegin(); it != context_.rend(); ++it) out += *it + ": ";
  out += loc.empty() ? message_ : loc + ": " + message_;
  what_ = out;
  static_cast<std::runtime_error&>(*this) = std::runtime_error(what_);
}

void assertion_failed(const char* expr, const char* file, int line, const std::string& msg) {
  throw std::logic_error(fmt::format("internal error: {}:{}: assertion '{}' failed: {}", file, line, expr, msg));
}

}  // namespace dptwin
