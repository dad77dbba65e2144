// exec/pch/exec_pch.hpp — precompiled header of the LibTorch translation units.
#pragma once
#include <torch/torch.h>
