// CUDA compute backend: cuBLAS for GEMM, our own kernels (kernels.cu) for the
// rest, everything queued on one stream per backend. Defines the entry points
// of compute/cuda_entry.h.
//
// Semantics beyond compute_backend.h:
// - CopyToDevice() is asynchronous. From pageable host memory the driver stages
//   the data before returning, so the source may be reused at once; from
//   pinned memory (AllocateHost) the source must stay unchanged until the next
//   synchronizing call (CopyToHost, Synchronize, a function returning a value).
// - Copy() between overlapping ranges behaves like memmove.
// - Gemm() validates the leading dimensions (INVALID_ARGUMENT) and computes in
//   full fp32 (no TF32), so it matches the CPU backend within fp32 rounding.
// - Every CUDA and cuBLAS result goes through FERRY_CUDA_CHECK / ToStatus():
//   RESOURCE_EXHAUSTED for allocation failures, INTERNAL otherwise.
#include <cublas_v2.h>
#include <cuda_runtime.h>  // typed cudaMalloc(T**) overloads

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "compute/batch_norm_ops.h"
#include "compute/compute_backend.h"
#include "compute/conv_ops.h"
#include "compute/cuda/cublas_library.h"
#include "compute/cuda/cuda_layer_ops.h"
#include "compute/cuda/cuda_status.h"
#include "compute/cuda/kernels.h"
#include "compute/cuda/layer_kernels.h"
#include "compute/cuda_entry.h"
#include "compute/dense_optimizers.h"
#include "compute/dropout_ops.h"
#include "compute/pool_ops.h"

namespace ferry {
namespace {

// cuBLAS failures as absl::Status, next to cuda_status.h's CUDA ones.
using ::ferry::ToStatus;
absl::Status ToStatus(cublasStatus_t st, const char* api, const char* file,
                      int line) {
  if (st == CUBLAS_STATUS_SUCCESS) return absl::OkStatus();
  // Only cuBLAS calls return a cublasStatus_t, so the library is loaded.
  absl::StatusOr<const CublasLibrary*> cublas = LoadCublas();
  const std::string text =
      cublas.ok() ? std::string((*cublas)->status_string(st))
                  : absl::StrCat("cuBLAS status ", static_cast<int>(st));
  return CudaErrorStatus(st == CUBLAS_STATUS_ALLOC_FAILED, api, file, line,
                         text.c_str());
}

absl::Status CheckDims(const char* op, int rows, int cols) {
  if (rows >= 0 && cols >= 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(op, ": negative dimension rows=", rows, " cols=", cols));
}

cublasOperation_t ToCublas(Transpose t) {
  return t == Transpose::kYes ? CUBLAS_OP_T : CUBLAS_OP_N;
}

// A device buffer that only grows; used for scratch space of the kernels.
class Scratch {
 public:
  Scratch() = default;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch() {
    if (data_ != nullptr) (void)cudaFree(data_);
  }

  // Returns at least `bytes` of device memory. Growing synchronizes `stream`
  // first, since queued kernels may still use the old memory.
  absl::StatusOr<void*> Reserve(size_t bytes, cudaStream_t stream) {
    if (bytes <= capacity_) return data_;
    const size_t grown = std::max(bytes, capacity_ * 2);
    RETURN_IF_ERROR(FERRY_CUDA_CHECK(cudaStreamSynchronize(stream)));
    if (data_ != nullptr) {
      RETURN_IF_ERROR(FERRY_CUDA_CHECK(cudaFree(data_)));
      data_ = nullptr;
      capacity_ = 0;
    }
    RETURN_IF_ERROR(FERRY_CUDA_CHECK(cudaMalloc(&data_, grown)));
    capacity_ = grown;
    return data_;
  }

