// CUDA kernels of the dense optimizers: one grid-stride kernel template over
// the elements, and per optimizer a functor that calls its FERRY_HD element
// function. See dense_optimizer_kernels.h.
#include <cuda_runtime_api.h>

#include "compute/cuda/dense_optimizer_kernels.h"

namespace ferry::kernels {
namespace {

constexpr int kThreads = 256;
constexpr unsigned kMaxBlocks = 8192;  // grid-stride beyond this

unsigned Blocks(size_t n) {
  const size_t blocks = (n + kThreads - 1) / kThreads;
  return blocks < kMaxBlocks ? static_cast<unsigned>(blocks) : kMaxBlocks;
}

template <typename Op>
__global__ void UpdateKernel(Op op, DenseUpdateArgs a) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < a.n; i += stride) {
    op(a, i);
  }
}

template <typename Op>
int Launch(const Op& op, const DenseUpdateArgs& a, void* stream) {
  if (a.n == 0) return static_cast<int>(cudaSuccess);
  UpdateKernel<<<Blocks(a.n), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      op, a);
  return static_cast<int>(cudaGetLastError());
}

struct SgdOp {
  float lr, weight_decay;
  __device__ void operator()(const DenseUpdateArgs& a, size_t i) const {
    a.param[i] = SgdElement(lr, weight_decay, a.grad[i], a.param[i]);
  }
};

struct MomentumOp {
  float lr, weight_decay, momentum;
  bool nesterov;
  __device__ void operator()(const DenseUpdateArgs& a, size_t i) const {
    MomentumElement(lr, weight_decay, momentum, nesterov, a.grad[i],
                    a.state[0][i], a.param[i]);
  }
};

struct AdamOp {
  AdamScalars s;
  __device__ void operator()(const DenseUpdateArgs& a, size_t i) const {
    AdamElement(s, a.grad[i], a.state[0][i], a.state[1][i], a.param[i]);
  }
};

}  // namespace

int SgdUpdate(const OptimizerStepParams& p, const DenseUpdateArgs& args,
              void* stream) {
  return Launch(SgdOp{p.lr, p.weight_decay}, args, stream);
}

int MomentumUpdate(const OptimizerStepParams& p, const DenseUpdateArgs& args,
                   void* stream) {
  return Launch(MomentumOp{p.lr, p.weight_decay, p.momentum, p.nesterov}, args,
                stream);
}

int AdamUpdate(const OptimizerStepParams& p, const DenseUpdateArgs& args,
               void* stream) {
  return Launch(AdamOp{AdamScalarsOf(p, /*decoupled=*/false)}, args, stream);
}

int AdamWUpdate(const OptimizerStepParams& p, const DenseUpdateArgs& args,
                void* stream) {
  return Launch(AdamOp{AdamScalarsOf(p, /*decoupled=*/true)}, args, stream);
}

}  // namespace ferry::kernels
