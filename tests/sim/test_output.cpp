// Output writers on hand-made results: table alignment, JSON fields and nulls,
// CSV columns, Chrome-trace validity (re-parsed with nlohmann::json).
#include <doctest.h>

#include <nlohmann/json.hpp>

#include <set>
#include <sstream>

#include "sim/output.hpp"

using namespace dptwin;
using namespace dptwin::sim;
using nlohmann::json;

namespace {

PointResult ok_point() {
  PointResult r;
  r.params = {{"model", "paper"}, {"cluster", "hal-v100"}, {"devices", "4"}, {"strategy", "dps"}, {"note", ""}};
  r.status = "ok";
  r.devices = 4;
  r.global_batch = 8;
  r.tokens_per_step = 4096;
  r.step_time_s = 0.16922;
  r.tokens_per_s = 24205.3;
  r.samples_per_s = 47.27;
  r.scaling_efficiency = 0.957;
  r.mfu = 0.257;
  r.breakdown = {0.13628, 0.00337, 0.00955, 0.02752, 0.00205};
  r.memory.weights = 425327616;
  r.memory.peak = 4.01 * 1073741824.0;
  r.memory.capacity = 16 * 1073741824.0;
  r.cost_per_million_tokens = 0.14;
  r.events = 1234;
  r.simulated_devices = 2;
  r.wall_seconds = 0.0123;
  return r;
}

PointResult oom_point() {
  PointResult r;
  r.params = {{"model", "gpt2-xl"}, {"cluster", "hal-v100"}, {"devices", "64"}, {"strategy", "single"},
              {"note", "single runs on 1 device"}};
  r.status = "oom";
  r.message = "needs 40.2 GiB, the device has 16 GiB, \"fp32\" AdamW";
  r.devices = 1;
  r.global_batch = 4;
  r.tokens_per_step = 4096;
  r.memory.peak = 40.2 * 1073741824.0;
  r.memory.capacity = 16 * 1073741824.0;
  r.memory.oom = true;
  return r;
}

Timeline small_timeline() {
  Timeline t;
  t.events.push_back({0, StreamKind::Compute, Category::Backward, "h.11.bwd", Time::us(10), Time::us(30), 0});
  t.events.push_back({0, StreamKind::Comm, Category::Communication, "bucket 0 allreduce", Time::us(20), Time::us(45),
                      1048576});
  t.events.push_back({1, StreamKind::Compute, Category::Backward, "h.11.bwd", Time::us(10), Time::us(31), 0});
  t.events.push_back({1, StreamKind::Host, Category::Overhead, "python", Time::ns(0), Time::us(5), 0});
  t.links.push_back({7, "node0.nic0->switch", Time::us(21), Time::us(40), 524288});
  t.links.push_back({3, "gpu0->gpu1", Time::us(20), Time::us(25), 65536});
  t.links.push_back({7, "node0.nic0->switch", Time::us(41), Time::us(44), 1024});
  return t;
}

std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

const ReportHeader kHeader{"demo", "a demo scenario", "demo.yaml"};

}  // namespace

TEST_CASE("table: one aligned row per point, OOM rows show the status instead of times") {
  std::ostringstream out;
  write_table(out, kHeader, {ok_point(), oom_point()});
  const auto lines = lines_of(out.str());
  // Find the header row.
  size_t h = 0;
  while (h < lines.size() && lines[h].rfind(" #", 0) != 0 && lines[h].rfind("#", 0) != 0) ++h;
  REQUIRE(h + 3 < lines.size());
  const std::string& header = lines[h];
  const std::string& row_ok = lines[h + 2];
  const std::string& row_oom = lines[h + 3];
  CHECK(lines[0].find("scenario: demo") != std::string::npos);
  CHECK(lines[h + 1].find("------") != std::string::npos);
  // Left-aligned text columns start where their titles start.
  for (const char* title : {"model", "cluster", "strategy", "status"}) {
    size_t col = header.find(title);
    REQUIRE(col != std::string::npos);
    CHECK(row_ok[col - 1] == ' ');
    CHECK(row_ok[col] != ' ');
    CHECK(row_oom[col] != ' ');
  }
  CHECK(row_ok.substr(header.find("status"), 2) == "ok");
  CHECK(row_oom.substr(header.find("status"), 3) == "OOM");
  // Right-aligned numeric columns end where their titles end.
  const size_t step_end = header.find("step ms") + std::string("step ms").size();
  CHECK(row_ok.substr(step_end - 6, 6) == "169.22");
  CHECK(row_oom[step_end - 1] == '-');
  CHECK(row_ok.find("4.01/16.0") != std::string::npos);
  CHECK(row_oom.find("40.20/16.0 OOM") != std::string::npos);
  // Every breakdown cell of the OOM row is "-".
  const size_t times_end = header.find("overhead ms") + std::string("overhead ms").size();
  const std::string oom_times = row_oom.substr(header.find("status") + 6, times_end - header.find("status") - 6);
  CHECK(oom_times.find('-') != std::string::npos);
  for (char c : oom_times) CHECK((c == ' ' || c == '-'));
  CHECK(row_oom.find("single runs on 1 device") != std::string::npos);  // the note column
  CHECK(header.find("$/M tokens") != std::string::npos);
  CHECK(out.str().find("[1] oom: needs 40.2 GiB") != std::string::npos);
  CHECK(out.str().find("simulated 2 points") != std::string::npos);

  std::ostringstream quiet;
  OutputOptions o;
  o.wall_time = false;
  write_table(quiet, kHeader, {ok_point()}, o);
  CHECK(quiet.str().find("simulated") == std::string::npos);
}

