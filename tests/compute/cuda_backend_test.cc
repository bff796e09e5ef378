// Runs every kernel of the CUDA backend next to the CPU backend (the reference)
// on the same random inputs and compares the results within fp32 tolerance.
// Skips when the binary has no CUDA support or no device is visible.
//
// Tolerances: selections and single roundings (Fill, Relu, AddBias, Scale)
// must match exactly; nvcc fuses multiply-adds where g++ does not, so the
// update kernels may differ by a few ulps; sums differ by summation order.
#include "gtest/gtest.h"

#if FERRY_HAVE_CUDA

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compute/compute_backend.h"
#include "compute/cpu_backend.h"
#include "compute/cuda_entry.h"
#include "compute/dense_optimizers.h"

namespace ferry {
namespace {

constexpr size_t kSizes[] = {1, 7, 1000, 4099};

std::vector<float> RandomVector(size_t n, uint32_t seed, float lo = -1.0f,
                                float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

template <typename T>
T OrDie(absl::StatusOr<T> value, const char* what) {
  if (!value.ok()) {
    std::fprintf(stderr, "%s: %s\n", what, value.status().ToString().c_str());
    std::abort();
  }
  return *std::move(value);
}

// |got - want| <= atol + rtol * |want| for every element.
void ExpectClose(const std::vector<float>& got, const std::vector<float>& want,
                 double rtol, double atol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  size_t bad = 0;
  size_t first = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double diff = std::fabs(static_cast<double>(got[i]) - want[i]);
    if (!(diff <= atol + rtol * std::fabs(want[i]))) {
      if (bad++ == 0) first = i;
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size()
                     << " elements differ; first at " << first << ": got "
                     << got[first] << ", want " << want[first];
}

// The same data on both backends.
struct Twin {
  DeviceBuffer cpu;
  DeviceBuffer gpu;
};

class CudaBackendTest : public ::testing::Test {
 protected:
  void SetUpBackends() {
    cpu_ = MakeCpuBackend(1);
    absl::StatusOr<std::unique_ptr<ComputeBackend>> cuda = MakeCudaBackend(0);
    ASSERT_TRUE(cuda.ok()) << cuda.status();
    cuda_ = *std::move(cuda);
  }

  Twin Upload(const std::vector<float>& host) {
    Twin t{OrDie(cpu_->Allocate(host.size()), "cpu Allocate"),
           OrDie(cuda_->Allocate(host.size()), "cuda Allocate")};
    EXPECT_TRUE(
        cpu_->CopyToDevice(host.data(), host.size(), t.cpu.data()).ok());
    EXPECT_TRUE(
        cuda_->CopyToDevice(host.data(), host.size(), t.gpu.data()).ok());
    return t;
  }

  std::vector<float> Download(ComputeBackend& backend, const DeviceBuffer& b) {
    std::vector<float> host(b.size());
    absl::Status status = backend.CopyToHost(b.data(), b.size(), host.data());
    EXPECT_TRUE(status.ok()) << status;
    return host;
  }

  // Expects both copies of `t` to agree.
  void ExpectTwinClose(const Twin& t, double rtol, double atol,
                       const std::string& what) {
    ExpectClose(Download(*cuda_, t.gpu), Download(*cpu_, t.cpu), rtol, atol,
                what);
  }

  std::unique_ptr<ComputeBackend> cpu_;
  std::unique_ptr<ComputeBackend> cuda_;
};

TEST_F(CudaBackendTest, Identity) {
  if (!ferry::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device visible";
  ASSERT_NO_FATAL_FAILURE(SetUpBackends());
  EXPECT_EQ(cuda_->Kind(), "cuda");
  EXPECT_FALSE(cuda_->IsHostMemory());
  EXPECT_EQ(cuda_->Name().rfind("cuda:0 ", 0), 0u) << cuda_->Name();
  EXPECT_GT(cuda_->Name().size(), 7u);
}

TEST_F(CudaBackendTest, MissingDeviceIsUnavailable) {
  if (!ferry::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device visible";
  EXPECT_EQ(MakeCudaBackend(CudaDeviceCount()).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(MakeCudaBackend(-1).status().code(),
            absl::StatusCode::kUnavailable);
}

TEST_F(CudaBackendTest, AllocationsAreZeroed) {
  if (!ferry::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device visible";
  ASSERT_NO_FATAL_FAILURE(SetUpBackends());
  for (size_t n : kSizes) {
    DeviceBuffer device = OrDie(cuda_->Allocate(n), "Allocate");
    EXPECT_EQ(device.size(), n);
    EXPECT_EQ(Download(*cuda_, device), std::vector<float>(n, 0.0f));
    DeviceBuffer host = OrDie(cuda_->AllocateHost(n), "AllocateHost");
    ASSERT_EQ(host.size(), n);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(host.data()[i], 0.0f) << i;
    host.data()[n - 1] = 1.0f;  // directly addressable
  }
  EXPECT_TRUE(OrDie(cuda_->Allocate(0), "Allocate(0)").empty());
  EXPECT_TRUE(OrDie(cuda_->AllocateHost(0), "AllocateHost(0)").empty());
}

TEST_F(CudaBackendTest, CopiesRoundTrip) {
  if (!ferry::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device visible";
  ASSERT_NO_FATAL_FAILURE(SetUpBackends());
  for (size_t n : kSizes) {
    const std::vector<float> data = RandomVector(n, 1);
    // Through pinned memory.
    DeviceBuffer pinned = OrDie(cuda_->AllocateHost(n), "AllocateHost");
    std::copy(data.begin(), data.end(), pinned.data());
    DeviceBuffer a = OrDie(cuda_->Allocate(n), "Allocate");
    ASSERT_TRUE(cuda_->CopyToDevice(pinned.data(), n, a.data()).ok());
    DeviceBuffer back = OrDie(cuda_->AllocateHost(n), "AllocateHost");
    ASSERT_TRUE(cuda_->CopyToHost(a.data(), n, back.data()).ok());
    EXPECT_EQ(std::vector<float>(back.data(), back.data() + n), data);
    // Device to device.
    DeviceBuffer b = OrDie(cuda_->Allocate(n), "Allocate");
    ASSERT_TRUE(cuda_->Copy(a.data(), n, b.data()).ok());
    EXPECT_EQ(Download(*cuda_, b), data);
  }
}

TEST_F(CudaBackendTest, OverlappingCopyActsLikeMemmove) {
  if (!ferry::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device visible";
  ASSERT_NO_FATAL_FAILURE(SetUpBackends());
  const size_t n = 4099;
  for (size_t shift : {size_t{1}, size_t{3}, size_t{1000}}) {
    Twin t = Upload(RandomVector(n, 2));
    const size_t len = n - shift;
    ASSERT_TRUE(cpu_->Copy(t.cpu.data(), len, t.cpu.data() + shift).ok());
    ASSERT_TRUE(cuda_->Copy(t.gpu.data(), len, t.gpu.data() + shift).ok());
    ExpectTwinClose(t, 0, 0, absl::StrCat("forward shift ", shift));
    ASSERT_TRUE(cpu_->Copy(t.cpu.data() + shift, len, t.cpu.data()).ok());
    ASSERT_TRUE(cuda_->Copy(t.gpu.data() + shift, len, t.gpu.data()).ok());
    ExpectTwinClose(t, 0, 0, absl::StrCat("backward shift ", shift));
  }
}

TEST_F(CudaBackendTest, Fill) {
  if (!ferry::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device visible";
  ASSERT_NO_FATAL_FAILURE(SetUpBackends());
  for (size_t n : kSizes) {
    DeviceBuffer x = OrDie(cuda_->Allocate(n), "Allocate");
    ASSERT_TRUE(cuda_->Fill(-2.5f, n, x.data()).ok());
    EXPECT_EQ(Download(*cuda_, x), std::vector<float>(n, -2.5f));
  }
}

struct GemmShape {
  int m, n, k;
};

TEST_F(CudaBackendTest, GemmMatchesCpu) {
  if (!ferry::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device visible";
  ASSERT_NO_FATAL_FAILURE(SetUpBackends());
  const GemmShape shapes[] = {
      {33, 17, 65}, {1, 1, 1}, {7, 1000, 3}, {64, 3, 4099}, {5, 33, 1}};
  uint32_t seed = 10;
  for (const GemmShape& s : shapes) {
    for (Transpose ta : {Transpose::kNo, Transpose::kYes}) {
      for (Transpose tb : {Transpose::kNo, Transpose::kYes}) {
        for (int pad : {0, 3}) {
          const float beta = pad == 0 ? 0.5f : 0.0f;
          const int a_rows = ta == Transpose::kNo ? s.m : s.k;
          const int a_cols = ta == Transpose::kNo ? s.k : s.m;
          const int b_rows = tb == Transpose::kNo ? s.k : s.n;
          const int b_cols = tb == Transpose::kNo ? s.n : s.k;
          const int lda = a_cols + pad, ldb = b_cols + 2 * pad;
          const int ldc = s.n + pad;
          Twin a =
              Upload(RandomVector(static_cast<size_t>(a_rows) * lda, ++seed));
          Twin b =
              Upload(RandomVector(static_cast<size_t>(b_rows) * ldb, ++seed));
          Twin c = Upload(RandomVector(static_cast<size_t>(s.m) * ldc, ++seed));
          const std::string what = absl::StrCat(
              "m=", s.m, " n=", s.n, " k=", s.k, " ta=", ta == Transpose::kYes,
              " tb=", tb == Transpose::kYes, " pad=", pad);
          ASSERT_TRUE(cpu_->Gemm(ta, tb, s.m, s.n, s.k, 0.75f, a.cpu.data(),
                                 lda, b.cpu.data(), ldb, beta, c.cpu.data(),
                                 ldc)
                          .ok());
          absl::Status status =
              cuda_->Gemm(ta, tb, s.m, s.n, s.k, 0.75f, a.gpu.data(), lda,
                          b.gpu.data(), ldb, beta, c.gpu.data(), ldc);
          ASSERT_TRUE(status.ok()) << what << ": " << status;
          // Entries are sums of k products of [-1, 1] values: scale the
          // absolute tolerance with their natural size sqrt(k).
          ExpectTwinClose(c, 1e-4, 1e-4 * std::sqrt(static_cast<double>(s.k)),
                          what);
        }
      }
    }
  }
}

TEST_F(CudaBackendTest, GemmEdgeCases) {
  if (!ferry::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device visible";
  ASSERT_NO_FATAL_FAILURE(SetUpBackends());
  // k == 0: C = beta * C.
  Twin c = Upload(RandomVector(5 * 3, 20));
  Twin dummy = Upload(RandomVector(1, 21));
  ASSERT_TRUE(cpu_->Gemm(Transpose::kNo, Transpose::kNo, 5, 3, 0, 1.0f,
                         dummy.cpu.data(), 1, dummy.cpu.data(), 3, 0.5f,
                         c.cpu.data(), 3)
                  .ok());
  ASSERT_TRUE(cuda_
                  ->Gemm(Transpose::kNo, Transpose::kNo, 5, 3, 0, 1.0f,
                         dummy.gpu.data(), 1, dummy.gpu.data(), 3, 0.5f,
                         c.gpu.data(), 3)
                  .ok());
  ExpectTwinClose(c, 0, 0, "k=0");
  // m == 0 or n == 0: nothing to do.
  EXPECT_TRUE(cuda_
                  ->Gemm(Transpose::kNo, Transpose::kNo, 0, 3, 4, 1.0f, nullptr,
                         4, nullptr, 3, 0.0f, nullptr, 3)
                  .ok());
  EXPECT_EQ(cuda_
                ->Gemm(Transpose::kNo, Transpose::kNo, -1, 3, 4, 1.0f, nullptr,
                       4, nullptr, 3, 0.0f, nullptr, 3)
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(cuda_
                ->Gemm(Transpose::kNo, Transpose::kNo, 2, 3, 4, 1.0f,
                       dummy.gpu.data(), 3, dummy.gpu.data(), 3, 0.0f,
                       c.gpu.data(), 3)
                .code(),
            absl::StatusCode::kInvalidArgument);  // lda 3 < k 4
  EXPECT_TRUE(cuda_->Synchronize().ok());
}

TEST_F(CudaBackendTest, BiasKernels) {
  if (!ferry::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device visible";
  ASSERT_NO_FATAL_FAILURE(SetUpBackends());
  const std::pair<int, int> shapes[] = {{1, 1},     {7, 13},   {1000, 10},
                                        {33, 4099}, {4099, 3}, {0, 5}};
  uint32_t seed = 30;
  for (auto [rows, cols] : shapes) {
    const std::string what = absl::StrCat("rows=", rows, " cols=", cols);
    const size_t n = static_cast<size_t>(rows) * cols;
    Twin x = Upload(RandomVector(n, ++seed));
    Twin bias = Upload(RandomVector(cols, ++seed));
    ASSERT_TRUE(cpu_->AddBias(rows, cols, bias.cpu.data(), x.cpu.data()).ok());
    ASSERT_TRUE(cuda_->AddBias(rows, cols, bias.gpu.data(), x.gpu.data()).ok());
    ExpectTwinClose(x, 0, 0, "AddBias " + what);
    // BiasGrad overwrites whatever dbias held.
    Twin dbias = Upload(RandomVector(cols, ++seed, 5.0f, 6.0f));
    ASSERT_TRUE(
        cpu_->BiasGrad(rows, cols, x.cpu.data(), dbias.cpu.data()).ok());
    ASSERT_TRUE(
        cuda_->BiasGrad(rows, cols, x.gpu.data(), dbias.gpu.data()).ok());
    // The CPU sums in float; allow for its rounding error over `rows` terms.
    ExpectTwinClose(dbias, 1e-5, 1e-6 * (rows + 1), "BiasGrad " + what);
  }
}

TEST_F(CudaBackendTest, Relu) {
  if (!ferry::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device visible";
  ASSERT_NO_FATAL_FAILURE(SetUpBackends());
  uint32_t seed = 40;
  for (size_t n : kSizes) {
    std::vector<float> input = RandomVector(n, ++seed);
    input[0] = 0.0f;
    if (n > 1) input[1] = -0.0f;
    Twin x = Upload(input);
    Twin y = Upload(std::vector<float>(n, 9.0f));
    ASSERT_TRUE(cpu_->Relu(n, x.cpu.data(), y.cpu.data()).ok());
    ASSERT_TRUE(cuda_->Relu(n, x.gpu.data(), y.gpu.data()).ok());
    ExpectTwinClose(y, 0, 0, absl::StrCat("Relu n=", n));
    // dx aliases dy.
    Twin dy = Upload(RandomVector(n, ++seed));
    ASSERT_TRUE(
        cpu_->ReluBackward(n, y.cpu.data(), dy.cpu.data(), dy.cpu.data()).ok());
    ASSERT_TRUE(
        cuda_->ReluBackward(n, y.gpu.data(), dy.gpu.data(), dy.gpu.data())
            .ok());
    ExpectTwinClose(dy, 0, 0, absl::StrCat("ReluBackward n=", n));
    // In place: y aliases x.
    ASSERT_TRUE(cpu_->Relu(n, x.cpu.data(), x.cpu.data()).ok());
    ASSERT_TRUE(cuda_->Relu(n, x.gpu.data(), x.gpu.data()).ok());
    ExpectTwinClose(x, 0, 0, absl::StrCat("Relu in place n=", n));
  }
}

std::vector<int32_t> RandomLabels(int rows, int cols, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int32_t> dist(0, cols - 1);
  std::vector<int32_t> labels(rows);
  for (int32_t& l : labels) l = dist(gen);
  return labels;
}

TEST_F(CudaBackendTest, SoftmaxCrossEntropy) {
  if (!ferry::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device visible";
  ASSERT_NO_FATAL_FAILURE(SetUpBackends());
  const std::pair<int, int> shapes[] = {{1, 1},     {7, 10}, {1000, 10},
                                        {33, 4099}, {5, 1},  {0, 10}};
  uint32_t seed = 50;
  for (auto [rows, cols] : shapes) {
    for (float range : {5.0f, 80.0f}) {  // 80: exp() would overflow unshifted
      const std::string what =
          absl::StrCat("rows=", rows, " cols=", cols, " range=", range);
      const size_t n = static_cast<size_t>(rows) * cols;
      Twin logits = Upload(RandomVector(n, ++seed, -range, range));
      Twin dlogits = Upload(std::vector<float>(n, 7.0f));
      const std::vector<int32_t> labels = RandomLabels(rows, cols, ++seed);
      const float scale = rows > 0 ? 1.0f / rows : 1.0f;
      for (bool with_grad : {false, true}) {
        LossStats want =
            OrDie(cpu_->SoftmaxCrossEntropy(
                      rows, cols, logits.cpu.data(), labels.data(), scale,
                      with_grad ? dlogits.cpu.data() : nullptr),
                  "cpu SoftmaxCrossEntropy");
        LossStats got =
            OrDie(cuda_->SoftmaxCrossEntropy(
                      rows, cols, logits.gpu.data(), labels.data(), scale,
                      with_grad ? dlogits.gpu.data() : nullptr),
                  "cuda SoftmaxCrossEntropy");
        EXPECT_NEAR(got.loss_sum, want.loss_sum,
                    1e-7 * std::max(1.0, std::fabs(want.loss_sum)))
            << what;
        EXPECT_EQ(got.correct, want.correct) << what;
        ExpectTwinClose(dlogits, 1e-6, 1e-7 * scale,
                        absl::StrCat(what, " with_grad=", with_grad));
      }
    }
  }
}

TEST_F(CudaBackendTest, SoftmaxCrossEntropyInPlace) {
  if (!ferry::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device visible";
  ASSERT_NO_FATAL_FAILURE(SetUpBackends());
  for (auto [rows, cols] : {std::pair{7, 10}, std::pair{33, 4099}}) {
    Twin logits = Upload(RandomVector(static_cast<size_t>(rows) * cols, 55));
    const std::vector<int32_t> labels = RandomLabels(rows, cols, 56);
    LossStats want =
        OrDie(cpu_->SoftmaxCrossEntropy(rows, cols, logits.cpu.data(),
                                        labels.data(), 0.5f, logits.cpu.data()),
              "cpu SoftmaxCrossEntropy");
    LossStats got = OrDie(
        cuda_->SoftmaxCrossEntropy(rows, cols, logits.gpu.data(), labels.data(),
                                   0.5f, logits.gpu.data()),
        "cuda SoftmaxCrossEntropy");
    EXPECT_NEAR(got.loss_sum, want.loss_sum, 1e-7 * want.loss_sum);
    EXPECT_EQ(got.correct, want.correct);
    ExpectTwinClose(logits, 1e-6, 1e-7, absl::StrCat("in place cols=", cols));
  }
}

TEST_F(CudaBackendTest, SoftmaxCrossEntropyRejectsBadLabels) {
  if (!ferry::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device visible";
  ASSERT_NO_FATAL_FAILURE(SetUpBackends());
  const int rows = 7, cols = 10;
  Twin logits = Upload(RandomVector(rows * cols, 60));
  Twin dlogits = Upload(std::vector<float>(rows * cols, 7.0f));
  for (int32_t bad : {-1, cols}) {
    std::vector<int32_t> labels = RandomLabels(rows, cols, 61);
    labels[rows - 1] = bad;
    EXPECT_EQ(cuda_
                  ->SoftmaxCrossEntropy(rows, cols, logits.gpu.data(),
                                        labels.data(), 1.0f, dlogits.gpu.data())
                  .status()
                  .code(),
              absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(Download(*cuda_, dlogits.gpu),
              std::vector<float>(rows * cols, 7.0f));
  }
}

TEST_F(CudaBackendTest, AxpyAndScale) {
  if (!ferry::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device visible";
  ASSERT_NO_FATAL_FAILURE(SetUpBackends());
  uint32_t seed = 70;
  for (size_t n : kSizes) {
    Twin x = Upload(RandomVector(n, ++seed));
    Twin y = Upload(RandomVector(n, ++seed));
    ASSERT_TRUE(cpu_->Axpy(n, -0.3f, x.cpu.data(), y.cpu.data()).ok());
    ASSERT_TRUE(cuda_->Axpy(n, -0.3f, x.gpu.data(), y.gpu.data()).ok());
    ExpectTwinClose(y, 1e-6, 1e-7, absl::StrCat("Axpy n=", n));
    ASSERT_TRUE(cpu_->Scale(n, 1.7f, y.cpu.data()).ok());
    ASSERT_TRUE(cuda_->Scale(n, 1.7f, y.gpu.data()).ok());
    ExpectTwinClose(y, 1e-6, 1e-7, absl::StrCat("Scale n=", n));
  }
}

TEST_F(CudaBackendTest, SumSquares) {
  if (!ferry::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device visible";
  ASSERT_NO_FATAL_FAILURE(SetUpBackends());
  uint32_t seed = 80;
  for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{1000}, size_t{4099},
                   (size_t{1} << 20) + 3}) {
    Twin x = Upload(RandomVector(n, ++seed, -3.0f, 3.0f));
    const double want = OrDie(cpu_->SumSquares(n, x.cpu.data()), "cpu");
    const double got = OrDie(cuda_->SumSquares(n, x.gpu.data()), "cuda");
    EXPECT_NEAR(got, want, 1e-10 * std::max(1.0, want)) << "n=" << n;
  }
}

TEST_F(CudaBackendTest, AllFinite) {
  if (!ferry::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device visible";
  ASSERT_NO_FATAL_FAILURE(SetUpBackends());
  EXPECT_TRUE(OrDie(cuda_->AllFinite(0, nullptr), "AllFinite(0)"));
  const float kBad[] = {std::numeric_limits<float>::quiet_NaN(),
                        std::numeric_limits<float>::infinity(),
                        -std::numeric_limits<float>::infinity()};
  uint32_t seed = 90;
  for (size_t n : kSizes) {
    std::vector<float> data = RandomVector(n, ++seed, -1e30f, 1e30f);
    Twin x = Upload(data);
    EXPECT_TRUE(OrDie(cuda_->AllFinite(n, x.gpu.data()), "cuda")) << n;
    for (size_t at : {size_t{0}, n / 2, n - 1}) {
      for (float bad : kBad) {
        std::vector<float> poisoned = data;
        poisoned[at] = bad;
        Twin y = Upload(poisoned);
        EXPECT_FALSE(OrDie(cpu_->AllFinite(n, y.cpu.data()), "cpu"));
        EXPECT_FALSE(OrDie(cuda_->AllFinite(n, y.gpu.data()), "cuda"))
            << "n=" << n << " at=" << at << " value=" << bad;
      }
    }
  }
}

// One registered dense optimizer update (compute/dense_optimizers.h).
absl::Status Update(ComputeBackend& backend, OptimizerKind kind,
                    const OptimizerStepParams& p, size_t n, const float* grad,
                    float* state0, float* state1, float* param) {
  DenseUpdateArgs args;
  args.n = n;
  args.grad = grad;
  args.state[0] = state0;
  args.state[1] = state1;
  args.param = param;
  return RunDenseUpdate(backend, **FindDenseOptimizer(kind), p, args);
}

TEST_F(CudaBackendTest, SgdAndMomentumUpdates) {
  if (!ferry::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device visible";
  ASSERT_NO_FATAL_FAILURE(SetUpBackends());
  uint32_t seed = 100;
  for (size_t n : kSizes) {
    for (float wd : {0.0f, 0.01f}) {
      OptimizerStepParams p;
      p.lr = 0.05f;
      p.weight_decay = wd;
      Twin param = Upload(RandomVector(n, ++seed));
      Twin grad = Upload(RandomVector(n, ++seed));
      ASSERT_TRUE(Update(*cpu_, OptimizerKind::kSgd, p, n, grad.cpu.data(),
                         nullptr, nullptr, param.cpu.data())
                      .ok());
      ASSERT_TRUE(Update(*cuda_, OptimizerKind::kSgd, p, n, grad.gpu.data(),
                         nullptr, nullptr, param.gpu.data())
                      .ok());
      ExpectTwinClose(param, 1e-6, 1e-7, absl::StrCat("Sgd n=", n, " wd=", wd));
      for (bool nesterov : {false, true}) {
        p.nesterov = nesterov;
        const std::string what =
            absl::StrCat("Momentum n=", n, " wd=", wd, " nesterov=", nesterov);
        Twin velocity = Upload(std::vector<float>(n, 0.0f));
        for (int step = 0; step < 3; ++step) {
          Twin g = Upload(RandomVector(n, ++seed));
          ASSERT_TRUE(Update(*cpu_, OptimizerKind::kMomentum, p, n,
                             g.cpu.data(), velocity.cpu.data(), nullptr,
                             param.cpu.data())
                          .ok());
          ASSERT_TRUE(Update(*cuda_, OptimizerKind::kMomentum, p, n,
                             g.gpu.data(), velocity.gpu.data(), nullptr,
                             param.gpu.data())
                          .ok());
        }
        ExpectTwinClose(velocity, 1e-5, 2e-6, what + " velocity");
        ExpectTwinClose(param, 1e-5, 2e-6, what + " param");
      }
    }
  }
}

TEST_F(CudaBackendTest, AdamStepsAgree) {
  if (!ferry::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device visible";
  ASSERT_NO_FATAL_FAILURE(SetUpBackends());
  uint32_t seed = 200;
  for (size_t n : kSizes) {
    for (bool decoupled : {false, true}) {
      const std::string what = absl::StrCat("n=", n, " decoupled=", decoupled);
      OptimizerStepParams p;
      p.lr = 1e-3f;
      p.weight_decay = 0.01f;
      Twin param = Upload(RandomVector(n, ++seed));
      Twin m = Upload(std::vector<float>(n, 0.0f));
      Twin v = Upload(std::vector<float>(n, 0.0f));
      for (int64_t step = 1; step <= 10; ++step) {
        p.step = step;
        Twin g = Upload(RandomVector(n, ++seed));
        const OptimizerKind kind =
            decoupled ? OptimizerKind::kAdamW : OptimizerKind::kAdam;
        ASSERT_TRUE(Update(*cpu_, kind, p, n, g.cpu.data(), m.cpu.data(),
                           v.cpu.data(), param.cpu.data())
                        .ok());
        ASSERT_TRUE(Update(*cuda_, kind, p, n, g.gpu.data(), m.gpu.data(),
                           v.gpu.data(), param.gpu.data())
                        .ok());
      }
      ExpectTwinClose(m, 1e-5, 1e-6, what + " m");
      ExpectTwinClose(v, 1e-5, 1e-7, what + " v");
      ExpectTwinClose(param, 1e-5, 1e-6, what + " param");
    }
  }
}

}  // namespace
}  // namespace ferry

#else  // !FERRY_HAVE_CUDA

TEST(CudaBackendTest, NotBuiltWithCuda) {
  GTEST_SKIP() << "built without CUDA";
}

#endif  // FERRY_HAVE_CUDA
