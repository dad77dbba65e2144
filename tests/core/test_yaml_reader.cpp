#include <doctest.h>

#include <string>

#include "core/yaml_reader.hpp"

using namespace dptwin;

namespace {
std::string error_of(auto&& fn) {
  try {
    fn();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("unit strings parse to SI quantities") {
  auto doc = load_yaml_string("a: 16 GiB\nb: 100 Gb/s\nc: 25 GB/s\nd: 5 us\ne: 125 TFLOP/s\nf: 1e6\ng: 1.5 ms\n", "t.yaml");
  CHECK(doc.at("a").as_bytes().value() == doctest::Approx(16.0 * (1 << 30)));
  CHECK(doc.at("b").as_bandwidth().value() == doctest::Approx(12.5e9));
  CHECK(doc.at("c").as_bandwidth().value() == doctest::Approx(25e9));
  CHECK(doc.at("d").as_time() == Time::us(5));
  CHECK(doc.at("e").as_flop_rate().value() == doctest::Approx(125e12));
  CHECK(doc.at("f").as<int64_t>() == 1000000);
  CHECK(doc.at("g").as_time() == Time::us(1500));
}

TEST_CASE("errors name file, line, column and key path") {
  auto doc = load_yaml_string("top:\n  link:\n    bandwidth: -3 GB/s\n", "hal.yaml");
  std::string msg = error_of([&] { doc.at("top").at("link").at("bandwidth").as_bandwidth(); });
  CHECK(msg == "hal.yaml:3:16: key 'top.link.bandwidth': bandwidth must be > 0, got '-3 GB/s'");

  msg = error_of([&] { doc.at("top").at("link").at("latency"); });
  CHECK(msg.find("hal.yaml:3:5") != std::string::npos);
  CHECK(msg.find("key 'top.link.latency': missing required key") != std::string::npos);
}

TEST_CASE("unknown keys are rejected with a suggestion") {
  auto doc = load_yaml_string("name: x\nbandwith: 3\n", "s.yaml");
  std::string msg = error_of([&] { doc.check_keys({"name", "bandwidth", "latency"}); });
  CHECK(msg.find("s.yaml:2:1: key 'bandwith': unknown key 'bandwith'; did you mean 'bandwidth'?") == 0);
}

TEST_CASE("wrong types and bad units are clear errors") {
  auto doc = load_yaml_string("n: four\nm: 3 parsecs\nl: [1, 2]\nb: maybe\n", "w.yaml");
  CHECK(error_of([&] { doc.at("n").as<int>(); }) == "w.yaml:1:4: key 'n': expected an integer, got 'four'");
  CHECK(error_of([&] { doc.at("m").as_bytes(); }).find("unknown unit 'parsecs'") != std::string::npos);
  CHECK(error_of([&] { doc.at("l").as<double>(); }).find("expected a number") != std::string::npos);
  CHECK(error_of([&] { doc.at("b").as<bool>(); }).find("expected true or false") != std::string::npos);
  CHECK(error_of([&] { load_yaml_string("a: [1, 2\n", "bad.yaml"); }).find("bad.yaml:2:1: YAML syntax error") == 0);
  CHECK(error_of([&] { load_yaml_file("/nonexistent/x.yaml"); }) == "/nonexistent/x.yaml: cannot open file");
}

TEST_CASE("lists and context layers") {
  auto doc = load_yaml_string("devices: [1, 2, 4]\nsingle: 8\n", "g.yaml");
  CHECK(doc.at("devices").one_or_many().size() == 3);
  CHECK(doc.at("devices").items()[2].path() == "devices[2]");
  CHECK(doc.at("single").one_or_many().size() == 1);
  InputError e({"f.yaml", 1, 2}, "k", "bad");
  CHECK(std::string(e.with_context("while loading scenario 'f.yaml'").what()) ==
        "while loading scenario 'f.yaml': f.yaml:1:2: key 'k': bad");
  CHECK(closest_match("strategie", {"strategy", "devices"}) == "strategy");
  CHECK(closest_match("zzzzzz", {"strategy", "devices"}).empty());
}