TEST_CASE("json: every field, units in key names, nulls for absent values, deterministic") {
  std::ostringstream out;
  write_json(out, kHeader, {ok_point(), oom_point()});
  json j = json::parse(out.str());
  CHECK(j["scenario"] == "demo");
  CHECK(j["description"] == "a demo scenario");
  REQUIRE(j["points"].size() == 2);
  const std::vector<std::string> top = {"index", "params", "status", "message", "devices_used",
                                        "global_batch_samples", "tokens_per_step", "step_time_s", "tokens_per_s",
                                        "samples_per_s", "scaling_efficiency", "mfu", "breakdown", "memory",
                                        "cost_per_million_tokens_usd", "time_to_train_s", "cost_to_train_usd",
                                        "simulator", "timeline"};
  for (const auto& p : j["points"]) {
    for (const auto& k : top) CHECK_MESSAGE(p.contains(k), k);
    for (const char* k : {"compute_s", "exposed_comm_s", "hidden_comm_s", "optimizer_s", "overhead_s"})
      CHECK(p["breakdown"].contains(k));
    for (const char* k : {"weights_bytes", "gradients_bytes", "optimizer_state_bytes", "master_weights_bytes",
                          "activations_bytes", "workspace_bytes", "comm_buffers_bytes", "gathered_outputs_bytes",
                          "framework_reserve_bytes", "peak_bytes", "capacity_bytes", "device", "oom"})
      CHECK(p["memory"].contains(k));
    for (const char* k : {"events", "simulated_devices", "wall_seconds"}) CHECK(p["simulator"].contains(k));
  }
  const json& ok = j["points"][0];
  CHECK(ok["step_time_s"].get<double>() == doctest::Approx(0.16922));
  CHECK(ok["params"]["strategy"] == "dps");
  CHECK(ok["breakdown"]["compute_s"].get<double>() == doctest::Approx(0.13628));
  CHECK(ok["memory"]["weights_bytes"].get<double>() == 425327616.0);
  CHECK(ok["time_to_train_s"].is_null());
  CHECK(ok["timeline"].is_null());
  const json& oom = j["points"][1];
  CHECK(oom["status"] == "oom");
  CHECK(oom["step_time_s"].is_null());
  CHECK(oom["tokens_per_s"].is_null());
  CHECK(oom["mfu"].is_null());
  CHECK(oom["breakdown"]["compute_s"].is_null());
  CHECK(oom["memory"]["oom"] == true);
  CHECK(oom["memory"]["capacity_bytes"].get<double>() == 16 * 1073741824.0);

  // Deterministic: same input, same bytes; the key order is the documented one.
  std::ostringstream again;
  write_json(again, kHeader, {ok_point(), oom_point()});
  CHECK(again.str() == out.str());
  auto oj = nlohmann::ordered_json::parse(out.str());
  std::vector<std::string> keys;
  for (auto it = oj["points"][0].begin(); it != oj["points"][0].end(); ++it) keys.push_back(it.key());
  CHECK(keys == top);

  OutputOptions o;
  o.wall_time = false;
  CHECK(point_to_json(ok_point(), 0, o)["simulator"]["wall_seconds"].is_null());
  PointResult with_tl = ok_point();
  with_tl.timeline = small_timeline();
  CHECK(point_to_json(with_tl, 0)["timeline"]["events"] == 4);
}