 private:
  void* data_ = nullptr;
  size_t capacity_ = 0;
};

class CudaBackend final : public ComputeBackend {
 public:
  explicit CudaBackend(int device) : device_(device) {}
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  ~CudaBackend() override {
    (void)cudaSetDevice(device_);
    if (stream_ != nullptr) (void)cudaStreamSynchronize(stream_);
    if (cublas_ != nullptr) (void)lib_->destroy(cublas_);
    if (result_device_ != nullptr) (void)cudaFree(result_device_);
    if (result_host_ != nullptr) (void)cudaFreeHost(result_host_);
    if (partials_ != nullptr) (void)cudaFree(partials_);
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
  }

  // Creates the stream, the cuBLAS handle and the fixed scratch.
  absl::Status Init() {
    RETURN_IF_ERROR(FERRY_CUDA_CHECK(cudaSetDevice(device_)));
    cudaDeviceProp prop;
    RETURN_IF_ERROR(FERRY_CUDA_CHECK(cudaGetDeviceProperties(&prop, device_)));
    name_ = absl::StrCat("cuda:", device_, " ", prop.name);
    RETURN_IF_ERROR(FERRY_CUDA_CHECK(
        cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)));
    ASSIGN_OR_RETURN(lib_, LoadCublas());
    RETURN_IF_ERROR(FERRY_CUDA_CHECK(lib_->create(&cublas_)));
    RETURN_IF_ERROR(FERRY_CUDA_CHECK(lib_->set_stream(cublas_, stream_)));
    // Full fp32 GEMMs: no TF32 tensor cores, results comparable with the CPU.
    RETURN_IF_ERROR(
        FERRY_CUDA_CHECK(lib_->set_math_mode(cublas_, CUBLAS_DEFAULT_MATH)));
    RETURN_IF_ERROR(FERRY_CUDA_CHECK(
        lib_->set_pointer_mode(cublas_, CUBLAS_POINTER_MODE_HOST)));
    RETURN_IF_ERROR(FERRY_CUDA_CHECK(
        cudaMalloc(&result_device_, sizeof(kernels::ReductionResult))));
    RETURN_IF_ERROR(FERRY_CUDA_CHECK(
        cudaMallocHost(&result_host_, sizeof(kernels::ReductionResult))));
    RETURN_IF_ERROR(FERRY_CUDA_CHECK(
        cudaMalloc(&partials_, sizeof(double) * kernels::kMaxReductionBlocks)));
    // The layer op families: one line per family.
    const CudaStream stream{device_, stream_};
    layer_ops_.Add(ConvOps::kFamily, MakeCudaConvOps(stream));
    layer_ops_.Add(PoolOps::kFamily, MakeCudaPoolOps(stream));
    layer_ops_.Add(DropoutOps::kFamily, MakeCudaDropoutOps(stream));
    layer_ops_.Add(BatchNormOps::kFamily, MakeCudaBatchNormOps(stream));
    return absl::OkStatus();
  }

  std::string Name() const override { return name_; }
  std::string Kind() const override { return "cuda"; }
  bool IsHostMemory() const override { return false; }

  absl::StatusOr<DeviceBuffer> Allocate(size_t n) override {
    RETURN_IF_ERROR(Activate());
    if (n == 0) return DeviceBuffer(nullptr, 0, [](float*) {});
    if (n > SIZE_MAX / sizeof(float)) {
      return absl::ResourceExhaustedError(
          absl::StrCat("Allocate: ", n, " floats do not fit in memory"));
    }
    float* data = nullptr;
    RETURN_IF_ERROR(FERRY_CUDA_CHECK(cudaMalloc(&data, n * sizeof(float))));
    DeviceBuffer buffer(data, n, [device = device_](float* p) {
      int previous = 0;
      const bool switched = cudaGetDevice(&previous) == cudaSuccess &&
                            previous != device &&
                            cudaSetDevice(device) == cudaSuccess;
      (void)cudaFree(p);  // no Status to return from a deleter
      if (switched) (void)cudaSetDevice(previous);
    });
    RETURN_IF_ERROR(
        FERRY_CUDA_CHECK(cudaMemsetAsync(data, 0, n * sizeof(float), stream_)));
    return buffer;
  }

