// The CUDA backend's layer kernels next to the CPU backend's (the reference),
// on the same random inputs. Kept apart from cuda_backend_test.cc (the
// element-wise and optimizer kernels) to keep files small; same conventions:
// skips when the binary has no CUDA support or no device is visible.
//
// Tolerances: selections (im2col, max pooling, dropout masks) match exactly;
// sums (col2im, pooling averages, BatchNorm statistics) differ by summation
// order and fused multiply-adds.
#include "gtest/gtest.h"

#if FERRY_HAVE_CUDA

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "compute/batch_norm_ops.h"
#include "compute/compute_backend.h"
#include "compute/conv_ops.h"
#include "compute/cpu_backend.h"
#include "compute/cuda_entry.h"
#include "compute/dropout_ops.h"
#include "compute/kernel_math.h"
#include "compute/pool_ops.h"
#include "tests/compute/layer_ops_access.h"
#include "tests/testing/random_values.h"

namespace ferry {
namespace {

using testing::BatchNorm;
using testing::Conv;
using testing::Drop;
using testing::Pool;

std::vector<float> RandomVector(size_t n, uint32_t seed) {
  return testing::RandomValues(n, seed);
}

DeviceBuffer OrDie(absl::StatusOr<DeviceBuffer> b) {
  if (!b.ok()) {
    std::fprintf(stderr, "Allocate: %s\n", b.status().ToString().c_str());
    std::abort();
  }
  return *std::move(b);
}

struct Twin {
  DeviceBuffer cpu;
  DeviceBuffer gpu;
  float* c() { return cpu.data(); }
  float* g() { return gpu.data(); }
};

class CudaLayerKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device visible";
    cpu_ = MakeCpuBackend(1);
    auto cuda = MakeCudaBackend(0);
    ASSERT_TRUE(cuda.ok()) << cuda.status();
    cuda_ = *std::move(cuda);
  }

  Twin Upload(const std::vector<float>& host) {
    Twin t{OrDie(cpu_->Allocate(host.size())),
           OrDie(cuda_->Allocate(host.size()))};
    EXPECT_TRUE(cpu_->CopyToDevice(host.data(), host.size(), t.c()).ok());
    EXPECT_TRUE(cuda_->CopyToDevice(host.data(), host.size(), t.g()).ok());
    return t;
  }
  Twin Zeros(size_t n) { return Upload(std::vector<float>(n, 0.0f)); }

  // |gpu - cpu| <= atol + rtol * |cpu| everywhere.
  void ExpectClose(Twin& t, double rtol, double atol, const std::string& what) {
    std::vector<float> want(t.cpu.size()), got(t.gpu.size());
    ASSERT_TRUE(cpu_->CopyToHost(t.c(), want.size(), want.data()).ok());
    ASSERT_TRUE(cuda_->CopyToHost(t.g(), got.size(), got.data()).ok());
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const double diff = std::fabs(static_cast<double>(got[i]) - want[i]);
      if (!(diff <= atol + rtol * std::fabs(want[i])) && bad++ == 0) first = i;
    }
    EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << got.size()
                       << " differ; first at " << first << ": got "
                       << got[first] << ", want " << want[first];
  }

  std::unique_ptr<ComputeBackend> cpu_;
  std::unique_ptr<ComputeBackend> cuda_;
};

std::vector<WindowGeometry> Geometries() {
  std::vector<WindowGeometry> out;
  for (int k : {1, 2, 3}) {
    for (int s : {1, 2}) {
      for (int p : {0, 1}) {
        WindowGeometry g;
        g.channels = 3;
        g.height = 9;
        g.width = 7;
        g.kernel_h = k;
        g.kernel_w = k == 3 ? 2 : k;
        g.stride_h = s;
        g.stride_w = 3 - s;
        g.pad_h = g.pad_w = 2 * p <= g.kernel_w ? p : 0;
        out.push_back(g);
      }
    }
  }
  return out;
}

