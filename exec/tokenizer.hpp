// exec/tokenizer.hpp — text to token ids for `dptwin prepare-data`.
//
// Two tokenizers:
//  * ByteTokenizer: one token per byte (ids 0..255), end-of-text id 256.
//  * Gpt2BpeTokenizer: GPT-2's byte-level BPE from the user's vocab.json and
//    merges.txt (the HuggingFace/OpenAI files): bytes are mapped to printable
//    code points (bytes_to_unicode), text is pre-split with GPT-2's pattern
//      's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//    and each piece is merged by lowest merge rank. Letters are ASCII letters
//    plus every non-ASCII code point that is not whitespace (an approximation
//    of \p{L} that is exact for ASCII text); numbers are ASCII digits.
//
// Torch-free. Thread-safety: encode() is const and safe to call concurrently.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace dptwin::exec {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual std::vector<uint32_t> encode(std::string_view text) const = 0;
  virtual uint32_t eot_id() const = 0;      // separates documents
  virtual uint32_t vocab_size() const = 0;  // ids are < vocab_size()
  virtual std::string name() const = 0;
};

class ByteTokenizer final : public Tokenizer {
 public:
  std::vector<uint32_t> encode(std::string_view text) const override;
  uint32_t eot_id() const override { return 256; }
  uint32_t vocab_size() const override { return 257; }
  std::string name() const override { return "byte"; }
};

class Gpt2BpeTokenizer final : public Tokenizer {
 public:
  // Throws InputError (file, line) on unreadable or malformed files.
  Gpt2BpeTokenizer(const std::string& vocab_json_path, const std::string& merges_txt_path);

  std::vector<uint32_t> encode(std::string_view text) const override;
  uint32_t eot_id() const override { return eot_; }
  uint32_t vocab_size() const override { return vocab_size_; }
  std::string name() const override { return "gpt2-bpe"; }

 private:
  std::vector<std::string> bpe(const std::string& piece) const;  // piece in unicode-mapped form
  std::unordered_map<std::string, uint32_t> vocab_;
  std::map<std::pair<std::string, std::string>, int> merge_rank_;
  std::string byte_to_unicode_[256];
  uint32_t eot_ = 0;
  uint32_t vocab_size_ = 0;
};

// GPT-2's pre-tokenizer: splits text into pieces (exposed for tests).
std::vector<std::string_view> gpt2_pretokenize(std::string_view text);

// GPT-2's reversible byte -> printable code point map, as UTF-8 strings.
std::string gpt2_byte_to_unicode(uint8_t b);

}  // namespace dptwin::exec
