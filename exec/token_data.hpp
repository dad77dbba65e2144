// exec/token_data.hpp — token corpora, shard files and the distributed sampler.
//
// A corpus is one flat token stream. Samples are non-overlapping windows of
// seq_len + 1 tokens (inputs and shifted targets): sample i covers tokens
// [i·seq_len, i·seq_len + seq_len]. DistributedSampler gives each rank its own
// disjoint slice of a per-epoch permutation, exactly like PyTorch's
// DistributedSampler(shuffle=True, drop_last=True): rank r reads perm[r], perm[r+W], ...
// so no sample is read twice across ranks in an epoch, and the union of the
// ranks' k-th batches is one contiguous block of the permutation (which is what
// makes data-parallel training equal to single-device training on the global batch).
//
// Shard file format (little endian): 64-byte header
//   char magic[8] = "DPTWTOK1"; u32 version = 1; u32 bytes_per_token (2|4);
//   u32 vocab_size; u32 reserved; u64 n_tokens; 32 bytes zero
// followed by n_tokens tokens of bytes_per_token bytes.
//
// Torch-free. Thread-safety: TokenCorpus is immutable after construction;
// a DistributedSampler is owned by one rank's training thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace dptwin::exec {

struct TokenCorpus {
  std::vector<uint32_t> tokens;
  uint32_t vocab_size = 0;  // every token is < vocab_size
  std::string source;       // "synthetic(seed=..)" or the file list

  // Number of seq_len windows (each needs seq_len + 1 tokens).
  int64_t num_samples(int seq_len) const;
};

// Deterministic synthetic text with learnable structure: a vocabulary of
// "words" (fixed token strings of 2..6 tokens) emitted by a sparse first-order
// Markov chain over words, sentences ended by token 0. The same (seed, size,
// vocab) gives the same corpus on every machine. REQUIRES vocab_size >= 16.
TokenCorpus make_synthetic_corpus(uint64_t seed, int64_t n_tokens, uint32_t vocab_size);

// Shards. write_token_shard writes atomically (temp file + fsync + rename).
// Throws InputError naming the file on I/O errors or bad headers.
void write_token_shard(const std::string& path, const std::vector<uint32_t>& tokens, uint32_t vocab_size);
TokenCorpus read_token_shard(const std::string& path);
// A file, or a directory whose *.tok files are concatenated in name order.
TokenCorpus load_token_corpus(const std::string& path);

// Portable deterministic permutation of [0, n) (mt19937_64 + Fisher-Yates).
std::vector<int64_t> permutation(int64_t n, uint64_t seed);

class DistributedSampler {
 public:
  // REQUIRES: num_samples >= world, 0 <= rank < world.
  DistributedSampler(int64_t num_samples, int world, int rank, uint64_t seed);

  // Next `count` sample indices of this rank, moving to the next epoch (new
  // permutation) when the rank's slice is exhausted.
  std::vector<int64_t> next(int count);

  int64_t per_rank() const { return per_rank_; }  // samples per rank per epoch
  // Position for checkpoints: (epoch, offset within the rank's slice).
  struct Position {
    int64_t epoch = 0;
    int64_t offset = 0;
  };
  Position position() const { return {epoch_, offset_}; }
  void set_position(Position p);

 private:
  void load_epoch();
  int64_t num_samples_, per_rank_;
  int world_, rank_;
  uint64_t seed_;
  int64_t epoch_ = 0, offset_ = 0;
  std::vector<int64_t> perm_;
};

}  // namespace dptwin::exec