TEST_F(CudaLayerKernelsTest, Im2ColAndCol2Im) {
  uint32_t seed = 1;
  for (int n : {1, 3}) {
    for (const WindowGeometry& g : Geometries()) {
      const size_t in = static_cast<size_t>(g.channels) * g.height * g.width;
      const size_t cols = ColRows(g) * OutHeight(g) * OutWidth(g) * n;
      Twin x = Upload(RandomVector(in * n, ++seed));
      Twin c = Zeros(cols);
      ASSERT_TRUE(Conv(cpu_).Im2Col(g, n, x.c(), c.c()).ok());
      ASSERT_TRUE(Conv(cuda_).Im2Col(g, n, x.g(), c.g()).ok());
      ExpectClose(c, 0, 0, "im2col");
      Twin dc = Upload(RandomVector(cols, ++seed));
      Twin dx = Zeros(in * n);
      ASSERT_TRUE(Conv(cpu_).Col2Im(g, n, dc.c(), dx.c()).ok());
      ASSERT_TRUE(Conv(cuda_).Col2Im(g, n, dc.g(), dx.g()).ok());
      ExpectClose(dx, 1e-5, 1e-6, "col2im");
    }
  }
}

TEST_F(CudaLayerKernelsTest, SwapLeadingAxes) {
  const int d0 = 7, d1 = 13;
  const int64_t inner = 33;
  Twin x = Upload(RandomVector(d0 * d1 * inner, 9));
  Twin y = Zeros(d0 * d1 * inner);
  ASSERT_TRUE(Conv(cpu_).SwapLeadingAxes(d0, d1, inner, x.c(), y.c()).ok());
  ASSERT_TRUE(Conv(cuda_).SwapLeadingAxes(d0, d1, inner, x.g(), y.g()).ok());
  ExpectClose(y, 0, 0, "swap");
}

TEST_F(CudaLayerKernelsTest, ChannelBias) {
  const int n = 5, c = 7, s = 33;
  Twin x = Upload(RandomVector(n * c * s, 3));
  Twin b = Upload(RandomVector(c, 4));
  Twin db = Zeros(c);
  ASSERT_TRUE(Conv(cpu_).AddChannelBias(n, c, s, b.c(), x.c()).ok());
  ASSERT_TRUE(Conv(cuda_).AddChannelBias(n, c, s, b.g(), x.g()).ok());
  ExpectClose(x, 0, 0, "AddChannelBias");
  ASSERT_TRUE(Conv(cpu_).ChannelBiasGrad(n, c, s, x.c(), db.c()).ok());
  ASSERT_TRUE(Conv(cuda_).ChannelBiasGrad(n, c, s, x.g(), db.g()).ok());
  ExpectClose(db, 1e-5, 1e-5, "ChannelBiasGrad");
}

TEST_F(CudaLayerKernelsTest, Pooling) {
  const int n = 4;
  uint32_t seed = 20;
  for (const WindowGeometry& g : Geometries()) {
    const size_t in = n * static_cast<size_t>(g.channels) * g.height * g.width;
    const size_t out =
        n * static_cast<size_t>(g.channels) * OutHeight(g) * OutWidth(g);
    Twin x = Upload(RandomVector(in, ++seed));
    Twin dy = Upload(RandomVector(out, ++seed));
    Twin y = Zeros(out), dx = Zeros(in);
    ASSERT_TRUE(Pool(cpu_).MaxPoolForward(n, g, x.c(), y.c()).ok());
    ASSERT_TRUE(Pool(cuda_).MaxPoolForward(n, g, x.g(), y.g()).ok());
    ExpectClose(y, 0, 0, "MaxPoolForward");
    ASSERT_TRUE(Pool(cpu_).MaxPoolBackward(n, g, x.c(), dy.c(), dx.c()).ok());
    ASSERT_TRUE(Pool(cuda_).MaxPoolBackward(n, g, x.g(), dy.g(), dx.g()).ok());
    ExpectClose(dx, 1e-6, 1e-6, "MaxPoolBackward");
    ASSERT_TRUE(Pool(cpu_).AvgPoolForward(n, g, x.c(), y.c()).ok());
    ASSERT_TRUE(Pool(cuda_).AvgPoolForward(n, g, x.g(), y.g()).ok());
    ExpectClose(y, 1e-5, 1e-6, "AvgPoolForward");
    ASSERT_TRUE(Pool(cpu_).AvgPoolBackward(n, g, dy.c(), dx.c()).ok());
    ASSERT_TRUE(Pool(cuda_).AvgPoolBackward(n, g, dy.g(), dx.g()).ok());
    ExpectClose(dx, 1e-5, 1e-6, "AvgPoolBackward");
  }
}

