// exec/tokenizer.cpp — byte and GPT-2 BPE tokenizers (see tokenizer.hpp).
#include "exec/tokenizer.hpp"

#include <fmt/format.h>

#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.hpp"

namespace dptwin::exec {
namespace {

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// Length in bytes of the UTF-8 sequence starting with byte c (1 for invalid bytes).
size_t utf8_len(unsigned char c) {
  if (c >= 0xF0 && c < 0xF8) return 4;
  if (c >= 0xE0) return c < 0xF0 ? 3 : 1;
  if (c >= 0xC0) return 2;
  return 1;
}

enum class CharClass { Space, Letter, Number, Other };

CharClass classify(std::string_view text, size_t i) {
  const auto c = static_cast<unsigned char>(text[i]);
  if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f') return CharClass::Space;
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80) return CharClass::Letter;
  if (c >= '0' && c <= '9') return CharClass::Number;
  return CharClass::Other;
}

size_t next_char(std::string_view text, size_t i) {
  return std::min(text.size(), i + utf8_len(static_cast<unsigned char>(text[i])));
}

size_t run_of(std::string_view text, size_t i, CharClass cls) {
  while (i < text.size() && classify(text, i) == cls) i = next_char(text, i);
  return i;
}

InputError file_error(const std::string& path, int line, const std::string& msg) {
  return InputError(SourceLocation{path, line, 0}, "", msg);
}

}  // namespace

std::string gpt2_byte_to_unicode(uint8_t b) {
  // Printable bytes map to themselves; the others to 256 + n in byte order.
  auto printable = [](int x) { return (x >= '!' && x <= '~') || (x >= 0xA1 && x <= 0xAC) || (x >= 0xAE && x <= 0xFF); };
  if (printable(b)) return utf8(b);
  int n = 0;
  for (int x = 0; x < b; ++x)
    if (!printable(x)) ++n;
  return utf8(256 + n);
}

std::vector<std::string_view> gpt2_pretokenize(std::string_view text) {
  static const char* const kContractions[] = {"'s", "'t", "'re", "'ve", "'m", "'ll", "'d"};
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < text.size()) {
    if (text[i] == '\'') {
      bool matched = false;
      for (const char* c : kContractions) {
        const std::string_view cv(c);
        if (text.substr(i, cv.size()) == cv) {
          out.push_back(text.substr(i, cv.size()));
          i += cv.size();
          matched = true;
          break;
        }
      }
      if (matched) continue;
    }
    size_t start = i, j = i;
    if (text[i] == ' ' && i + 1 < text.size() && classify(text, i + 1) != CharClass::Space) j = i + 1;
    const CharClass cls = classify(text, j);
    if (cls != CharClass::Space) {
      const size_t end = run_of(text, j, cls);
      out.push_back(text.substr(start, end - start));
      i = end;
      continue;
    }
    // Whitespace: \s+(?!\S) leaves the last whitespace char before a non-space to the next piece.
    const size_t end = run_of(text, i, CharClass::Space);
    size_t cut = end;
    if (end < text.size()) {
      size_t last = i, p = i;
      while (p < end) {
        last = p;
        p = next_char(text, p);
      }
      if (last > i) cut = last;
    }
    out.push_back(text.substr(i, cut - i));
    i = cut;
  }
  return out;
}

std::vector<uint32_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<uint32_t> ids(text.size());
  for (size_t i = 0; i < text.size(); ++i) ids[i] = static_cast<unsigned char>(text[i]);
  return ids;
}

