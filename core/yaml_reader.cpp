#include "core/yaml_reader.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace dptwin {
namespace {

std::string join_path(const std::string& base, std::string_view key) {
  if (base.empty()) return std::string(key);
  return base + "." + std::string(key);
}

SourceLocation mark_location(const YAML::Mark& m, const std::string& file) {
  if (m.is_null()) return {file, 0, 0};
  return {file, m.line + 1, m.column + 1};
}

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

// Splits "12.5 GiB" into 12.5 and "GiB". Returns false if no number leads.
bool split_number_unit(const std::string& text, double& number, std::string& unit) {
  std::string t = trim(text);
  if (t.empty()) return false;
  const char* begin = t.c_str();
  char* end = nullptr;
  errno = 0;
  number = std::strtod(begin, &end);
  if (end == begin || errno == ERANGE || !std::isfinite(number)) return false;
  unit = trim(std::string_view(end));
  return true;
}

// Sanity limits on figures (far beyond any real hardware, low enough that every
// derived time stays finite and inside the integer nanosecond clock).
constexpr double kMaxBytes = 1e18;          // 1 EB
constexpr double kMinBandwidth = 1e6;       // 1 MB/s
constexpr double kMaxBandwidth = 1e15;      // 1 PB/s
constexpr double kMinFlopRate = 1e6;        // 1 MFLOP/s
constexpr double kMaxFlopRate = 1e18;       // 1 EFLOP/s

struct UnitFactor {
  std::string_view unit;
  double factor;
};

constexpr UnitFactor kByteUnits[] = {
    {"", 1},         {"B", 1},           {"KB", 1e3},           {"MB", 1e6},
    {"GB", 1e9},     {"TB", 1e12},       {"KiB", 1024.0},       {"MiB", 1048576.0},
    {"GiB", 1073741824.0}, {"TiB", 1099511627776.0}, {"kB", 1e3},
};
constexpr UnitFactor kRateUnits[] = {
    {"", 1},          {"B/s", 1},        {"KB/s", 1e3},     {"kB/s", 1e3},    {"MB/s", 1e6},
    {"GB/s", 1e9},    {"TB/s", 1e12},    {"GBps", 1e9},     {"MBps", 1e6},    {"b/s", 0.125},
    {"Kb/s", 125.0},  {"kb/s", 125.0},   {"Mb/s", 1.25e5},  {"Gb/s", 1.25e8}, {"Tb/s", 1.25e11},
    {"Kbit/s", 125.0}, {"Mbit/s", 1.25e5}, {"Gbit/s", 1.25e8}, {"Tbit/s", 1.25e11},
    {"Mbps", 1.25e5}, {"Gbps", 1.25e8},  {"GiB/s", 1073741824.0}, {"MiB/s", 1048576.0},
};
constexpr UnitFactor kTimeUnits[] = {
    {"", 1}, {"s", 1}, {"ms", 1e-3}, {"us", 1e-6}, {"µs", 1e-6}, {"ns", 1e-9}, {"min", 60}, {"h", 3600},
};
constexpr UnitFactor kFlopUnits[] = {
    {"", 1}, {"FLOP/s", 1}, {"GFLOP/s", 1e9}, {"TFLOP/s", 1e12}, {"PFLOP/s", 1e15},
    {"GFLOPS", 1e9}, {"TFLOPS", 1e12}, {"PFLOPS", 1e15},
};

template <size_t N>
bool lookup_unit(const UnitFactor (&table)[N], const std::string& unit, double& factor) {
  for (const auto& u : table)
    if (u.unit == unit) {
      factor = u.factor;
      return true;
    }
  return false;
}

template <size_t N>
std::string unit_list(const UnitFactor (&table)[N]) {
  std::string out;
  for (const auto& u : table) {
    if (u.unit.empty()) continue;
    if (!out.empty()) out += ", ";
    out += u.unit;
  }
  return out;
}

template <size_t N>
double parse_with_units(const std::string& text, const UnitFactor (&table)[N], const char* kind,
                        const SourceLocation& loc, const std::string& key) {
  double number = 0;
  std::string unit;
  if (!split_number_unit(text, number, unit))
    throw InputError(loc, key, fmt::format("expected a {} such as '{}', got '{}'", kind,
                                           kind == std::string("size")       ? "16 GiB"
                                           : kind == std::string("bandwidth") ? "100 Gb/s"
                                           : kind == std::string("duration")  ? "5 us"
                                                                               : "125 TFLOP/s",
                                           text));
  double factor = 0;
  if (!lookup_unit(table, unit, factor))
    throw InputError(loc, key, fmt::format("unknown unit '{}' in '{}' (expected one of: {})", unit, text,
                                           unit_list(table)));
  return number * factor;
}

// Plain-text key of a mapping entry; complex keys ({a: 1}: x, [a, b]: x) are refused.
std::string key_text(const YAML::Node& key, const std::string& file, const std::string& path) {
  if (!key.IsScalar() && !key.IsNull())
    throw InputError(mark_location(key.Mark(), file), path, "keys must be plain text, not a list or mapping");
  return key.IsNull() ? std::string("null") : key.Scalar();
}

// Throws when a mapping gives the same key twice (YAML forbids it; yaml-cpp would keep the first silently).
void check_unique_keys(const YAML::Node& map, const std::string& file, const std::string& path) {
  std::vector<std::pair<std::string, YAML::Mark>> seen;
  for (auto it = map.begin(); it != map.end(); ++it) {
    std::string key = key_text(it->first, file, path);
    for (const auto& [k, mark] : seen)
      if (k == key)
        throw InputError(mark_location(it->first.Mark(), file), join_path(path, key),
                         fmt::format("duplicate key '{}' (first given at line {})", key, mark.line + 1));
    seen.emplace_back(key, it->first.Mark());
  }
}

// 1-based line where a second YAML document starts, or 0. YAML::Load reads the
// first document only (and YAML::LoadAll can loop forever on some malformed
// input in yaml-cpp 0.7), so markers are found by scanning: "---" at column 0
// after the first document's content, or any content after a "..." end marker.
// A marker at column 0 cannot occur inside a scalar, so the scan is exact.
int second_document_line(const std::string& text) {
  auto is_marker = [](std::string_view line, std::string_view m) {
    return line.substr(0, 3) == m && (line.size() == 3 || line[3] == ' ' || line[3] == '\t' || line[3] == '\r');
  };
  bool content = false, ended = false;
  int number = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string_view line(text.data() + pos, end - pos);
    ++number;
    pos = end + 1;
    std::string t = trim(line);
    if (t.empty() || t[0] == '#') continue;
    if (is_marker(line, "---")) {
      if (content || ended) return number;
      content = trim(line.substr(3)).empty() ? content : true;  // "--- value" starts content
      continue;
    }
    if (is_marker(line, "...")) {
      ended = true;
      continue;
    }
    if (!content && t[0] == '%') continue;  // directive
    if (ended) return number;
    content = true;
  }
  return 0;
}

}  // namespace

