// tests/exec/test_exec_data.cpp — tokenizers, shards, synthetic corpus, sampler, prepare-data.
#include <doctest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "core/error.hpp"
#include "exec/atomic_file.hpp"
#include "exec/data_prep.hpp"
#include "exec/token_data.hpp"
#include "exec/tokenizer.hpp"
#include "temp_dir.hpp"

using namespace dptwin;
using namespace dptwin::exec;
namespace fs = std::filesystem;
using dptwin::testing::TempDir;

namespace {

void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

std::vector<std::string> pieces(std::string_view text) {
  std::vector<std::string> out;
  for (auto p : gpt2_pretokenize(text)) out.emplace_back(p);
  return out;
}

}  // namespace

TEST_CASE("byte tokenizer: one id per byte, eot 256") {
  ByteTokenizer t;
  CHECK(t.encode("Hi\n") == std::vector<uint32_t>{72, 105, 10});
  CHECK(t.encode("\xC3\xA9") == std::vector<uint32_t>{0xC3, 0xA9});
  CHECK(t.eot_id() == 256);
  CHECK(t.vocab_size() == 257);
}

TEST_CASE("GPT-2 pre-tokenizer follows the regex on ASCII") {
  // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  CHECK(pieces("Hello world") == std::vector<std::string>{"Hello", " world"});
  CHECK(pieces("it's 42!!") == std::vector<std::string>{"it", "'s", " 42", "!!"});
  // Two spaces before a word: the first stands alone, the second prefixes the word.
  CHECK(pieces("a  b") == std::vector<std::string>{"a", " ", " b"});
  // A newline before a word is its own piece; trailing whitespace is kept whole.
  CHECK(pieces("a\n\nb  ") == std::vector<std::string>{"a", "\n", "\n", "b", "  "});
  CHECK(pieces("x=1.5") == std::vector<std::string>{"x", "=", "1", ".", "5"});
  CHECK(pieces("we'll") == std::vector<std::string>{"we", "'ll"});
}

TEST_CASE("GPT-2 byte-to-unicode map") {
  CHECK(gpt2_byte_to_unicode('A') == "A");
  CHECK(gpt2_byte_to_unicode(' ') == "\xC4\xA0");   // U+0120 'Ġ'
  CHECK(gpt2_byte_to_unicode('\n') == "\xC4\x8A");  // U+010A 'Ċ'
  std::set<std::string> all;
  for (int b = 0; b < 256; ++b) all.insert(gpt2_byte_to_unicode(static_cast<uint8_t>(b)));
  CHECK(all.size() == 256);  // a bijection
}

TEST_CASE("GPT-2 BPE with a small vocabulary and merges") {
  TempDir d;
  // Vocabulary: the 256 byte symbols (ids 0..255 in byte order), then merged tokens.
  std::string vocab = "{";
  for (int b = 0; b < 256; ++b) {
    std::string sym = gpt2_byte_to_unicode(static_cast<uint8_t>(b));
    std::string esc;
    for (char c : sym) esc += (c == '"' || c == '\\') ? std::string("\\") + c : std::string(1, c);
    vocab += "\"" + esc + "\": " + std::to_string(b) + ",";
  }
  vocab += "\"lo\": 256, \"low\": 257, \"\xC4\xA0l\": 258, \"\xC4\xA0low\": 259, \"er\": 260, \"<|endoftext|>\": 261}";
  write(d.path + "/vocab.json", vocab);
  write(d.path + "/merges.txt", "#version: 0.2\nl o\nlo w\n\xC4\xA0 l\n\xC4\xA0l ow\ne r\no w\n");
  Gpt2BpeTokenizer t(d.path + "/vocab.json", d.path + "/merges.txt");
  CHECK(t.eot_id() == 261);
  CHECK(t.vocab_size() == 262);
  // "low" -> l o w -> (l o) w -> (lo w) = "low".
  CHECK(t.encode("low") == std::vector<uint32_t>{257});
  // " lower" = Ġ l o w e r. Ranks: l o(0) lo w(1) Ġ l(2) Ġl ow(3) e r(4) o w(5).
  // (l o) first -> Ġ lo w e r; (lo w) -> Ġ low e r; (e r) -> Ġ low er; no pair left.
  // Ġ is byte 32's symbol (id 32 here): ids 32, 257 (low), 260 (er).
  CHECK(t.encode(" lower") == std::vector<uint32_t>{32, 257, 260});
  // "Ġlow" is reached through Ġ l (rank 2) only when 'l' is not taken by 'l o' (rank 0) first.
  CHECK(t.encode(" low") == std::vector<uint32_t>{32, 257});
  // Unknown characters fall back to their byte symbols.
  CHECK(t.encode("z") == std::vector<uint32_t>{'z'});
  // Malformed merges are reported with file and line.
  write(d.path + "/bad.txt", "#version: 0.2\nl o\nbroken\n");
  try {
    Gpt2BpeTokenizer bad(d.path + "/vocab.json", d.path + "/bad.txt");
    FAIL("expected an error");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("bad.txt:3") != std::string::npos);
  }
}