Gpt2BpeTokenizer::Gpt2BpeTokenizer(const std::string& vocab_json_path, const std::string& merges_txt_path) {
  for (int b = 0; b < 256; ++b) byte_to_unicode_[b] = gpt2_byte_to_unicode(static_cast<uint8_t>(b));
  std::ifstream vf(vocab_json_path);
  if (!vf) throw file_error(vocab_json_path, 0, "cannot open vocabulary file");
  nlohmann::json vocab;
  try {
    vf >> vocab;
  } catch (const nlohmann::json::parse_error& e) {
    throw file_error(vocab_json_path, 0, fmt::format("not valid JSON: {}", e.what()));
  }
  if (!vocab.is_object() || vocab.empty())
    throw file_error(vocab_json_path, 1, "expected a JSON object mapping tokens to ids");
  uint32_t max_id = 0;
  for (const auto& [tok, id] : vocab.items()) {
    if (!id.is_number_unsigned()) throw file_error(vocab_json_path, 0, fmt::format("id of '{}' is not a non-negative integer", tok));
    const auto v = id.get<uint64_t>();
    if (v > std::numeric_limits<uint32_t>::max()) throw file_error(vocab_json_path, 0, fmt::format("id of '{}' too large", tok));
    vocab_[tok] = static_cast<uint32_t>(v);
    max_id = std::max(max_id, static_cast<uint32_t>(v));
  }
  for (int b = 0; b < 256; ++b)
    if (!vocab_.count(byte_to_unicode_[b]))
      throw file_error(vocab_json_path, 0, fmt::format("byte {} (token '{}') missing: not a byte-level BPE vocabulary", b, byte_to_unicode_[b]));
  auto eot = vocab_.find("<|endoftext|>");
  eot_ = eot != vocab_.end() ? eot->second : max_id + 1;
  vocab_size_ = std::max(max_id, eot_) + 1;

  std::ifstream mf(merges_txt_path);
  if (!mf) throw file_error(merges_txt_path, 0, "cannot open merges file");
  std::string line;
  int lineno = 0, rank = 0;
  while (std::getline(mf, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line.rfind("#version", 0) == 0) continue;
    const auto sp = line.find(' ');
    if (sp == std::string::npos || sp == 0 || sp + 1 >= line.size() || line.find(' ', sp + 1) != std::string::npos)
      throw file_error(merges_txt_path, lineno, fmt::format("expected 'left right', got '{}'", line));
    merge_rank_.emplace(std::make_pair(line.substr(0, sp), line.substr(sp + 1)), rank++);
  }
}

std::vector<std::string> Gpt2BpeTokenizer::bpe(const std::string& piece) const {
  std::vector<std::string> parts;
  for (size_t i = 0; i < piece.size();) {
    const size_t n = utf8_len(static_cast<unsigned char>(piece[i]));
    parts.push_back(piece.substr(i, n));
    i += n;
  }
  while (parts.size() > 1) {
    int best = std::numeric_limits<int>::max();
    size_t at = 0;
    for (size_t k = 0; k + 1 < parts.size(); ++k) {
      auto it = merge_rank_.find({parts[k], parts[k + 1]});
      if (it != merge_rank_.end() && it->second < best) {
        best = it->second;
        at = k;
      }
    }
    if (best == std::numeric_limits<int>::max()) break;
    // Merge every occurrence of the best pair, left to right (as GPT-2's encoder does).
    const std::string a = parts[at], b = parts[at + 1];
    std::vector<std::string> merged;
    for (size_t k = 0; k < parts.size();) {
      if (k + 1 < parts.size() && parts[k] == a && parts[k + 1] == b) {
        merged.push_back(a + b);
        k += 2;
      } else {
        merged.push_back(parts[k++]);
      }
    }
    parts = std::move(merged);
  }
  return parts;
}

std::vector<uint32_t> Gpt2BpeTokenizer::encode(std::string_view text) const {
  std::vector<uint32_t> ids;
  for (auto piece : gpt2_pretokenize(text)) {
    std::string mapped;
    for (char c : piece) mapped += byte_to_unicode_[static_cast<unsigned char>(c)];
    for (const auto& tok : bpe(mapped)) {
      auto it = vocab_.find(tok);
      if (it != vocab_.end()) {
        ids.push_back(it->second);
      } else {  // not in the vocabulary: fall back to its single characters (always present)
        for (size_t i = 0; i < tok.size();) {
          const size_t n = utf8_len(static_cast<unsigned char>(tok[i]));
          ids.push_back(vocab_.at(tok.substr(i, n)));
          i += n;
        }
      }
    }
  }
  return ids;
}

}  // namespace dptwin::exec