YamlNode::YamlNode(YAML::Node node, std::shared_ptr<const std::string> file, std::string path)
    : node_(std::move(node)), file_(std::move(file)), path_(std::move(path)) {}

SourceLocation YamlNode::location() const {
  SourceLocation loc = mark_location(node_.Mark(), *file_);
  if (loc.line == 0) return parent_loc_.file.empty() ? SourceLocation{*file_, 0, 0} : parent_loc_;
  return loc;
}

void YamlNode::fail(const std::string& message) const { throw InputError(location(), path_, message); }

YamlNode YamlNode::child(const YAML::Node& n, const std::string& path) const {
  YamlNode c(n, file_, path);
  c.parent_loc_ = location();
  return c;
}

void YamlNode::check_keys(std::initializer_list<std::string_view> allowed) const {
  std::vector<std::string> v;
  for (auto a : allowed) v.emplace_back(a);
  check_keys(v);
}

void YamlNode::check_keys(const std::vector<std::string>& allowed) const {
  if (!is_map()) fail("expected a mapping (key: value pairs)");
  check_unique_keys(node_, *file_, path_);
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    std::string key = key_text(it->first, *file_, path_);
    if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) continue;
    std::string hint = closest_match(key, allowed);
    std::string all;
    for (const auto& a : allowed) all += (all.empty() ? "" : ", ") + a;
    std::string msg = hint.empty() ? fmt::format("unknown key '{}' (allowed: {})", key, all)
                                   : fmt::format("unknown key '{}'; did you mean '{}'? (allowed: {})", key, hint, all);
    throw InputError(mark_location(it->first.Mark(), *file_), join_path(path_, key), msg);
  }
}

bool YamlNode::has(std::string_view key) const {
  return is_map() && node_[std::string(key)].IsDefined();
}

YamlNode YamlNode::at(std::string_view key) const {
  if (!is_map()) fail("expected a mapping (key: value pairs)");
  YAML::Node n = node_[std::string(key)];
  if (!n.IsDefined()) throw InputError(location(), join_path(path_, key), "missing required key");
  return child(n, join_path(path_, key));
}

