// tests/exec/param_compare.hpp — comparing final parameters of two runs.
//
// The criterion of data-parallel equivalence: all parameters as one vector,
// ||a - b|| / ||b|| < 1e-5. Per tensor, the same ratio must stay < 1e-4 except
// for the key third of every attn.c_attn.bias: its gradient is zero in exact
// arithmetic (softmax(q·(k + b)) = softmax(q·k + q·b) shifts a whole row by a
// constant), so in fp32 it is pure rounding noise (~1e-9) that AdamW's
// m / sqrt(v) normalization turns into ±lr steps; those entries never affect
// the model's output and are excluded.
#pragma once

#include <torch/torch.h>

#include <string>
#include <utility>
#include <vector>

using NamedTensors = std::vector<std::pair<std::string, torch::Tensor>>;

inline NamedTensors load_named_params(const std::string& path) {
  torch::serialize::InputArchive ar;
  ar.load_from(path);
  NamedTensors out;
  for (const auto& key : ar.keys()) {
    torch::Tensor t;
    ar.read(key, t);
    out.emplace_back(key, t);
  }
  return out;
}

struct ParamDiff {
  double global = 0;      // ||a - b|| / ||b|| over all parameters
  double worst = 0;       // largest per-tensor ratio (key bias excluded)
  std::string worst_name;
};

inline ParamDiff compare_params(const NamedTensors& a, const NamedTensors& b) {
  ParamDiff d;
  double num = 0, den = 0;
  if (a.size() != b.size()) return {1e9, 1e9, "size mismatch"};
  for (size_t i = 0; i < a.size(); ++i) {
    auto x = a[i].second, y = b[i].second;
    const std::string& name = a[i].first;
    if (name.size() >= 16 && name.compare(name.size() - 16, 16, "attn.c_attn.bias") == 0) {
      const int64_t c = x.numel() / 3;
      x = torch::cat({x.narrow(0, 0, c), x.narrow(0, 2 * c, c)});
      y = torch::cat({y.narrow(0, 0, c), y.narrow(0, 2 * c, c)});
    }
    const double diff = (x - y).norm().item<double>(), norm = y.norm().item<double>();
    num += diff * diff;
    den += norm * norm;
    const double r = diff / std::max(norm, 1e-12);
    if (r > d.worst) {
      d.worst = r;
      d.worst_name = name;
    }
  }
  d.global = std::sqrt(num) / std::max(std::sqrt(den), 1e-12);
  return d;
}