TEST_CASE("synthetic corpus: deterministic, in range, learnable structure") {
  auto a = make_synthetic_corpus(7, 20000, 256);
  auto b = make_synthetic_corpus(7, 20000, 256);
  auto c = make_synthetic_corpus(8, 20000, 256);
  CHECK(a.tokens == b.tokens);
  CHECK(a.tokens != c.tokens);
  CHECK(a.tokens.size() == 20000);
  for (auto t : a.tokens) REQUIRE(t < 256);
  // Structure: the next token is far more predictable than uniform. Empirical
  // conditional entropy H(next | current) must be well below log2(256) = 8 bits.
  std::map<uint32_t, std::map<uint32_t, int>> counts;
  for (size_t i = 0; i + 1 < a.tokens.size(); ++i) ++counts[a.tokens[i]][a.tokens[i + 1]];
  double h = 0;
  const double n = static_cast<double>(a.tokens.size() - 1);
  for (const auto& [cur, nexts] : counts) {
    double tot = 0;
    for (const auto& [k, v] : nexts) tot += v;
    for (const auto& [k, v] : nexts) h -= v / n * std::log2(v / tot);
  }
  CHECK(h < 3.0);
}

TEST_CASE("shards: round trip, atomic write, corrupt files rejected with the path") {
  TempDir d;
  std::vector<uint32_t> toks{1, 2, 3, 65535, 0};
  write_token_shard(d.path + "/a.tok", toks, 65536);
  auto c = read_token_shard(d.path + "/a.tok");
  CHECK(c.tokens == toks);
  CHECK(c.vocab_size == 65536);
  CHECK(fs::file_size(d.path + "/a.tok") == 64 + 5 * 2);
  std::vector<uint32_t> big{70000, 5};
  write_token_shard(d.path + "/b.tok", big, 100000);  // 4 bytes per token
  CHECK(read_token_shard(d.path + "/b.tok").tokens == big);
  // Directory: *.tok concatenated in name order.
  auto all = load_token_corpus(d.path);
  CHECK(all.tokens.size() == 7);
  CHECK(all.tokens[5] == 70000);
  // Truncated file.
  auto bytes = read_file(d.path + "/a.tok");
  write_file_atomically(d.path + "/t.tok", bytes.substr(0, bytes.size() - 1));
  CHECK_THROWS_WITH_AS(read_token_shard(d.path + "/t.tok"), doctest::Contains("truncated"), InputError);
  write(d.path + "/x.tok", "not a shard at all, definitely not 64 bytes of header ................");
  CHECK_THROWS_WITH_AS(read_token_shard(d.path + "/x.tok"), doctest::Contains("x.tok"), InputError);
  CHECK_THROWS_AS(write_token_shard(d.path + "/c.tok", {300}, 256), InputError);
  // No temp files are left behind.
  for (const auto& e : fs::directory_iterator(d.path)) CHECK(e.path().string().find(".tmp.") == std::string::npos);
}

TEST_CASE("distributed sampler: disjoint slices, union is a block of the permutation") {
  const int64_t n = 103;
  const int world = 4;
  const auto perm = permutation(n, 5 * 1000003ULL + 0);  // epoch 0 permutation of seed 5
  std::set<int64_t> seen;
  std::vector<DistributedSampler> ranks;
  for (int r = 0; r < world; ++r) ranks.emplace_back(n, world, r, 5);
  CHECK(ranks[0].per_rank() == 25);  // drop_last: 100 of 103 samples per epoch
  for (int step = 0; step < 5; ++step) {
    std::set<int64_t> global;
    for (int r = 0; r < world; ++r)
      for (auto i : ranks[static_cast<size_t>(r)].next(5)) {
        CHECK(seen.insert(i).second);  // never twice in an epoch
        global.insert(i);
      }
    // The union of the ranks' step batches is perm[step·20, step·20 + 20).
    std::set<int64_t> block(perm.begin() + step * 20, perm.begin() + step * 20 + 20);
    CHECK(global == block);
  }
  // Next epoch: a different order, positions restore exactly.
  auto pos = ranks[1].position();
  CHECK(pos.epoch == 0);
  CHECK(pos.offset == 25);
  const auto next_a = ranks[1].next(3);
  DistributedSampler again(n, world, 1, 5);
  again.set_position(pos);
  CHECK(again.next(3) == next_a);
  CHECK(again.position().epoch == 1);
}

TEST_CASE("prepare-data: files and directories to shards, errors name the file") {
  TempDir d;
  fs::create_directories(d.path + "/docs");
  write(d.path + "/docs/b.txt", "bb");
  write(d.path + "/docs/a.txt", "a");
  PrepareDataOptions o;
  o.inputs = {d.path + "/docs"};
  o.output = d.path + "/out.tok";
  CHECK(prepare_data(o) == 5);  // "a" eot "bb" eot
  CHECK(read_token_shard(o.output).tokens == std::vector<uint32_t>{'a', 256, 'b', 'b', 256});
  o.output = d.path + "/shards";
  o.shard_tokens = 2;
  prepare_data(o);
  CHECK(load_token_corpus(o.output).tokens.size() == 5);
  CHECK(fs::exists(d.path + "/shards/shard_00002.tok"));
  o.inputs = {d.path + "/missing.txt"};
  CHECK_THROWS_WITH_AS(prepare_data(o), doctest::Contains("missing.txt"), InputError);
  PrepareDataOptions s;
  s.synthetic = 5000;
  s.vocab_size = 100;
  s.output = d.path + "/syn.tok";
  prepare_data(s);
  CHECK(read_token_shard(s.output).tokens == make_synthetic_corpus(1234, 5000, 100).tokens);
  // The CLI entry point: exit code 2 on bad input.
  std::vector<std::string> args{"prepare-data", "--input", d.path + "/nope", "--output", d.path + "/o.tok"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  CHECK(run_prepare_data(static_cast<int>(argv.size()), argv.data()) == 2);
}
