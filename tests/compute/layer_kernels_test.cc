// The layer kernels of the CPU backend against the FERRY_HD element functions
// of kernel_math.h (which the CUDA kernels run) and against naive references.
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "compute/batch_norm_ops.h"
#include "compute/compute_backend.h"
#include "compute/conv_ops.h"
#include "compute/cpu_backend.h"
#include "compute/dropout_ops.h"
#include "compute/kernel_math.h"
#include "compute/pool_ops.h"
#include "gtest/gtest.h"
#include "tests/compute/layer_ops_access.h"
#include "tests/testing/random_values.h"

namespace ferry {
namespace {

using testing::BatchNorm;
using testing::Conv;
using testing::Drop;
using testing::Pool;

std::vector<float> Random(size_t n, uint32_t seed) {
  return testing::RandomValues(n, seed);
}

double Dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

std::vector<WindowGeometry> Geometries() {
  std::vector<WindowGeometry> out;
  for (int k = 1; k <= 3; ++k) {
    for (int s = 1; s <= 2; ++s) {
      for (int p = 0; p <= 1; ++p) {
        for (int h : {1, 4, 7}) {
          WindowGeometry g;
          g.channels = 2;
          g.height = h;
          g.width = h + 1;
          g.kernel_h = k;
          g.kernel_w = k == 3 ? 2 : k;
          g.stride_h = s;
          g.stride_w = 3 - s;
          g.pad_h = p;
          g.pad_w = p;
          if (OutHeight(g) > 0 && OutWidth(g) > 0) out.push_back(g);
        }
      }
    }
  }
  return out;
}

TEST(KernelMath, WindowsCoveringMatchesBruteForce) {
  for (int in = 1; in <= 9; ++in) {
    for (int k = 1; k <= 4; ++k) {
      for (int s = 1; s <= 3; ++s) {
        for (int p = 0; p <= 2; ++p) {
          const int out = WindowOutSize(in, k, s, p);
          for (int i = 0; i < in; ++i) {
            int lo, hi;
            WindowsCovering(i, k, s, p, out, &lo, &hi);
            std::vector<int> want, got;
            for (int o = 0; o < out; ++o) {
              const int start = WindowInputCoord(o, 0, s, p);
              if (start <= i && i < start + k) want.push_back(o);
            }
            for (int o = lo; o < hi; ++o) got.push_back(o);
            EXPECT_EQ(got, want)
                << in << " " << k << " " << s << " " << p << " i=" << i;
          }
        }
      }
    }
  }
  EXPECT_EQ(WindowOutSize(28, 3, 1, 0), 26);
  EXPECT_EQ(WindowOutSize(24, 2, 2, 0), 12);
  EXPECT_EQ(WindowOutSize(2, 3, 1, 0), 0);
}

// For 1 to 3 samples side by side (the Conv2d layer's groups): every cols
// element is the input element Im2ColSource names, every dx element is
// Col2ImGather's sum, and col2im is im2col's adjoint.
TEST(LayerKernels, Im2ColAndCol2ImMatchTheElementFunctionsAndAreAdjoint) {
  auto backend = MakeCpuBackend(1);
  for (int n = 1; n <= 3; ++n) {
    for (const WindowGeometry& g : Geometries()) {
      const size_t in = static_cast<size_t>(g.channels) * g.height * g.width;
      const int64_t columns =
          static_cast<int64_t>(OutHeight(g)) * OutWidth(g) * n;
      const size_t cols_n = ColRows(g) * columns;
      const std::vector<float> x = Random(in * n, 1);
      std::vector<float> cols(cols_n, 7.0f);
      ASSERT_TRUE(Conv(backend).Im2Col(g, n, x.data(), cols.data()).ok());
      for (int64_t r = 0; r < ColRows(g); ++r) {
        for (int64_t c = 0; c < columns; ++c) {
          const int64_t src = Im2ColSource(g, r, c);
          ASSERT_LT(src, static_cast<int64_t>(x.size()));
          ASSERT_EQ(cols[r * columns + c], src < 0 ? 0.0f : x[src]);
        }
      }
      const std::vector<float> dcols = Random(cols_n, 2);
      std::vector<float> dx(in * n, 7.0f);
      ASSERT_TRUE(Conv(backend).Col2Im(g, n, dcols.data(), dx.data()).ok());
      for (int i = 0; i < n; ++i) {
        for (int c = 0; c < g.channels; ++c) {
          for (int h = 0; h < g.height; ++h) {
            for (int w = 0; w < g.width; ++w) {
              EXPECT_NEAR(dx[i * in + (c * g.height + h) * g.width + w],
                          Col2ImGather(g, dcols.data(), n, i, c, h, w), 1e-6);
            }
          }
        }
      }
      EXPECT_NEAR(Dot(cols, dcols), Dot(x, dx), 1e-4);  // <Ax, y> == <x, A'y>
    }
  }
}

// Sample i's block of a batched im2col is the one-sample im2col of sample i.
TEST(LayerKernels, BatchedIm2ColHoldsEachSamplesOwnMatrix) {
  auto backend = MakeCpuBackend(1);
  const int n = 3;
  for (const WindowGeometry& g : Geometries()) {
    const size_t in = static_cast<size_t>(g.channels) * g.height * g.width;
    const int64_t ohw = static_cast<int64_t>(OutHeight(g)) * OutWidth(g);
    const std::vector<float> x = Random(in * n, 3);
    std::vector<float> all(ColRows(g) * ohw * n), one(ColRows(g) * ohw);
    ASSERT_TRUE(Conv(backend).Im2Col(g, n, x.data(), all.data()).ok());
    for (int i = 0; i < n; ++i) {
      ASSERT_TRUE(
          Conv(backend).Im2Col(g, 1, x.data() + i * in, one.data()).ok());
      for (int64_t r = 0; r < ColRows(g); ++r) {
        for (int64_t c = 0; c < ohw; ++c) {
          ASSERT_EQ(all[r * ohw * n + i * ohw + c], one[r * ohw + c]);
        }
      }
    }
  }
}

TEST(LayerKernels, SwapLeadingAxesTransposesBlocksBothWays) {
  auto backend = MakeCpuBackend(1);
  const int d0 = 3, d1 = 5;
  const int64_t inner = 4;
  const std::vector<float> x = Random(d0 * d1 * inner, 4);
  std::vector<float> y(x.size(), 7.0f), back(x.size(), 7.0f);
  ASSERT_TRUE(
      Conv(backend).SwapLeadingAxes(d0, d1, inner, x.data(), y.data()).ok());
  for (int a = 0; a < d0; ++a) {
    for (int b = 0; b < d1; ++b) {
      for (int64_t s = 0; s < inner; ++s) {
        ASSERT_EQ(y[(b * d0 + a) * inner + s], x[(a * d1 + b) * inner + s]);
      }
    }
  }
  for (size_t i = 0; i < y.size(); ++i) {
    ASSERT_EQ(y[i], x[SwapLeadingAxesSource(d0, d1, inner, i)]);
  }
  ASSERT_TRUE(
      Conv(backend).SwapLeadingAxes(d1, d0, inner, y.data(), back.data()).ok());
  EXPECT_EQ(back, x);
  EXPECT_FALSE(
      Conv(backend).SwapLeadingAxes(-1, d1, inner, x.data(), y.data()).ok());
}

// The 2x2 stride-2 fast path picks exactly MaxPoolArgmax's element: on
// ties (ReLU zeros), on NaNs (the first one wins) and with odd plane sizes
// (the last row and column are left out), forward and backward.
TEST(LayerKernels, MaxPool2x2FastPathEqualsTheGeneralWindow) {
  auto backend = MakeCpuBackend(1);
  WindowGeometry g;
  g.channels = 3;
  g.height = 7;
  g.width = 9;
  g.kernel_h = g.kernel_w = 2;
  g.stride_h = g.stride_w = 2;
  ASSERT_TRUE(IsMaxPool2x2(g));
  const int n = 2;
  const size_t plane = static_cast<size_t>(g.height) * g.width;
  const size_t out_plane = static_cast<size_t>(OutHeight(g)) * OutWidth(g);
  std::vector<float> x = Random(n * g.channels * plane, 5);
  for (size_t i = 0; i < x.size(); ++i) {
    if (i % 3 == 0) x[i] = 0.0f;  // ties
    if (i % 17 == 0 || i % 17 == 1) x[i] = NAN;
    if (i % 29 == 0) x[i] = -INFINITY;
  }
  const std::vector<float> dy = Random(n * g.channels * out_plane, 6);
  std::vector<float> y(dy.size()), dx(x.size());
  ASSERT_TRUE(Pool(backend).MaxPoolForward(n, g, x.data(), y.data()).ok());
  ASSERT_TRUE(
      Pool(backend).MaxPoolBackward(n, g, x.data(), dy.data(), dx.data()).ok());
  int nan_windows = 0;
  for (int p = 0; p < n * g.channels; ++p) {
    const float* xp = x.data() + p * plane;
    for (int oh = 0; oh < OutHeight(g); ++oh) {
      for (int ow = 0; ow < OutWidth(g); ++ow) {
        const float want = xp[MaxPoolArgmax(g, xp, oh, ow)];
        const float got = y[p * out_plane + oh * OutWidth(g) + ow];
        if (std::isnan(want)) {
          ++nan_windows;
          EXPECT_TRUE(std::isnan(got));
        } else {
          EXPECT_EQ(got, want);
        }
      }
    }
    for (int ih = 0; ih < g.height; ++ih) {
      for (int iw = 0; iw < g.width; ++iw) {
        EXPECT_EQ(dx[p * plane + ih * g.width + iw],
                  MaxPoolGrad(g, xp, dy.data() + p * out_plane, ih, iw))
            << "plane " << p << " (" << ih << ", " << iw << ")";
      }
    }
  }
  EXPECT_GT(nan_windows, 0);
}

TEST(LayerKernels, PoolingForwardAndBackward) {
  auto backend = MakeCpuBackend(1);
  const int n = 2;
  for (const WindowGeometry& g : Geometries()) {
    if (2 * g.pad_h > g.kernel_h || 2 * g.pad_w > g.kernel_w) continue;
    const size_t in = n * static_cast<size_t>(g.channels) * g.height * g.width;
    const size_t plane = static_cast<size_t>(g.height) * g.width;
    const size_t out =
        n * static_cast<size_t>(g.channels) * OutHeight(g) * OutWidth(g);
    const std::vector<float> x = Random(in, 3), dy = Random(out, 4);
    std::vector<float> y(out), dx(in);
    // Max: forward is the window maximum; backward (scatter on the CPU)
    // equals the gather that the CUDA kernel runs.
    ASSERT_TRUE(Pool(backend).MaxPoolForward(n, g, x.data(), y.data()).ok());
    ASSERT_TRUE(Pool(backend)
                    .MaxPoolBackward(n, g, x.data(), dy.data(), dx.data())
                    .ok());
    const size_t out_plane = out / (n * g.channels);
    for (int p = 0; p < n * g.channels; ++p) {
      for (int oh = 0; oh < OutHeight(g); ++oh) {
        for (int ow = 0; ow < OutWidth(g); ++ow) {
          float want = -INFINITY;
          for (int ki = 0; ki < g.kernel_h; ++ki) {
            for (int kj = 0; kj < g.kernel_w; ++kj) {
              const int ih = oh * g.stride_h - g.pad_h + ki;
              const int iw = ow * g.stride_w - g.pad_w + kj;
              if (ih >= 0 && ih < g.height && iw >= 0 && iw < g.width) {
                want = std::max(want, x[p * plane + ih * g.width + iw]);
              }
            }
          }
          EXPECT_EQ(y[p * out_plane + oh * OutWidth(g) + ow], want);
        }
      }
      for (int ih = 0; ih < g.height; ++ih) {
        for (int iw = 0; iw < g.width; ++iw) {
          EXPECT_NEAR(dx[p * plane + ih * g.width + iw],
                      MaxPoolGrad(g, x.data() + p * plane,
                                  dy.data() + p * out_plane, ih, iw),
                      1e-6);
        }
      }
    }
    EXPECT_NEAR(Dot(y, dy), Dot(x, dx), 1e-4);  // piecewise linear
    // Average: backward is the adjoint of forward.
    ASSERT_TRUE(Pool(backend).AvgPoolForward(n, g, x.data(), y.data()).ok());
    ASSERT_TRUE(Pool(backend).AvgPoolBackward(n, g, dy.data(), dx.data()).ok());
    EXPECT_NEAR(Dot(y, dy), Dot(x, dx), 1e-4);
  }
  WindowGeometry bad;
  bad.channels = 1;
  bad.height = bad.width = 2;
  bad.kernel_h = bad.kernel_w = 3;
  float buf[9] = {};
  EXPECT_EQ(Pool(backend).MaxPoolForward(1, bad, buf, buf).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(LayerKernels, ChannelBiasAddAndGrad) {
  auto backend = MakeCpuBackend(1);
  const int n = 3, c = 4, s = 5;
  std::vector<float> x(n * c * s, 1.0f);
  const std::vector<float> bias = {1, 2, 3, 4};
  ASSERT_TRUE(
      Conv(backend).AddChannelBias(n, c, s, bias.data(), x.data()).ok());
  EXPECT_EQ(x[0], 2.0f);
  EXPECT_EQ(x[s * 3 + 1], 5.0f);
  EXPECT_EQ(x[(c + 1) * s], 3.0f);
  std::vector<float> db(c);
  ASSERT_TRUE(Conv(backend).ChannelBiasGrad(n, c, s, x.data(), db.data()).ok());
  EXPECT_EQ(db, (std::vector<float>{30, 45, 60, 75}));
}

TEST(LayerKernels, DropoutMaskIsAPureFunctionOfSamplePosition) {
  auto backend = MakeCpuBackend(1);
  const int rows = 8, size = 1000;
  DropoutKey key;
  key.seed = 9;
  key.step = 17;
  key.layer = 5;
  key.p = 0.25f;
  const std::vector<float> ones(rows * size, 1.0f);
  std::vector<float> whole(rows * size), halves(rows * size);
  ASSERT_TRUE(
      Drop(backend).Dropout(rows, size, key, ones.data(), whole.data()).ok());
  // The same global batch in two pieces, each with its first sample position.
  DropoutKey second = key;
  second.first_sample = 3;
  ASSERT_TRUE(
      Drop(backend).Dropout(3, size, key, ones.data(), halves.data()).ok());
  ASSERT_TRUE(Drop(backend)
                  .Dropout(rows - 3, size, second, ones.data(),
                           halves.data() + 3 * size)
                  .ok());
  EXPECT_EQ(whole, halves);
  int dropped = 0;
  for (float v : whole) {
    if (v == 0.0f) {
      ++dropped;
    } else {
      EXPECT_EQ(v, 1.0f / 0.75f);
    }
  }
  EXPECT_NEAR(dropped / static_cast<double>(rows * size), 0.25, 0.02);
  // Other steps, layers and seeds draw other masks.
  for (int which = 0; which < 3; ++which) {
    DropoutKey other = key;
    if (which == 0) other.step = 18;
    if (which == 1) other.layer = 6;
    if (which == 2) other.seed = 10;
    std::vector<float> y(rows * size);
    ASSERT_TRUE(
        Drop(backend).Dropout(rows, size, other, ones.data(), y.data()).ok());
    EXPECT_NE(y, whole) << which;
  }
  key.p = 1.0f;
  EXPECT_EQ(
      Drop(backend).Dropout(rows, size, key, ones.data(), whole.data()).code(),
      absl::StatusCode::kInvalidArgument);
}

TEST(LayerKernels, BatchNormTrainEvalAndBackward) {
  auto backend = MakeCpuBackend(1);
  BatchNormShape s;
  s.n = 4;
  s.channels = 3;
  s.spatial = 5;
  s.eps = 1e-3f;
  s.momentum = 0.2f;
  const size_t total = s.n * s.channels * s.spatial;
  const std::vector<float> x = Random(total, 5);
  const std::vector<float> gamma = {1.5f, -0.5f, 2.0f}, beta = {0.1f, 0.2f, 0};
  std::vector<float> rm = {0.5f, 0, 0}, rv = {1, 2, 1};
  std::vector<float> save_mean(3), save_invstd(3), y(total);
  float tracked = 4;
  ASSERT_TRUE(BatchNorm(backend)
                  .BatchNormForwardTrain(s, x.data(), gamma.data(), beta.data(),
                                         rm.data(), rv.data(), &tracked,
                                         save_mean.data(), save_invstd.data(),
                                         y.data())
                  .ok());
  EXPECT_EQ(tracked, 5.0f);
  const int m = s.n * s.spatial;
  for (int c = 0; c < 3; ++c) {
    double mean = 0, var = 0;
    for (int i = 0; i < s.n; ++i)
      for (int k = 0; k < s.spatial; ++k) mean += x[(i * 3 + c) * 5 + k];
    mean /= m;
    for (int i = 0; i < s.n; ++i)
      for (int k = 0; k < s.spatial; ++k)
        var += std::pow(x[(i * 3 + c) * 5 + k] - mean, 2);
    var /= m;
    EXPECT_NEAR(save_mean[c], mean, 1e-6);
    EXPECT_NEAR(rm[c], (c == 0 ? 0.8 * 0.5 : 0.0) + 0.2 * mean, 1e-6);
    EXPECT_NEAR(rv[c], 0.8 * (c == 1 ? 2 : 1) + 0.2 * var * m / (m - 1), 1e-6);
    const double invstd = 1 / std::sqrt(var + 1e-3);
    for (int i = 0; i < s.n; ++i) {
      for (int k = 0; k < s.spatial; ++k) {
        const size_t e = (i * 3 + c) * 5 + k;
        EXPECT_NEAR(y[e], gamma[c] * (x[e] - mean) * invstd + beta[c], 1e-5);
      }
    }
  }
  // Eval uses the running statistics.
  ASSERT_TRUE(BatchNorm(backend)
                  .BatchNormForwardEval(s, x.data(), gamma.data(), beta.data(),
                                        rm.data(), rv.data(), y.data())
                  .ok());
  // Element 7 is sample 0, channel 1, position 2.
  EXPECT_NEAR(y[7],
              gamma[1] * (x[7] - rm[1]) / std::sqrt(rv[1] + 1e-3) + beta[1],
              1e-5);
  // Backward against central differences of L = <y(x), r>.
  const std::vector<float> r = Random(total, 6);
  std::vector<float> dx(total), dgamma(3), dbeta(3);
  ASSERT_TRUE(BatchNorm(backend)
                  .BatchNormForwardTrain(s, x.data(), gamma.data(), beta.data(),
                                         rm.data(), rv.data(), nullptr,
                                         save_mean.data(), save_invstd.data(),
                                         y.data())
                  .ok());
  ASSERT_TRUE(BatchNorm(backend)
                  .BatchNormBackward(s, x.data(), r.data(), gamma.data(),
                                     save_mean.data(), save_invstd.data(),
                                     dx.data(), dgamma.data(), dbeta.data())
                  .ok());
  auto loss = [&](const std::vector<float>& xs, const std::vector<float>& g,
                  const std::vector<float>& b) {
    std::vector<float> yy(total), sm(3), si(3), m1(3), v1(3);
    EXPECT_TRUE(BatchNorm(backend)
                    .BatchNormForwardTrain(s, xs.data(), g.data(), b.data(),
                                           m1.data(), v1.data(), nullptr,
                                           sm.data(), si.data(), yy.data())
                    .ok());
    return Dot(yy, r);
  };
  const float h = 1e-2f;
  for (size_t i = 0; i < total; i += 7) {
    std::vector<float> xp = x, xm = x;
    xp[i] += h;
    xm[i] -= h;
    EXPECT_NEAR(dx[i],
                (loss(xp, gamma, beta) - loss(xm, gamma, beta)) / (2 * h), 2e-3)
        << i;
  }
  for (int c = 0; c < 3; ++c) {
    std::vector<float> gp = gamma, gm = gamma, bp = beta, bm = beta;
    gp[c] += h;
    gm[c] -= h;
    bp[c] += h;
    bm[c] -= h;
    EXPECT_NEAR(dgamma[c], (loss(x, gp, beta) - loss(x, gm, beta)) / (2 * h),
                2e-3);
    EXPECT_NEAR(dbeta[c], (loss(x, gamma, bp) - loss(x, gamma, bm)) / (2 * h),
                2e-3);
  }
  s.n = 1;
  s.spatial = 1;
  EXPECT_EQ(
      BatchNorm(backend)
          .BatchNormForwardTrain(s, x.data(), gamma.data(), beta.data(),
                                 rm.data(), rv.data(), nullptr,
                                 save_mean.data(), save_invstd.data(), y.data())
          .code(),
      absl::StatusCode::kInvalidArgument);
}

// A family no backend provides: asking for it is UNIMPLEMENTED.
class UnprovidedOps : public LayerOps {
 public:
  static constexpr LayerOpsFamily kFamily{"unprovided"};
};

TEST(LayerOps, TheCpuBackendProvidesEveryFamilyAndRefusesOthers) {
  auto backend = MakeCpuBackend(1);
  EXPECT_TRUE(backend->LayerOpsOf<ConvOps>().ok());
  EXPECT_TRUE(backend->LayerOpsOf<PoolOps>().ok());
  EXPECT_TRUE(backend->LayerOpsOf<DropoutOps>().ok());
  EXPECT_TRUE(backend->LayerOpsOf<BatchNormOps>().ok());
  EXPECT_EQ(backend->LayerOpsOf<ConvOps>().value(),
            backend->LayerOpsOf<ConvOps>().value());
  const absl::Status unprovided = backend->LayerOpsOf<UnprovidedOps>().status();
  EXPECT_EQ(unprovided.code(), absl::StatusCode::kUnimplemented);
  EXPECT_EQ(unprovided.message(), "backend cpu has no unprovided layer ops");
}

}  // namespace
}  // namespace ferry
