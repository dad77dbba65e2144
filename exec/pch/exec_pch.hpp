// exec/pch/exec_pch.hpp — precompiled header of the LibTorch translation units.
// (meson compiles it as a main file and injects it with -include, so no include guard)
#include <torch/torch.h>
