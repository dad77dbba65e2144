// exec/data_prep.hpp — `dptwin prepare-data`: text files -> token shards.
//
//   dptwin prepare-data --input a.txt [--input dir/ ...] --output data/
//       [--tokenizer byte|gpt2 --vocab vocab.json --merges merges.txt] [--shard-tokens N]
//   dptwin prepare-data --synthetic N [--vocab-size V] [--seed S] --output synth.tok
//
// Inputs are files or directories (every regular file inside, in name order);
// documents are separated by the tokenizer's end-of-text id. With
// --shard-tokens, the output is a directory of shard_00000.tok, ...; otherwise
// one file. Shards are written atomically (see token_data.hpp for the format).
//
// Torch-free: the `dptwin` CLI links it through exec_launch_dep.
#pragma once

#include <string>
#include <vector>

namespace dptwin::exec {

// argv[0] is the program name. Returns 0 on success, 2 on bad input (message
// on stderr, naming the file), 1 on I/O failure.
int run_prepare_data(int argc, char** argv);

struct PrepareDataOptions {
  std::vector<std::string> inputs;  // files or directories
  std::string output;               // file, or directory when shard_tokens > 0
  std::string tokenizer = "byte";   // byte | gpt2
  std::string vocab, merges;        // gpt2: vocab.json and merges.txt
  long shard_tokens = 0;            // > 0: shards of this many tokens in directory `output`
  long synthetic = 0;               // > 0: write a synthetic corpus of this many tokens instead
  int vocab_size = 512;             // synthetic: vocabulary size
  int seed = 1234;                  // synthetic: seed
};

// Does the work; throws InputError on bad input. Returns the token count written.
long prepare_data(const PrepareDataOptions& o);

}  // namespace dptwin::exec
