// The CUDA backend's object (hot_paths.h HotPaths; host code in cuda/backend.cpp, kernels in
// cuda/hot_paths.cu), compiled only with -DDEJAVIEW_CUDA=ON.
#pragma once

#include <memory>

#include "hot_paths.h"

namespace dv::codec {

// The CUDA backend where a CUDA device is usable, else cuda::DeviceAvailable's error.
StatusOr<std::unique_ptr<HotPaths>> MakeCudaHotPaths();
// The same without asking for a device first: each hot path then fails as cleanly as the CUDA
// calls it makes (tests/codec/cuda_test.cpp). MakeHotPaths never hands one out unchecked.
std::unique_ptr<HotPaths> NewCudaHotPaths();

}  // namespace dv::codec
