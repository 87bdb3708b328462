// DV_HOST_DEVICE marks inline functions that the CUDA kernels (codec/cuda) share with the CPU
// code. One source compiled by both compilers, each without FMA contraction (-ffp-contract=off,
// nvcc --fmad=false), rounds identically: that is what keeps the bitstream independent of the
// backend that encoded it.
#pragma once

#ifdef __CUDACC__
#define DV_HOST_DEVICE __host__ __device__
#else
#define DV_HOST_DEVICE
#endif