TEST_CASE("csv: header plus one row per point, same column count, empty cells for nulls, quoting") {
  std::ostringstream out;
  write_csv(out, {ok_point(), oom_point()});
  const auto lines = lines_of(out.str());
  REQUIRE(lines.size() == 3);
  const auto cols = csv_columns({ok_point(), oom_point()});
  CHECK(cols.front() == "index");
  CHECK(cols[1] == "model");
  CHECK(cols.back() == "wall_seconds");
  for (const char* c : {"status", "step_time_s", "tokens_per_s", "samples_per_s", "scaling_efficiency", "mfu",
                        "compute_s", "exposed_comm_s", "hidden_comm_s", "optimizer_s", "overhead_s",
                        "memory_peak_bytes", "memory_capacity_bytes", "oom", "cost_per_million_tokens_usd",
                        "time_to_train_s", "cost_to_train_usd", "devices_used", "note"})
    CHECK_MESSAGE(std::find(cols.begin(), cols.end(), c) != cols.end(), c);
  std::string header;
  for (size_t i = 0; i < cols.size(); ++i) header += (i ? "," : "") + cols[i];
  CHECK(lines[0] == header);

  // Split respecting quotes.
  auto split = [](const std::string& line) {
    std::vector<std::string> cells(1);
    bool quoted = false;
    for (size_t i = 0; i < line.size(); ++i) {
      char c = line[i];
      if (quoted) {
        if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') { cells.back() += '"'; ++i; }
        else if (c == '"') quoted = false;
        else cells.back() += c;
      } else if (c == '"') quoted = true;
      else if (c == ',') cells.emplace_back();
      else cells.back() += c;
    }
    return cells;
  };
  const auto ok = split(lines[1]);
  const auto oom = split(lines[2]);
  REQUIRE(ok.size() == cols.size());
  REQUIRE(oom.size() == cols.size());
  auto at = [&](const std::vector<std::string>& row, const std::string& col) {
    return row[std::find(cols.begin(), cols.end(), col) - cols.begin()];
  };
  CHECK(at(ok, "step_time_s") == "0.16922");
  CHECK(at(ok, "strategy") == "dps");
  CHECK(at(oom, "step_time_s").empty());
  CHECK(at(oom, "compute_s").empty());
  CHECK(at(oom, "oom") == "true");
  CHECK(at(oom, "message") == "needs 40.2 GiB, the device has 16 GiB, \"fp32\" AdamW");

  OutputOptions o;
  o.wall_time = false;
  CHECK(csv_columns({ok_point()}, o).back() != "wall_seconds");
}

TEST_CASE("chrome trace: valid JSON, X events in microseconds, named processes and threads") {
  PointResult r = ok_point();
  r.timeline = small_timeline();
  std::ostringstream out;
  write_chrome_trace(out, {oom_point(), r}, 1);
  json j = json::parse(out.str());
  CHECK(j["displayTimeUnit"] == "ms");
  REQUIRE(j["traceEvents"].is_array());

  std::map<int, std::string> process_names;
  std::map<std::pair<int, int>, std::string> thread_names;
  int x_events = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") process_names[e["pid"]] = e["args"]["name"];
    if (e["ph"] == "M" && e["name"] == "thread_name") thread_names[{e["pid"], e["tid"]}] = e["args"]["name"];
    if (e["ph"] != "X") continue;
    ++x_events;
    for (const char* k : {"name", "cat", "ts", "dur", "pid", "tid", "args"}) CHECK(e.contains(k));
    CHECK(e["args"].contains("bytes"));
    CHECK(e["dur"].get<double>() >= 0);
  }
  CHECK(x_events == 7);
  CHECK(process_names[0] == "device 0");
  CHECK(process_names[1] == "device 1");
  CHECK(process_names[2] == "links");
  CHECK(thread_names[{0, 0}] == "compute");
  CHECK(thread_names[{0, 1}] == "comm");
  CHECK(thread_names[{1, 2}] == "host");
  CHECK(thread_names[{2, 0}] == "node0.nic0->switch");
  CHECK(thread_names[{2, 1}] == "gpu0->gpu1");
  // The allreduce on device 0: 20..45 us, category communication, its bytes.
  bool found = false;
  for (const auto& e : j["traceEvents"])
    if (e["ph"] == "X" && e["name"] == "bucket 0 allreduce") {
      found = true;
      CHECK(e["ts"].get<double>() == doctest::Approx(20.0));
      CHECK(e["dur"].get<double>() == doctest::Approx(25.0));
      CHECK(e["cat"] == "communication");
      CHECK(e["pid"] == 0);
      CHECK(e["tid"] == 1);
      CHECK(e["args"]["bytes"].get<double>() == 1048576.0);
    }
  CHECK(found);

  // All points with a timeline: process names carry the point index.
  std::ostringstream all;
  write_chrome_trace(all, {r, oom_point(), r});
  json ja = json::parse(all.str());
  std::set<std::string> names;
  for (const auto& e : ja["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "process_name") names.insert(e["args"]["name"]);
  CHECK(names == std::set<std::string>{"p0 device 0", "p0 device 1", "p0 links", "p2 device 0", "p2 device 1",
                                       "p2 links"});

  // A point without a timeline gives an empty, still valid trace.
  std::ostringstream none;
  write_chrome_trace(none, {oom_point()}, 0);
  CHECK(json::parse(none.str())["traceEvents"].empty());
}