  absl::StatusOr<DeviceBuffer> AllocateHost(size_t n) override {
    RETURN_IF_ERROR(Activate());
    if (n == 0) return DeviceBuffer(nullptr, 0, [](float*) {});
    if (n > SIZE_MAX / sizeof(float)) {
      return absl::ResourceExhaustedError(
          absl::StrCat("AllocateHost: ", n, " floats do not fit in memory"));
    }
    void* data = nullptr;
    RETURN_IF_ERROR(FERRY_CUDA_CHECK(cudaMallocHost(&data, n * sizeof(float))));
    std::memset(data, 0, n * sizeof(float));
    return DeviceBuffer(static_cast<float*>(data), n,
                        [](float* p) { (void)cudaFreeHost(p); });
  }

  absl::Status CopyToDevice(const float* host, size_t n, float* dst) override {
    if (n == 0) return absl::OkStatus();
    RETURN_IF_ERROR(Activate());
    return FERRY_CUDA_CHECK(cudaMemcpyAsync(dst, host, n * sizeof(float),
                                            cudaMemcpyHostToDevice, stream_));
  }

  absl::Status CopyToHost(const float* src, size_t n, float* host) override {
    if (n == 0) return absl::OkStatus();
    RETURN_IF_ERROR(Activate());
    RETURN_IF_ERROR(FERRY_CUDA_CHECK(cudaMemcpyAsync(
        host, src, n * sizeof(float), cudaMemcpyDeviceToHost, stream_)));
    return FERRY_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  absl::Status Copy(const float* src, size_t n, float* dst) override {
    if (n == 0 || src == dst) return absl::OkStatus();
    RETURN_IF_ERROR(Activate());
    const size_t bytes = n * sizeof(float);
    if (src + n <= dst || dst + n <= src) {
      return FERRY_CUDA_CHECK(
          cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_));
    }
    // Overlapping ranges (cudaMemcpy's are undefined): go through scratch.
    ASSIGN_OR_RETURN(void* tmp, copy_scratch_.Reserve(bytes, stream_));
    RETURN_IF_ERROR(FERRY_CUDA_CHECK(
        cudaMemcpyAsync(tmp, src, bytes, cudaMemcpyDeviceToDevice, stream_)));
    return FERRY_CUDA_CHECK(
        cudaMemcpyAsync(dst, tmp, bytes, cudaMemcpyDeviceToDevice, stream_));
  }

  absl::Status Fill(float value, size_t n, float* x) override {
    RETURN_IF_ERROR(Activate());
    return FERRY_CUDA_CHECK(kernels::LaunchFill(n, value, x, stream_));
  }