std::optional<YamlNode> YamlNode::find(std::string_view key) const {
  if (!is_map()) {
    if (is_null()) return std::nullopt;
    fail("expected a mapping (key: value pairs)");
  }
  YAML::Node n = node_[std::string(key)];
  if (!n.IsDefined()) return std::nullopt;
  return child(n, join_path(path_, key));
}

std::vector<std::pair<std::string, YamlNode>> YamlNode::entries() const {
  if (!is_map()) fail("expected a mapping (key: value pairs)");
  check_unique_keys(node_, *file_, path_);
  std::vector<std::pair<std::string, YamlNode>> out;
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    std::string key = key_text(it->first, *file_, path_);
    out.emplace_back(key, child(it->second, join_path(path_, key)));
  }
  return out;
}

std::vector<YamlNode> YamlNode::items() const {
  if (!is_sequence()) fail("expected a list");
  std::vector<YamlNode> out;
  size_t i = 0;
  for (auto it = node_.begin(); it != node_.end(); ++it, ++i)
    out.push_back(child(*it, fmt::format("{}[{}]", path_, i)));
  return out;
}

std::vector<YamlNode> YamlNode::one_or_many() const {
  if (is_sequence()) {
    auto v = items();
    if (v.empty()) fail("expected a value or a non-empty list of values");
    return v;
  }
  if (!is_scalar()) fail("expected a value or a list of values");
  return {*this};
}

template <>
std::string YamlNode::as<std::string>() const {
  if (!is_scalar()) fail("expected a text value");
  return node_.Scalar();
}

template <>
double YamlNode::as<double>() const {
  if (!is_scalar()) fail("expected a number");
  const std::string& s = node_.Scalar();
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end == s.c_str() || trim(end) != "" || errno == ERANGE || !std::isfinite(v))
    fail(fmt::format("expected a number, got '{}'", s));
  return v;
}

template <>
int64_t YamlNode::as<int64_t>() const {
  if (!is_scalar()) fail("expected an integer");
  const std::string& s = node_.Scalar();
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (s.empty() || end == s.c_str() || trim(end) != "" || errno == ERANGE) {
    // Accept integral floats such as 1e6.
    double d = 0;
    std::string unit;
    if (split_number_unit(s, d, unit) && unit.empty() && std::floor(d) == d && std::fabs(d) < 9e18)
      return static_cast<int64_t>(d);
    fail(fmt::format("expected an integer, got '{}'", s));
  }
  return v;
}

template <>
int YamlNode::as<int>() const {
  int64_t v = as<int64_t>();
  if (v > 2147483647LL || v < -2147483647LL) fail(fmt::format("integer {} is out of range", v));
  return static_cast<int>(v);
}

template <>
bool YamlNode::as<bool>() const {
  if (!is_scalar()) fail("expected true or false");
  std::string s = node_.Scalar();
  if (s == "true" || s == "True" || s == "yes" || s == "on") return true;
  if (s == "false" || s == "False" || s == "no" || s == "off") return false;
  fail(fmt::format("expected true or false, got '{}'", s));
}

double YamlNode::as_positive() const {
  double v = as<double>();
  if (!(v > 0)) fail(fmt::format("must be > 0, got {}", node_.Scalar()));
  return v;
}

double YamlNode::as_non_negative() const {
  double v = as<double>();
  if (v < 0) fail(fmt::format("must be >= 0, got {}", node_.Scalar()));
  return v;
}

int YamlNode::as_positive_int() const {
  int v = as<int>();
  if (v < 1) fail(fmt::format("must be an integer >= 1, got {}", node_.Scalar()));
  return v;
}

Bytes YamlNode::as_bytes() const {
  if (!is_scalar()) fail("expected a size such as '16 GiB'");
  double v = parse_with_units(node_.Scalar(), kByteUnits, "size", location(), path_);
  if (!(v > 0)) fail(fmt::format("size must be > 0, got '{}'", node_.Scalar()));
  if (v > kMaxBytes) fail(fmt::format("size '{}' is absurdly large (limit 1e18 B = 1 EB)", node_.Scalar()));
  return Bytes(v);
}

