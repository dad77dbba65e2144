// core/precision.hpp — numeric precision vocabulary shared by models/, sim/ and exec/.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace dptwin {

// Element type of a tensor or of the arithmetic of an op.
enum class DType { FP32, FP16, BF16 };

constexpr double dtype_size(DType t) { return t == DType::FP32 ? 4.0 : 2.0; }

// Mixed-precision mode, with Apex's meaning:
//   None: everything in the base dtype (fp32).
//   O1:   fp32 weights and gradients; matmuls (and other whitelisted ops) cast to half.
//   O2:   half model (weights, activations, gradients), fp32 master weights in the
//         optimizer, dynamic loss scaling with an overflow check each step.
enum class AmpLevel { None, O1, O2 };

// A training precision: which half type (when any) and how it is applied.
struct PrecisionMode {
  AmpLevel amp = AmpLevel::None;
  DType half = DType::FP16;  // the reduced type used under O1/O2 (fp16 or bf16)

  bool mixed() const { return amp != AmpLevel::None; }
  // dtype of matmul arithmetic
  DType matmul_dtype() const { return mixed() ? half : DType::FP32; }
  // dtype of weights held by the model replica and of the gradients that are communicated
  DType weight_dtype() const { return amp == AmpLevel::O2 ? half : DType::FP32; }
  DType grad_dtype() const { return weight_dtype(); }
  // dtype of stored activations (O1 keeps matmul outputs in half)
  DType activation_dtype() const { return mixed() ? half : DType::FP32; }
  bool fp32_master_weights() const { return amp == AmpLevel::O2; }
  bool loss_scaling() const { return mixed() && half == DType::FP16; }
};

std::string to_string(DType t);
std::string to_string(AmpLevel a);
std::optional<DType> parse_dtype(std::string_view s);      // "fp32", "fp16", "bf16"
std::optional<AmpLevel> parse_amp_level(std::string_view s);  // "none", "o1", "o2" (any case)

}  // namespace dptwin
