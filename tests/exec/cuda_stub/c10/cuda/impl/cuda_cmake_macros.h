// Stand-in for the header a CUDA build of LibTorch generates (CPU builds ship
// c10/cuda's headers without it); used only by the compile-only check of
// exec's CUDA branches (tests/exec/meson.build, target exec_gpu_compile_check).
#pragma once
#define C10_CUDA_BUILD_SHARED_LIBS