TEST_F(CudaLayerKernelsTest, DropoutMasksAreIdentical) {
  const int rows = 13;
  const int64_t size = 1001;
  DropoutKey key;
  key.seed = 123;
  key.step = 45;
  key.first_sample = 67;
  key.layer = 8;
  key.p = 0.3f;
  Twin x = Upload(RandomVector(rows * size, 5));
  Twin y = Zeros(rows * size);
  ASSERT_TRUE(Drop(cpu_).Dropout(rows, size, key, x.c(), y.c()).ok());
  ASSERT_TRUE(Drop(cuda_).Dropout(rows, size, key, x.g(), y.g()).ok());
  ExpectClose(y, 1e-7, 0, "Dropout");
}

TEST_F(CudaLayerKernelsTest, BatchNorm) {
  for (int spatial : {1, 50}) {
    BatchNormShape s;
    s.n = 16;
    s.channels = 5;
    s.spatial = spatial;
    s.eps = 1e-5f;
    s.momentum = 0.1f;
    const size_t total = static_cast<size_t>(s.n) * s.channels * s.spatial;
    Twin x = Upload(RandomVector(total, 6));
    Twin gamma = Upload(RandomVector(s.channels, 7));
    Twin beta = Upload(RandomVector(s.channels, 8));
    Twin rm = Upload(std::vector<float>(s.channels, 0.2f));
    Twin rv = Upload(std::vector<float>(s.channels, 1.5f));
    Twin tracked = Upload({3.0f});
    Twin mean = Zeros(s.channels), invstd = Zeros(s.channels), y = Zeros(total);
    ASSERT_TRUE(BatchNorm(cpu_)
                    .BatchNormForwardTrain(s, x.c(), gamma.c(), beta.c(),
                                           rm.c(), rv.c(), tracked.c(),
                                           mean.c(), invstd.c(), y.c())
                    .ok());
    ASSERT_TRUE(BatchNorm(cuda_)
                    .BatchNormForwardTrain(s, x.g(), gamma.g(), beta.g(),
                                           rm.g(), rv.g(), tracked.g(),
                                           mean.g(), invstd.g(), y.g())
                    .ok());
    ExpectClose(y, 1e-5, 1e-5, "BatchNormForwardTrain y");
    ExpectClose(mean, 1e-5, 1e-6, "save_mean");
    ExpectClose(invstd, 1e-5, 1e-6, "save_invstd");
    ExpectClose(rm, 1e-5, 1e-6, "running_mean");
    ExpectClose(rv, 1e-5, 1e-6, "running_var");
    ExpectClose(tracked, 0, 0, "num_batches_tracked");
    Twin dy = Upload(RandomVector(total, 9));
    Twin dx = Zeros(total), dg = Zeros(s.channels), db = Zeros(s.channels);
    ASSERT_TRUE(BatchNorm(cpu_)
                    .BatchNormBackward(s, x.c(), dy.c(), gamma.c(), mean.c(),
                                       invstd.c(), dx.c(), dg.c(), db.c())
                    .ok());
    ASSERT_TRUE(BatchNorm(cuda_)
                    .BatchNormBackward(s, x.g(), dy.g(), gamma.g(), mean.g(),
                                       invstd.g(), dx.g(), dg.g(), db.g())
                    .ok());
    ExpectClose(dx, 1e-4, 1e-5, "BatchNormBackward dx");
    ExpectClose(dg, 1e-4, 1e-5, "dgamma");
    ExpectClose(db, 1e-4, 1e-5, "dbeta");
    ASSERT_TRUE(BatchNorm(cpu_)
                    .BatchNormForwardEval(s, x.c(), gamma.c(), beta.c(), rm.c(),
                                          rv.c(), y.c())
                    .ok());
    ASSERT_TRUE(BatchNorm(cuda_)
                    .BatchNormForwardEval(s, x.g(), gamma.g(), beta.g(), rm.g(),
                                          rv.g(), y.g())
                    .ok());
    ExpectClose(y, 1e-5, 1e-5, "BatchNormForwardEval");
  }
}

}  // namespace
}  // namespace ferry

#else  // !FERRY_HAVE_CUDA

TEST(CudaLayerKernelsTest, NotBuiltWithCuda) {
  GTEST_SKIP() << "built without CUDA";
}

#endif  // FERRY_HAVE_CUDA
