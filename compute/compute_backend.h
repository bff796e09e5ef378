// Compute backend: the numeric kernels that the model and the optimizers run
// on contiguous fp32 buffers, implemented on the CPU (OpenBLAS) and on CUDA
// (cuBLAS + our own kernels).
//
// Memory spaces: every float* passed to a kernel lives in the backend's own
// memory space (host memory for the CPU backend, device memory for CUDA).
// Buffers come from Allocate(); CopyToDevice/CopyToHost cross the boundary.
// Host pointers passed to CopyTo* and labels may be any host memory; pinned
// host memory from AllocateHost() is faster for the CUDA backend.
//
// All matrices are row-major. Kernels may run asynchronously on the backend's
// stream; CopyToHost(), the functions that return values and Synchronize()
// wait for everything queued before them. A host source passed to
// CopyToDevice() from AllocateHost() memory must stay unchanged until the
// next such waiting call (pageable memory may be reused at once).
// Shapes: negative dimensions and leading dimensions smaller than the
// matrix rows give INVALID_ARGUMENT. Copy() may overlap; dlogits may alias
// logits. Freeing a CUDA buffer synchronizes the device: allocate outside
// hot loops.
//
// Thread safety: a backend instance is used by one thread at a time.
#ifndef FERRY_COMPUTE_COMPUTE_BACKEND_H_
#define FERRY_COMPUTE_COMPUTE_BACKEND_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "compute/dense_optimizer_math.h"
#include "compute/kernel_math.h"
#include "compute/layer_ops.h"

namespace ferry {

class ComputeBackend;
struct DenseOptimizer;  // compute/dense_optimizers.h

// An owned fp32 buffer in one backend's memory space. Movable, not copyable.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(float* data, size_t size, std::function<void(float*)> deleter)
      : data_(data, std::move(deleter)), size_(size) {}

  float* data() { return data_.get(); }
  const float* data() const { return data_.get(); }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

 private:
  std::unique_ptr<float, std::function<void(float*)>> data_;
  size_t size_ = 0;
};

// Result of a softmax cross-entropy pass over a batch.
struct LossStats {
  double loss_sum = 0.0;  // sum over rows of -log p(label)
  int64_t correct = 0;    // rows whose argmax equals the label
};

enum class Transpose { kNo, kYes };

class ComputeBackend {
 public:
  virtual ~ComputeBackend() = default;

  // Human-readable name, e.g. "cpu (openblas, 1 thread)" or "cuda:0 NVIDIA
  // H100".
  virtual std::string Name() const = 0;
  // "cpu" or "cuda".
  virtual std::string Kind() const = 0;
  // True when backend buffers are directly addressable host memory.
  virtual bool IsHostMemory() const = 0;

  // Returns a zero-filled buffer of `n` floats. RESOURCE_EXHAUSTED on failure.
  virtual absl::StatusOr<DeviceBuffer> Allocate(size_t n) = 0;
  // Host memory suitable for fast transfers (pinned on CUDA), zero-filled.
  virtual absl::StatusOr<DeviceBuffer> AllocateHost(size_t n) = 0;

  virtual absl::Status CopyToDevice(const float* host, size_t n,
                                    float* dst) = 0;
  virtual absl::Status CopyToHost(const float* src, size_t n, float* host) = 0;
  // Device-to-device copy.
  virtual absl::Status Copy(const float* src, size_t n, float* dst) = 0;
  virtual absl::Status Fill(float value, size_t n, float* x) = 0;
  virtual absl::Status Synchronize() = 0;

  // C[m,n] = alpha * op(A) op(B) + beta * C, where op(A) is [m,k], op(B) is
  // [k,n]. lda/ldb/ldc are the row strides of A, B, C as stored.
  virtual absl::Status Gemm(Transpose trans_a, Transpose trans_b, int m, int n,
                            int k, float alpha, const float* a, int lda,
                            const float* b, int ldb, float beta, float* c,
                            int ldc) = 0;

