#include "validate/matrix.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <set>

namespace dptwin::validate {

namespace fs = std::filesystem;

std::string ValidationCase::label() const {
  std::string s = fmt::format("{} {} x{} {} mb{}", model, strategy, ranks, precision, micro_batch);
  if (seq_len > 0) s += fmt::format(" T{}", seq_len);
  return s;
}

std::string ValidationCase::group_key() const {
  return fmt::format("{}|{}|{}|{}|{}", model, ranks, precision, micro_batch, seq_len);
}

namespace {

const std::set<std::string> kStrategies{"single", "sps", "dps", "horovod"};
const std::set<std::string> kPrecisions{"fp32", "bf16"};
const std::set<std::string> kModels{"tiny", "small", "paper", "gpt2"};

std::vector<std::string> strings(const YamlNode& n, const std::set<std::string>& allowed, const char* what) {
  std::vector<std::string> out;
  for (const auto& x : n.one_or_many()) {
    std::string v = x.as<std::string>();
    if (!allowed.empty() && !allowed.count(v)) {
      std::string list;
      for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
      x.fail(fmt::format("unknown {} '{}' (known: {})", what, v, list));
    }
    out.push_back(v);
  }
  if (out.empty()) n.fail(fmt::format("an empty list of {}s", what));
  return out;
}

std::vector<int> ints(const YamlNode& n, int lo, int hi, const char* what) {
  std::vector<int> out;
  for (const auto& x : n.one_or_many()) {
    int v = x.as<int>();
    if (v < lo || v > hi) x.fail(fmt::format("{} must be between {} and {}, got {}", what, lo, hi, v));
    out.push_back(v);
  }
  if (out.empty()) n.fail(fmt::format("an empty list of {}", what));
  return out;
}

}  // namespace

ValidationMatrix parse_matrix(const YamlNode& root, const std::string& base_dir) {
  root.check_keys({"name", "description", "cluster", "backend", "threads", "bind", "steps", "warmup_steps", "repeats",
                   "emulated", "netns", "ranking_tie_pct", "grids"});
  ValidationMatrix m;
  m.file = root.file();
  m.name = root.get<std::string>("name", fs::path(root.file()).stem().string());
  m.description = root.get<std::string>("description", "");
  if (auto c = root.find("cluster")) {
    m.cluster = c->as<std::string>();
    if (m.cluster.find('/') != std::string::npos || m.cluster.ends_with(".yaml")) {
      fs::path p = fs::path(m.cluster).is_absolute() ? fs::path(m.cluster) : fs::path(base_dir) / m.cluster;
      if (!path_exists(p.string())) c->fail(fmt::format("cluster file '{}' not found", p.string()));
      m.cluster = fs::absolute(p).string();
    }
  }
  if (auto b = root.find("backend")) {
    m.backend = b->as<std::string>();
    if (m.backend != "gloo" && m.backend != "mpi") b->fail(fmt::format("backend must be gloo or mpi, got '{}'", m.backend));
  }
  if (auto n = root.find("threads")) m.threads = ints(*n, 1, 256, "threads").front();
  if (auto b = root.find("bind")) {
    m.bind = b->as<std::string>();
    if (m.bind != "auto" && m.bind != "core" && m.bind != "none")
      b->fail(fmt::format("bind must be auto, core or none, got '{}'", m.bind));
  }
  if (auto n = root.find("steps")) m.steps = ints(*n, 2, 100000, "steps").front();
  if (auto n = root.find("warmup_steps")) m.warmup_steps = ints(*n, 0, 100000, "warmup_steps").front();
  if (m.warmup_steps >= m.steps) root.at("warmup_steps").fail("warmup_steps must be below steps");
  if (auto n = root.find("repeats")) m.repeats = ints(*n, 1, 100, "repeats").front();
  if (auto n = root.find("emulated")) m.emulated = n->as<bool>();
  if (auto n = root.find("ranking_tie_pct")) {
    m.ranking_tie_pct = n->as_non_negative();
    if (m.ranking_tie_pct > 50) n->fail("ranking_tie_pct above 50 makes every pair a tie");
  }
  if (auto n = root.find("netns")) {
    n->check_keys({"namespaces", "addresses", "interface", "port"});
    m.netns.namespaces = strings(n->at("namespaces"), {}, "namespace");
    m.netns.addresses = strings(n->at("addresses"), {}, "address");
    if (m.netns.namespaces.size() != m.netns.addresses.size())
      n->at("addresses").fail("netns needs one address per namespace");
    m.netns.interface = n->get<std::string>("interface", "veth0");
    if (auto p = n->find("port")) m.netns.port = ints(*p, 1024, 65535, "port").front();
  }
  if (m.emulated && m.netns.namespaces.empty()) root.at("emulated").fail("emulated: true needs a `netns` section");
  const YamlNode grids = root.at("grids");
  for (const auto& g : grids.items()) {
    g.check_keys({"model", "strategy", "ranks", "precision", "micro_batch", "seq_len", "steps", "warmup_steps"});
    const auto models = strings(g.at("model"), kModels, "model");
    const auto strats = strings(g.at("strategy"), kStrategies, "strategy");
    const auto ranks = ints(g.at("ranks"), 1, 64, "ranks");
    const auto precs = g.has("precision") ? strings(g.at("precision"), kPrecisions, "precision")
                                          : std::vector<std::string>{"fp32"};
    const auto mbs = g.has("micro_batch") ? ints(g.at("micro_batch"), 1, 4096, "micro_batch") : std::vector<int>{4};
    const auto seqs = g.has("seq_len") ? ints(g.at("seq_len"), 0, 1 << 16, "seq_len") : std::vector<int>{0};
    // A grid's own run length (short steps need more of them for a stable median).
    const int steps = g.has("steps") ? ints(g.at("steps"), 2, 100000, "steps").front() : 0;
    const int warmup = g.has("warmup_steps") ? ints(g.at("warmup_steps"), 0, 100000, "warmup_steps").front() : 0;
    if (g.has("warmup_steps") && warmup >= (steps > 0 ? steps : m.steps))
      g.at("warmup_steps").fail("warmup_steps must be below steps");
    if (g.has("steps") && !g.has("warmup_steps") && m.warmup_steps >= steps)
      g.at("steps").fail(fmt::format("steps must be above the matrix's warmup_steps ({})", m.warmup_steps));
    for (const auto& mo : models)
      for (const auto& s : strats)
        for (int r : ranks) {
          if (s == "single" && r != 1) g.at("ranks").fail("strategy single runs on 1 rank; give it its own grid");
          if (s != "single" && r < 2) g.at("ranks").fail(fmt::format("strategy {} needs at least 2 ranks", s));
          if (m.emulated && r > static_cast<int>(m.netns.namespaces.size()))
            g.at("ranks").fail(fmt::format("{} ranks but only {} namespaces", r, m.netns.namespaces.size()));
          for (const auto& p : precs)
            for (int mb : mbs)
              for (int t : seqs)
                m.cases.push_back({mo, s, r, p, mb, t, steps > 0 ? steps : m.steps,
                                   g.has("warmup_steps") ? warmup : m.warmup_steps});
        }
  }
  if (m.cases.empty()) grids.fail("the matrix has no case");
  if (m.cases.size() > 2000) grids.fail("more than 2000 cases: almost surely a typo");
  return m;
}

ValidationMatrix load_matrix(const std::string& path) {
  YamlNode root = load_yaml_file(path);
  return parse_matrix(root, fs::path(path).parent_path().string());
}

std::string default_matrix_text() {
  return R"(# The default validation matrix (`dptwin validate` with no file): tiny and
# small GPT-2 on 1, 2 and 4 CPU ranks of this machine, fp32 and bf16 (O1
# autocast), every strategy that runs on CPU ranks. Sized to finish in a few
# minutes on a 2-core machine (about 12 with five rounds).
name: localhost-default
description: tiny/small GPT-2, single/sps/dps/horovod, 1/2/4 CPU ranks, fp32/bf16, Gloo
cluster: localhost-cpu
backend: gloo
threads: 1
bind: auto            # as mpirun: each rank on its own core while they fit (2 ranks), unbound beyond
steps: 24
warmup_steps: 6
repeats: 5            # interleaved rounds; a case reports the median of its five
ranking_tie_pct: 3
# The tiny model's steps (5-40 ms) are a few scheduler ticks long: 120 steps
# give its medians as many milliseconds of samples as small's 24.
grids:
  - {model: tiny, strategy: single, ranks: 1, precision: [fp32, bf16], micro_batch: 8, steps: 120, warmup_steps: 20}
  - {model: small, strategy: single, ranks: 1, precision: [fp32, bf16], micro_batch: 8}
  - {model: tiny, strategy: [sps, dps, horovod], ranks: [2, 4], precision: [fp32, bf16], micro_batch: 8, steps: 120, warmup_steps: 20}
  - {model: small, strategy: [sps, dps, horovod], ranks: [2, 4], precision: [fp32, bf16], micro_batch: 8}
)";
}

}  // namespace dptwin::validate
