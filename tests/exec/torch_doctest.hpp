// tests/exec/torch_doctest.hpp — LibTorch, then doctest.
//
// Debian's LibTorch pulls in glog, whose CHECK/CHECK_EQ/... macros collide
// with doctest's. Include this instead of <doctest.h> in tests that use torch.
#pragma once

#include <torch/torch.h>

#undef CHECK
#undef CHECK_EQ
#undef CHECK_NE
#undef CHECK_LT
#undef CHECK_LE
#undef CHECK_GT
#undef CHECK_GE
#undef CHECK_NOTNULL
#include <doctest.h>