  absl::Status Synchronize() override {
    RETURN_IF_ERROR(Activate());
    return FERRY_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  absl::Status Gemm(Transpose trans_a, Transpose trans_b, int m, int n, int k,
                    float alpha, const float* a, int lda, const float* b,
                    int ldb, float beta, float* c, int ldc) override {
    if (m < 0 || n < 0 || k < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("Gemm: negative dimension m=", m, " n=", n, " k=", k));
    }
    if (m == 0 || n == 0) return absl::OkStatus();
    // Row-major strides: A is [m,k] or [k,m] as stored, B is [k,n] or [n,k].
    const int min_lda = trans_a == Transpose::kNo ? k : m;
    const int min_ldb = trans_b == Transpose::kNo ? n : k;
    if (ldc < n ||
        (k > 0 && (lda < std::max(1, min_lda) || ldb < std::max(1, min_ldb)))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "Gemm: leading dimension too small: lda=", lda, " (>= ", min_lda,
          ") ldb=", ldb, " (>= ", min_ldb, ") ldc=", ldc, " (>= ", n, ")"));
    }
    RETURN_IF_ERROR(Activate());
    if (k == 0) {
      return FERRY_CUDA_CHECK(
          kernels::LaunchScaleMatrix(m, n, ldc, beta, c, stream_));
    }
    // Column-major cuBLAS sees each row-major matrix transposed, so compute
    // C^T = op(B)^T op(A)^T: swap the operands and m with n.
    return FERRY_CUDA_CHECK(lib_->sgemm(cublas_, ToCublas(trans_b),
                                        ToCublas(trans_a), n, m, k, &alpha, b,
                                        ldb, a, lda, &beta, c, ldc));
  }

  absl::Status AddBias(int rows, int cols, const float* bias,
                       float* x) override {
    RETURN_IF_ERROR(CheckDims("AddBias", rows, cols));
    RETURN_IF_ERROR(Activate());
    return FERRY_CUDA_CHECK(
        kernels::LaunchAddBias(rows, cols, bias, x, stream_));
  }

  absl::Status BiasGrad(int rows, int cols, const float* dy,
                        float* dbias) override {
    RETURN_IF_ERROR(CheckDims("BiasGrad", rows, cols));
    RETURN_IF_ERROR(Activate());
    return FERRY_CUDA_CHECK(
        kernels::LaunchBiasGrad(rows, cols, dy, dbias, stream_));
  }

  absl::Status Relu(size_t n, const float* x, float* y) override {
    RETURN_IF_ERROR(Activate());
    return FERRY_CUDA_CHECK(kernels::LaunchRelu(n, x, y, stream_));
  }

  absl::Status ReluBackward(size_t n, const float* y, const float* dy,
                            float* dx) override {
    RETURN_IF_ERROR(Activate());
    return FERRY_CUDA_CHECK(kernels::LaunchReluBackward(n, y, dy, dx, stream_));
  }

  absl::StatusOr<LossStats> SoftmaxCrossEntropy(int rows, int cols,
                                                const float* logits,
                                                const int32_t* labels_host,
                                                float grad_scale,
                                                float* dlogits) override {
    RETURN_IF_ERROR(CheckDims("SoftmaxCrossEntropy", rows, cols));
    for (int r = 0; r < rows; ++r) {
      if (labels_host[r] < 0 || labels_host[r] >= cols) {
        return absl::InvalidArgumentError(
            absl::StrCat("SoftmaxCrossEntropy: label ", labels_host[r],
                         " of row ", r, " is outside [0, ", cols, ")"));
      }
    }
    RETURN_IF_ERROR(Activate());
    const size_t n = static_cast<size_t>(rows);
    ASSIGN_OR_RETURN(void* labels,
                     labels_scratch_.Reserve(n * sizeof(int32_t), stream_));
    ASSIGN_OR_RETURN(void* row_loss,
                     row_loss_scratch_.Reserve(n * sizeof(double), stream_));
    ASSIGN_OR_RETURN(void* row_correct, row_correct_scratch_.Reserve(
                                            n * sizeof(int32_t), stream_));
    if (n > 0) {
      // The caller's labels stay valid: this function synchronizes below.
      RETURN_IF_ERROR(FERRY_CUDA_CHECK(
          cudaMemcpyAsync(labels, labels_host, n * sizeof(int32_t),
                          cudaMemcpyHostToDevice, stream_)));
    }
    RETURN_IF_ERROR(FERRY_CUDA_CHECK(kernels::LaunchSoftmaxCrossEntropy(
        rows, cols, logits, static_cast<const int32_t*>(labels), grad_scale,
        dlogits, static_cast<double*>(row_loss),
        static_cast<int32_t*>(row_correct), result_device_, stream_)));
    ASSIGN_OR_RETURN(kernels::ReductionResult result, ReadResult());
    LossStats stats;
    stats.loss_sum = result.sum;
    stats.correct = result.count;
    return stats;
  }

  absl::Status Axpy(size_t n, float alpha, const float* x, float* y) override {
    RETURN_IF_ERROR(Activate());
    return FERRY_CUDA_CHECK(kernels::LaunchAxpy(n, alpha, x, y, stream_));
  }

  absl::Status Scale(size_t n, float alpha, float* x) override {
    RETURN_IF_ERROR(Activate());
    return FERRY_CUDA_CHECK(kernels::LaunchScale(n, alpha, x, stream_));
  }

  absl::StatusOr<double> SumSquares(size_t n, const float* x) override {
    RETURN_IF_ERROR(Activate());
    RETURN_IF_ERROR(FERRY_CUDA_CHECK(
        kernels::LaunchSumSquares(n, x, partials_, result_device_, stream_)));
    ASSIGN_OR_RETURN(kernels::ReductionResult result, ReadResult());
    return result.sum;
  }

  absl::StatusOr<bool> AllFinite(size_t n, const float* x) override {
    RETURN_IF_ERROR(Activate());
    RETURN_IF_ERROR(FERRY_CUDA_CHECK(
        kernels::LaunchFindNonFinite(n, x, result_device_, stream_)));
    ASSIGN_OR_RETURN(kernels::ReductionResult result, ReadResult());
    return result.count == 0;
  }

  LayerOps* FindLayerOps(const LayerOpsFamily& family) override {
    return layer_ops_.Find(family);
  }

  absl::Status DenseOptimizerUpdate(const DenseOptimizer& optimizer,
                                    const OptimizerStepParams& p,
                                    const DenseUpdateArgs& args) override {
    if (optimizer.cuda == nullptr) {
      // ferry_cuda does not link ferry_common (OptimizerKindName).
      return absl::UnimplementedError(
          absl::StrCat("optimizer kind ", static_cast<int>(optimizer.kind),
                       " has no CUDA update"));
    }
    RETURN_IF_ERROR(Activate());
    return FERRY_CUDA_CHECK(
        static_cast<cudaError_t>(optimizer.cuda(p, args, stream_)));
  }

 private:
  // Makes device_ current for the calling thread (a backend may move between
  // threads, and a fresh thread starts on device 0).
  absl::Status Activate() { return FERRY_CUDA_CHECK(cudaSetDevice(device_)); }

  // Copies the reduction result back and waits for the stream.
  absl::StatusOr<kernels::ReductionResult> ReadResult() {
    RETURN_IF_ERROR(FERRY_CUDA_CHECK(cudaMemcpyAsync(
        result_host_, result_device_, sizeof(kernels::ReductionResult),
        cudaMemcpyDeviceToHost, stream_)));
    RETURN_IF_ERROR(FERRY_CUDA_CHECK(cudaStreamSynchronize(stream_)));
    return *result_host_;
  }

  const int device_;
  std::string name_;
  cudaStream_t stream_ = nullptr;
  const CublasLibrary* lib_ = nullptr;  // set by Init() before cublas_
  cublasHandle_t cublas_ = nullptr;
  kernels::ReductionResult* result_device_ = nullptr;  // device
  kernels::ReductionResult* result_host_ = nullptr;    // pinned host
  double* partials_ = nullptr;  // kMaxReductionBlocks doubles, device
  Scratch labels_scratch_;
  Scratch row_loss_scratch_;
  Scratch row_correct_scratch_;
  Scratch copy_scratch_;
  LayerOpsSet layer_ops_;  // filled by Init()
};

}  // namespace

int CudaDeviceCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver or no device: not an error here
    return 0;
  }
  return count;
}

absl::StatusOr<std::unique_ptr<ComputeBackend>> MakeCudaBackend(int device) {
  const int count = CudaDeviceCount();
  if (device < 0 || device >= count) {
    return absl::UnavailableError(
        absl::StrCat("CUDA device ", device, " is not visible (", count,
                     " device", count == 1 ? "" : "s", " found)"));
  }
  auto backend = std::make_unique<CudaBackend>(device);
  if (absl::Status status = backend->Init(); !status.ok()) {
    return absl::UnavailableError(absl::StrCat("cannot initialize CUDA device ",
                                               device, ": ", status.message()));
  }
  return backend;
}

}  // namespace ferry
