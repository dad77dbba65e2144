#include "core/precision.hpp"

#include <algorithm>
#include <cctype>

namespace dptwin {

std::string to_string(DType t) {
  switch (t) {
    case DType::FP32: return "fp32";
    case DType::FP16: return "fp16";
    case DType::BF16: return "bf16";
  }
  return "?";
}

std::string to_string(AmpLevel a) {
  switch (a) {
    case AmpLevel::None: return "none";
    case AmpLevel::O1: return "o1";
    case AmpLevel::O2: return "o2";
  }
  return "?";
}

static std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

std::optional<DType> parse_dtype(std::string_view s) {
  std::string l = lower(s);
  if (l == "fp32" || l == "float32") return DType::FP32;
  if (l == "fp16" || l == "float16" || l == "half") return DType::FP16;
  if (l == "bf16" || l == "bfloat16") return DType::BF16;
  return std::nullopt;
}

std::optional<AmpLevel> parse_amp_level(std::string_view s) {
  std::string l = lower(s);
  if (l == "none" || l == "o0" || l == "off") return AmpLevel::None;
  if (l == "o1") return AmpLevel::O1;
  if (l == "o2") return AmpLevel::O2;
  return std::nullopt;
}

}  // namespace dptwin
