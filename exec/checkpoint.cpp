// exec/checkpoint.cpp — see checkpoint.hpp.
#include "exec/checkpoint.hpp"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>

#include <sstream>

#include "exec/atomic_file.hpp"

namespace dptwin::exec {
namespace {

torch::Tensor i64(int64_t v) { return torch::tensor({v}, torch::kLong); }
torch::Tensor f64(double v) { return torch::tensor({v}, torch::kDouble); }
torch::Tensor bytes_of(const std::string& s) {
  auto t = torch::empty({static_cast<int64_t>(s.size())}, torch::kUInt8);
  std::memcpy(t.data_ptr(), s.data(), s.size());
  return t;
}
// A fresh tensor per read: InputArchive::read into a defined tensor would set_() it.
torch::Tensor read_tensor(torch::serialize::InputArchive& ar, const std::string& key) {
  torch::Tensor t;
  ar.read(key, t);
  return t;
}
std::string string_of(const torch::Tensor& t) {
  return std::string(static_cast<const char*>(t.data_ptr()), static_cast<size_t>(t.numel()));
}

}  // namespace

std::string checkpoint_path(const std::string& dir) { return dir + "/checkpoint.pt"; }

void save_checkpoint(const std::string& dir, const std::vector<std::string>& names,
                     const std::vector<torch::Tensor>& params, torch::optim::Optimizer* optimizer,
                     const CheckpointMeta& meta, const std::function<void()>& before_commit) {
  torch::NoGradGuard no_grad;
  torch::serialize::OutputArchive root, model, optim;
  for (size_t i = 0; i < params.size(); ++i) model.write(names[i], params[i].detach().to(torch::kFloat32).cpu());
  root.write("model", model);
  if (optimizer) {
    optimizer->save(optim);
    root.write("optimizer", optim);
  }
  root.write("has_optimizer", i64(optimizer ? 1 : 0));
  root.write("next_step", i64(meta.next_step));
  root.write("sampler_epoch", i64(meta.sampler.epoch));
  root.write("sampler_offset", i64(meta.sampler.offset));
  root.write("scaler_scale", f64(meta.scaler.scale));
  root.write("scaler_good_steps", i64(meta.scaler.good_steps));
  root.write("fingerprint", bytes_of(meta.fingerprint));
  root.write("cpu_rng", at::detail::getDefaultCPUGenerator().get_state());
  std::ostringstream out;
  root.save_to(out);
  make_directories(dir);
  write_file_atomically(checkpoint_path(dir), out.str(), before_commit);
}

std::optional<CheckpointMeta> load_checkpoint(const std::string& dir, const std::vector<std::string>& names,
                                              const std::vector<torch::Tensor>& params,
                                              torch::optim::Optimizer* optimizer, const std::string& fingerprint) {
  const std::string path = checkpoint_path(dir);
  if (!file_exists(path)) return std::nullopt;
  torch::serialize::InputArchive root, model, optim;
  try {
    root.load_from(path);
  } catch (const std::exception& e) {
    throw std::runtime_error(fmt::format("checkpoint '{}' is unreadable: {}", path, e.what()));
  }
  CheckpointMeta meta;
  meta.fingerprint = string_of(read_tensor(root, "fingerprint"));
  if (meta.fingerprint != fingerprint)
    throw std::runtime_error(fmt::format("checkpoint '{}' was written by a different run configuration:\n  checkpoint: {}\n  this run:   {}",
                                         path, meta.fingerprint, fingerprint));
  root.read("model", model);
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < params.size(); ++i) {
    const auto t = read_tensor(model, names[i]);
    if (!t.sizes().equals(params[i].sizes()))
      throw std::runtime_error(fmt::format("checkpoint '{}': parameter {} has the wrong shape", path, names[i]));
    params[i].copy_(t);
  }
  if (optimizer) {
    if (read_tensor(root, "has_optimizer").item<int64_t>() == 0)
      throw std::runtime_error(fmt::format("checkpoint '{}' holds no optimizer state", path));
    root.read("optimizer", optim);
    optimizer->load(optim);
  }
  meta.next_step = read_tensor(root, "next_step").item<int64_t>();
  meta.sampler.epoch = read_tensor(root, "sampler_epoch").item<int64_t>();
  meta.sampler.offset = read_tensor(root, "sampler_offset").item<int64_t>();
  meta.scaler.scale = read_tensor(root, "scaler_scale").item<double>();
  meta.scaler.good_steps = static_cast<int>(read_tensor(root, "scaler_good_steps").item<int64_t>());
  auto gen = at::detail::getDefaultCPUGenerator();
  gen.set_state(read_tensor(root, "cpu_rng"));
  return meta;
}

}  // namespace dptwin::exec