Bandwidth YamlNode::as_bandwidth() const {
  if (!is_scalar()) fail("expected a bandwidth such as '100 Gb/s'");
  double v = parse_with_units(node_.Scalar(), kRateUnits, "bandwidth", location(), path_);
  if (!(v > 0)) fail(fmt::format("bandwidth must be > 0, got '{}'", node_.Scalar()));
  if (v < kMinBandwidth || v > kMaxBandwidth)
    fail(fmt::format("bandwidth '{}' is outside the supported range 1 MB/s to 1 PB/s (1e6 to 1e15 B/s)",
                     node_.Scalar()));
  return Bandwidth(v);
}

Time YamlNode::as_time() const {
  if (!is_scalar()) fail("expected a duration such as '5 us'");
  double v = parse_with_units(node_.Scalar(), kTimeUnits, "duration", location(), path_);
  if (v < 0) fail(fmt::format("duration must be >= 0, got '{}'", node_.Scalar()));
  if (v > 1e6) fail(fmt::format("duration '{}' is absurdly long (limit 1e6 s)", node_.Scalar()));
  return Time::from_seconds(v);
}

FlopRate YamlNode::as_flop_rate() const {
  if (!is_scalar()) fail("expected a FLOP rate such as '125 TFLOP/s'");
  double v = parse_with_units(node_.Scalar(), kFlopUnits, "FLOP rate", location(), path_);
  if (!(v > 0)) fail(fmt::format("FLOP rate must be > 0, got '{}'", node_.Scalar()));
  if (v < kMinFlopRate || v > kMaxFlopRate)
    fail(fmt::format("FLOP rate '{}' is outside the supported range 1 MFLOP/s to 1 EFLOP/s (1e6 to 1e18 FLOP/s)",
                     node_.Scalar()));
  return FlopRate(v);
}

YamlNode load_yaml_string(const std::string& text, const std::string& name) {
  auto file = std::make_shared<const std::string>(name);
  if (int line = second_document_line(text); line > 0)
    throw InputError({name, line, 1}, "", "a file holds one YAML document; found a second one (remove the '---' separator)");
  try {
    return YamlNode(YAML::Load(text), file, "");
  } catch (const YAML::Exception& e) {
    throw InputError(mark_location(e.mark, name), "", "YAML syntax error: " + e.msg);
  }
}

bool path_exists(const std::string& path) noexcept {
  std::error_code ec;
  return std::filesystem::exists(path, ec) && !ec;
}

YamlNode load_yaml_file(const std::string& path) {
  // Only regular files of sane size: a path such as /dev/zero or a FIFO would never end.
  constexpr std::uintmax_t kMaxFileBytes = 64ull << 20;  // 64 MiB
  std::error_code ec;
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec))
    throw InputError({path, 0, 0}, "", "not a regular file");
  if (auto size = std::filesystem::file_size(path, ec); !ec && size > kMaxFileBytes)
    throw InputError({path, 0, 0}, "", fmt::format("file is {} bytes; YAML inputs are limited to 64 MiB", size));
  std::ifstream in(path);
  if (!in) throw InputError({path, 0, 0}, "", "cannot open file");
  std::stringstream ss;
  ss << in.rdbuf();
  return load_yaml_string(ss.str(), path);
}

Bytes parse_bytes(const std::string& text, const std::string& what) {
  return Bytes(parse_with_units(text, kByteUnits, "size", {}, what));
}
Bandwidth parse_bandwidth(const std::string& text, const std::string& what) {
  return Bandwidth(parse_with_units(text, kRateUnits, "bandwidth", {}, what));
}
Time parse_time(const std::string& text, const std::string& what) {
  double v = parse_with_units(text, kTimeUnits, "duration", {}, what);
  if (v < 0) throw InputError({}, what, fmt::format("duration must be >= 0, got '{}'", text));
  if (v > 1e6) throw InputError({}, what, fmt::format("duration '{}' is absurdly long (limit 1e6 s)", text));
  return Time::from_seconds(v);
}

std::string closest_match(std::string_view word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = std::max<size_t>(2, word.size() / 3) + 1;
  for (const auto& c : candidates) {
    std::vector<size_t> prev(c.size() + 1), cur(c.size() + 1);
    for (size_t j = 0; j <= c.size(); ++j) prev[j] = j;
    for (size_t i = 1; i <= word.size(); ++i) {
      cur[0] = i;
      for (size_t j = 1; j <= c.size(); ++j) {
        size_t sub = prev[j - 1] + (std::tolower(word[i - 1]) == std::tolower(c[j - 1]) ? 0 : 1);
        cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
      }
      std::swap(prev, cur);
    }
    if (prev[c.size()] < best_d) {
      best_d = prev[c.size()];
      best = c;
    }
  }
  return best;
}

}  // namespace dptwin
