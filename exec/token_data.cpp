// exec/token_data.cpp — corpora, shards, sampler (see token_data.hpp).
#include "exec/token_data.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <fmt/format.h>
#include <random>

#include "core/error.hpp"
#include "exec/atomic_file.hpp"

namespace dptwin::exec {
namespace {

constexpr char kMagic[8] = {'D', 'P', 'T', 'W', 'T', 'O', 'K', '1'};
constexpr size_t kHeaderBytes = 64;

InputError shard_error(const std::string& path, const std::string& msg) {
  return InputError(SourceLocation{path, 0, 0}, "", msg);
}

template <typename T>
void put(std::string& buf, T v) {
  buf.append(reinterpret_cast<const char*>(&v), sizeof(T));
}

template <typename T>
T get(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace

int64_t TokenCorpus::num_samples(int seq_len) const {
  if (seq_len <= 0 || tokens.size() < 2) return 0;
  return (static_cast<int64_t>(tokens.size()) - 1) / seq_len;
}

TokenCorpus make_synthetic_corpus(uint64_t seed, int64_t n_tokens, uint32_t vocab_size) {
  DPTWIN_ASSERT(vocab_size >= 16, "synthetic corpus needs vocab_size >= 16");
  std::mt19937_64 rng(seed);
  auto uniform = [&](uint64_t n) { return static_cast<uint32_t>(rng() % n); };
  const uint32_t n_words = std::min<uint32_t>(64, vocab_size / 4);
  std::vector<std::vector<uint32_t>> words(n_words);
  for (auto& w : words) {
    w.resize(2 + uniform(5));
    for (auto& t : w) t = 1 + uniform(vocab_size - 1);  // token 0 ends sentences
  }
  // Each word is followed by one of 4 successors with probabilities 0.55/0.25/0.15/0.05.
  std::vector<std::array<uint32_t, 4>> next(n_words);
  for (auto& s : next)
    for (auto& x : s) x = uniform(n_words);
  const double cdf[4] = {0.55, 0.80, 0.95, 1.0};
  std::uniform_real_distribution<double> u01(0.0, 1.0);

  TokenCorpus c;
  c.vocab_size = vocab_size;
  c.source = fmt::format("synthetic(seed={}, tokens={}, vocab={})", seed, n_tokens, vocab_size);
  c.tokens.reserve(static_cast<size_t>(n_tokens));
  uint32_t word = uniform(n_words);
  int sentence_left = 8 + static_cast<int>(uniform(9));
  while (static_cast<int64_t>(c.tokens.size()) < n_tokens) {
    for (auto t : words[word]) c.tokens.push_back(t);
    if (--sentence_left == 0) {
      c.tokens.push_back(0);
      sentence_left = 8 + static_cast<int>(uniform(9));
    }
    const double r = u01(rng);
    int k = 0;
    while (r > cdf[k]) ++k;
    word = next[word][k];
  }
  c.tokens.resize(static_cast<size_t>(n_tokens));
  return c;
}

void write_token_shard(const std::string& path, const std::vector<uint32_t>& tokens, uint32_t vocab_size) {
  const uint32_t bpt = vocab_size <= 65536 ? 2 : 4;
  std::string buf;
  buf.reserve(kHeaderBytes + tokens.size() * bpt);
  buf.append(kMagic, 8);
  put<uint32_t>(buf, 1);
  put<uint32_t>(buf, bpt);
  put<uint32_t>(buf, vocab_size);
  put<uint32_t>(buf, 0);
  put<uint64_t>(buf, tokens.size());
  buf.resize(kHeaderBytes, '\0');
  for (auto t : tokens) {
    if (t >= vocab_size) throw shard_error(path, fmt::format("token {} >= vocab_size {}", t, vocab_size));
    if (bpt == 2) put<uint16_t>(buf, static_cast<uint16_t>(t));
    else put<uint32_t>(buf, t);
  }
  write_file_atomically(path, buf);
}

TokenCorpus read_token_shard(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw shard_error(path, fmt::format("cannot open token shard: {}", std::strerror(errno)));
  std::string buf;
  char chunk[1 << 16];
  size_t n;
  while ((n = std::fread(chunk, 1, sizeof chunk, f)) > 0) buf.append(chunk, n);
  std::fclose(f);
  if (buf.size() < kHeaderBytes || std::memcmp(buf.data(), kMagic, 8) != 0)
    throw shard_error(path, "not a dptwin token shard (bad magic); make one with `dptwin prepare-data`");
  const auto version = get<uint32_t>(buf.data() + 8);
  const auto bpt = get<uint32_t>(buf.data() + 12);
  const auto vocab = get<uint32_t>(buf.data() + 16);
  const auto count = get<uint64_t>(buf.data() + 24);
  if (version != 1) throw shard_error(path, fmt::format("unsupported shard version {}", version));
  if (bpt != 2 && bpt != 4) throw shard_error(path, fmt::format("bad bytes_per_token {}", bpt));
  if (buf.size() != kHeaderBytes + count * bpt)
    throw shard_error(path, fmt::format("truncated: header says {} tokens, file holds {} bytes", count, buf.size()));
  TokenCorpus c;
  c.vocab_size = vocab;
  c.source = path;
  c.tokens.resize(count);
  const char* p = buf.data() + kHeaderBytes;
  for (uint64_t i = 0; i < count; ++i) {
    c.tokens[i] = bpt == 2 ? get<uint16_t>(p + 2 * i) : get<uint32_t>(p + 4 * i);
    if (c.tokens[i] >= vocab) throw shard_error(path, fmt::format("token {} at {} >= vocab_size {}", c.tokens[i], i, vocab));
  }
  return c;
}

TokenCorpus load_token_corpus(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw shard_error(path, "no such token shard file or directory");
  if (!S_ISDIR(st.st_mode)) return read_token_shard(path);
  std::vector<std::string> files;
  if (DIR* d = ::opendir(path.c_str())) {
    while (auto* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name.size() > 4 && name.substr(name.size() - 4) == ".tok") files.push_back(path + "/" + name);
    }
    ::closedir(d);
  }
  if (files.empty()) throw shard_error(path, "directory holds no *.tok shards");
  std::sort(files.begin(), files.end());
  TokenCorpus all;
  for (const auto& f : files) {
    auto c = read_token_shard(f);
    all.vocab_size = std::max(all.vocab_size, c.vocab_size);
    all.tokens.insert(all.tokens.end(), c.tokens.begin(), c.tokens.end());
    all.source += (all.source.empty() ? "" : ",") + f;
  }
  return all;
}

std::vector<int64_t> permutation(int64_t n, uint64_t seed) {
  std::vector<int64_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[i] = i;
  std::mt19937_64 rng(seed);
  for (int64_t i = n - 1; i > 0; --i) std::swap(p[i], p[rng() % static_cast<uint64_t>(i + 1)]);
  return p;
}

DistributedSampler::DistributedSampler(int64_t num_samples, int world, int rank, uint64_t seed)
    : num_samples_(num_samples), per_rank_(world > 0 ? num_samples / world : 0), world_(world), rank_(rank), seed_(seed) {
  DPTWIN_ASSERT(world >= 1 && rank >= 0 && rank < world, "bad rank/world");
  DPTWIN_ASSERT(per_rank_ >= 1, fmt::format("{} samples cannot feed {} ranks", num_samples, world));
  load_epoch();
}

void DistributedSampler::load_epoch() { perm_ = permutation(num_samples_, seed_ * 1000003ULL + static_cast<uint64_t>(epoch_)); }

std::vector<int64_t> DistributedSampler::next(int count) {
  std::vector<int64_t> out;
  out.reserve(static_cast<size_t>(count));
  while (static_cast<int>(out.size()) < count) {
    if (offset_ >= per_rank_) {
      ++epoch_;
      offset_ = 0;
      load_epoch();
    }
    out.push_back(perm_[static_cast<size_t>(rank_ + offset_ * world_)]);
    ++offset_;
  }
  return out;
}

void DistributedSampler::set_position(Position p) {
  DPTWIN_ASSERT(p.epoch >= 0 && p.offset >= 0 && p.offset <= per_rank_, "bad sampler position");
  const bool reload = p.epoch != epoch_;
  epoch_ = p.epoch;
  offset_ = p.offset;
  if (reload) load_epoch();
}

}  // namespace dptwin::exec
