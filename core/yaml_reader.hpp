// core/yaml_reader.hpp — strict, located access to YAML input.
//
// Every YAML input of dptwin (scenario, topology, model, device profile,
// calibration profile, validation matrix) is read through YamlNode, so that
// every error names file, line, column and key path, and unknown keys are
// errors rather than silently ignored.
//
//   YamlNode root = load_yaml_file("hal.yaml");
//   root.check_keys({"name", "nodes", "links"});        // unknown key -> InputError
//   int n = root.get<int>("nodes", 1);                   // optional with default
//   Bandwidth bw = root.at("link").as_bandwidth();       // "100 Gb/s", "25 GB/s"
//
// Thread-safety: a YamlNode is a cheap handle; distinct handles may be used
// from distinct threads only if they do not share a document being mutated.
#pragma once

#include <yaml-cpp/yaml.h>

#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "core/units.hpp"

namespace dptwin {

class YamlNode {
 public:
  YamlNode(YAML::Node node, std::shared_ptr<const std::string> file, std::string path);

  const YAML::Node& raw() const { return node_; }
  const std::string& path() const { return path_; }
  const std::string& file() const { return *file_; }
  SourceLocation location() const;

  bool is_map() const { return node_.IsMap(); }
  bool is_sequence() const { return node_.IsSequence(); }
  bool is_scalar() const { return node_.IsScalar(); }
  bool is_null() const { return node_.IsNull(); }

  // Throws InputError located at this node.
  [[noreturn]] void fail(const std::string& message) const;

  // --- maps ---
  // REQUIRES: this is a map (else InputError). Unknown keys -> InputError with a suggestion.
  void check_keys(std::initializer_list<std::string_view> allowed) const;
  void check_keys(const std::vector<std::string>& allowed) const;
  bool has(std::string_view key) const;
  YamlNode at(std::string_view key) const;                      // required key
  std::optional<YamlNode> find(std::string_view key) const;     // optional key
  std::vector<std::pair<std::string, YamlNode>> entries() const;  // in file order

  template <typename T>
  T get(std::string_view key, T fallback) const {
    auto n = find(key);
    return n ? n->as<T>() : fallback;
  }
  template <typename T>
  T require(std::string_view key) const {
    return at(key).as<T>();
  }

  // --- sequences ---
  std::vector<YamlNode> items() const;  // REQUIRES: sequence (else InputError)
  // A scalar or a list of scalars, as a list (grid fields in scenarios).
  std::vector<YamlNode> one_or_many() const;

  // --- scalars ---
  template <typename T>
  T as() const;  // specialised for std::string, double, int, int64_t, bool

  double as_positive() const;        // > 0
  double as_non_negative() const;    // >= 0
  int as_positive_int() const;       // integer >= 1
  // Sizes: a number of bytes, or "<number> <unit>" with B, KB, MB, GB, TB,
  // KiB, MiB, GiB, TiB (case of the B matters: "Gb" is bits).
  Bytes as_bytes() const;
  // Rates: "<number> <unit>" with B/s, KB/s, MB/s, GB/s, TB/s, Kb/s, Mb/s,
  // Gb/s, Tb/s (also "Gbit/s", "Gbps", "GBps"); a bare number is bytes/s.
  Bandwidth as_bandwidth() const;
  // Durations: "<number> <unit>" with s, ms, us, ns; a bare number is seconds.
  Time as_time() const;
  // FLOP rates: "<number> TFLOP/s" (also GFLOP/s, PFLOP/s); bare number is FLOP/s.
  FlopRate as_flop_rate() const;

 private:
  YamlNode child(const YAML::Node& n, const std::string& path) const;
  YAML::Node node_;
  std::shared_ptr<const std::string> file_;
  std::string path_;
  SourceLocation parent_loc_;  // used when node_ has no mark (missing key)
};

template <> std::string YamlNode::as<std::string>() const;
template <> double YamlNode::as<double>() const;
template <> int YamlNode::as<int>() const;
template <> int64_t YamlNode::as<int64_t>() const;
template <> bool YamlNode::as<bool>() const;

// Whether a path names something that exists. Never throws: a name the system
// refuses (too long, no permission on a parent) counts as missing, so a path
// read from an input file ends in that file's "not found" error.
bool path_exists(const std::string& path) noexcept;

// Loads a file; syntax errors and unreadable files become InputError.
YamlNode load_yaml_file(const std::string& path);
// Parses text; `name` is used as the file name in messages.
YamlNode load_yaml_string(const std::string& text, const std::string& name);

// Parses the same unit strings outside YAML (CLI flags). Throw InputError with `what` as key.
Bytes parse_bytes(const std::string& text, const std::string& what);
Bandwidth parse_bandwidth(const std::string& text, const std::string& what);
Time parse_time(const std::string& text, const std::string& what);

// Closest candidate by edit distance, or "" when nothing is close.
std::string closest_match(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace dptwin
