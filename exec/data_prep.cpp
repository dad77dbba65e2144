// exec/data_prep.cpp — see data_prep.hpp.
#include "exec/data_prep.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <memory>

#include "core/error.hpp"
#include "exec/atomic_file.hpp"
#include "exec/token_data.hpp"
#include "exec/tokenizer.hpp"

namespace dptwin::exec {
namespace {

namespace fs = std::filesystem;

InputError bad(const std::string& key, const std::string& msg) {
  return InputError(SourceLocation{"command line", 0, 0}, key, msg);
}

std::vector<std::string> expand_inputs(const std::vector<std::string>& inputs) {
  std::vector<std::string> files;
  for (const auto& in : inputs) {
    std::error_code ec;
    if (fs::is_directory(in, ec)) {
      std::vector<std::string> inside;
      for (const auto& e : fs::directory_iterator(in))
        if (e.is_regular_file()) inside.push_back(e.path().string());
      std::sort(inside.begin(), inside.end());
      files.insert(files.end(), inside.begin(), inside.end());
    } else if (fs::is_regular_file(in, ec)) {
      files.push_back(in);
    } else {
      throw InputError(SourceLocation{in, 0, 0}, "--input", "no such file or directory");
    }
  }
  if (files.empty()) throw bad("--input", "no input files");
  return files;
}

}  // namespace

long prepare_data(const PrepareDataOptions& o) {
  if (o.output.empty()) throw bad("--output", "required");
  if (o.synthetic > 0) {
    if (o.vocab_size < 16) throw bad("--vocab-size", "must be >= 16");
    auto c = make_synthetic_corpus(static_cast<uint64_t>(o.seed), o.synthetic, static_cast<uint32_t>(o.vocab_size));
    write_token_shard(o.output, c.tokens, c.vocab_size);
    return o.synthetic;
  }
  std::unique_ptr<Tokenizer> tok;
  if (o.tokenizer == "byte") {
    tok = std::make_unique<ByteTokenizer>();
  } else if (o.tokenizer == "gpt2") {
    if (o.vocab.empty() || o.merges.empty()) throw bad("--tokenizer", "gpt2 needs --vocab vocab.json and --merges merges.txt");
    tok = std::make_unique<Gpt2BpeTokenizer>(o.vocab, o.merges);
  } else {
    throw bad("--tokenizer", fmt::format("unknown tokenizer '{}' (byte or gpt2)", o.tokenizer));
  }
  std::vector<uint32_t> tokens;
  for (const auto& f : expand_inputs(o.inputs)) {
    std::string text;
    try {
      text = read_file(f);
    } catch (const std::exception& e) {
      throw InputError(SourceLocation{f, 0, 0}, "--input", e.what());
    }
    const auto ids = tok->encode(text);
    tokens.insert(tokens.end(), ids.begin(), ids.end());
    tokens.push_back(tok->eot_id());
  }
  if (o.shard_tokens <= 0) {
    write_token_shard(o.output, tokens, tok->vocab_size());
  } else {
    make_directories(o.output);
    size_t k = 0;
    for (size_t off = 0; off < tokens.size(); off += static_cast<size_t>(o.shard_tokens), ++k) {
      const size_t end = std::min(tokens.size(), off + static_cast<size_t>(o.shard_tokens));
      std::vector<uint32_t> part(tokens.begin() + static_cast<long>(off), tokens.begin() + static_cast<long>(end));
      write_token_shard(fmt::format("{}/shard_{:05d}.tok", o.output, k), part, tok->vocab_size());
    }
  }
  return static_cast<long>(tokens.size());
}

int run_prepare_data(int argc, char** argv) {
  PrepareDataOptions o;
  CLI::App app{"dptwin prepare-data: tokenize text files into dptwin token shards"};
  app.add_option("--input", o.inputs, "text file or directory (repeatable)");
  app.add_option("--output", o.output, "output shard file (or directory with --shard-tokens)");
  app.add_option("--tokenizer", o.tokenizer, "byte | gpt2")->capture_default_str()->check(CLI::IsMember({"byte", "gpt2"}));
  app.add_option("--vocab", o.vocab, "GPT-2 vocab.json (tokenizer gpt2)");
  app.add_option("--merges", o.merges, "GPT-2 merges.txt (tokenizer gpt2)");
  app.add_option("--shard-tokens", o.shard_tokens, "tokens per shard (0: one file)")->capture_default_str();
  app.add_option("--synthetic", o.synthetic, "write a synthetic corpus of this many tokens instead");
  app.add_option("--vocab-size", o.vocab_size, "synthetic: vocabulary size")->capture_default_str();
  app.add_option("--seed", o.seed, "synthetic: seed")->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "dptwin prepare-data: error: %s\n", e.what());
    return kExitInputError;
  }
  try {
    const long n = prepare_data(o);
    std::fprintf(stderr, "dptwin prepare-data: wrote %ld tokens to %s\n", n, o.output.c_str());
  } catch (const InputError& e) {
    std::fprintf(stderr, "dptwin prepare-data: error: %s\n", e.what());
    return kExitInputError;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dptwin prepare-data: error: %s\n", e.what());
    return kExitRuntimeError;
  }
  return 0;
}

}  // namespace dptwin::exec