  // x[r, c] += bias[c] for an [rows, cols] matrix.
  virtual absl::Status AddBias(int rows, int cols, const float* bias,
                               float* x) = 0;
  // dbias[c] = sum_r dy[r, c] (overwrites dbias).
  virtual absl::Status BiasGrad(int rows, int cols, const float* dy,
                                float* dbias) = 0;
  // y = max(x, 0); y may alias x.
  virtual absl::Status Relu(size_t n, const float* x, float* y) = 0;
  // dx = dy * (y > 0); dx may alias dy.
  virtual absl::Status ReluBackward(size_t n, const float* y, const float* dy,
                                    float* dx) = 0;

  // Softmax cross-entropy over [rows, cols] logits with host-side int labels
  // in [0, cols). When `dlogits` is non-null it receives
  // grad_scale * (softmax(logits) - onehot(label)). INVALID_ARGUMENT on a
  // label out of range (nothing is written then).
  virtual absl::StatusOr<LossStats> SoftmaxCrossEntropy(
      int rows, int cols, const float* logits, const int32_t* labels_host,
      float grad_scale, float* dlogits) = 0;

  // y += alpha * x.
  virtual absl::Status Axpy(size_t n, float alpha, const float* x,
                            float* y) = 0;
  // x *= alpha.
  virtual absl::Status Scale(size_t n, float alpha, float* x) = 0;
  // Sum of squares of x (for gradient norms).
  virtual absl::StatusOr<double> SumSquares(size_t n, const float* x) = 0;
  // True when every element is finite (no NaN or Inf).
  virtual absl::StatusOr<bool> AllFinite(size_t n, const float* x) = 0;

  // ---- Layer kernels: one op family per family of layers ----

  // The ops of family `Ops` on this backend (compute/layer_ops.h: ConvOps,
  // PoolOps, DropoutOps, BatchNormOps, ...). UNIMPLEMENTED when this backend
  // does not provide the family. The object lives as long as the backend.
  template <typename Ops>
  absl::StatusOr<Ops*> LayerOpsOf() {
    LayerOps* ops = FindLayerOps(Ops::kFamily);
    if (ops == nullptr) {
      return absl::UnimplementedError(absl::StrCat(
          "backend ", Kind(), " has no ", Ops::kFamily.name, " layer ops"));
    }
    return static_cast<Ops*>(ops);
  }
  // The family's ops object, or null; callers use LayerOpsOf.
  virtual LayerOps* FindLayerOps(const LayerOpsFamily& family) = 0;

  // One dense optimizer update (compute/dense_optimizers.h) on this
  // backend: runs `optimizer`'s function for this backend's kind on the
  // buffers of `args`. Callers go through RunDenseUpdate, which checks the
  // step. UNIMPLEMENTED when the optimizer has no function for this backend.
  virtual absl::Status DenseOptimizerUpdate(const DenseOptimizer& optimizer,
                                            const OptimizerStepParams& p,
                                            const DenseUpdateArgs& args) = 0;
};

// Which backend to create.
enum class DeviceChoice { kAuto, kCpu, kCuda };

// Parses "auto", "cpu" or "cuda". INVALID_ARGUMENT otherwise.
absl::StatusOr<DeviceChoice> ParseDeviceChoice(const std::string& text);

// Creates a backend. kAuto picks CUDA when a device is visible, else CPU.
// kCuda fails with UNAVAILABLE when the binary has no CUDA support or no
// device is visible. `cpu_threads` sets the BLAS thread count (CPU backend).
// `cuda_ordinal` picks the GPU: device cuda_ordinal % (visible devices), so
// the stages of a pipeline in one process spread round-robin over the GPUs.
absl::StatusOr<std::unique_ptr<ComputeBackend>> MakeBackend(
    DeviceChoice choice, int cpu_threads = 1, int cuda_ordinal = 0);

// True when this binary was built with CUDA and a device is visible.
bool CudaDeviceAvailable();

}  // namespace ferry

#endif  // FERRY_COMPUTE_COMPUTE_BACKEND_H_
