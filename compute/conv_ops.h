// The convolution family's ops (compute/layer_ops.h): im2col/col2im, the
// axis swap around the convolution GEMMs and per-channel bias, on NCHW
// activations (see compute/kernel_math.h). INVALID_ARGUMENT on negative sizes
// or a window geometry with no output.
#ifndef FERRY_COMPUTE_CONV_OPS_H_
#define FERRY_COMPUTE_CONV_OPS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "compute/kernel_math.h"
#include "compute/layer_ops.h"

namespace ferry {

class ConvOps : public LayerOps {
 public:
  static constexpr LayerOpsFamily kFamily{"conv"};

  // cols[C * kh * kw, n * OH * OW] = im2col of the n samples x [n, C, H, W]
  // side by side: column i * OH * OW + s is output position s of sample i
  // (padding reads 0), so one GEMM convolves all n.
  virtual absl::Status Im2Col(const WindowGeometry& g, int n, const float* x,
                              float* cols) = 0;
  // dx[n, C, H, W] = col2im(cols), cols laid out as Im2Col's: every input
  // element receives the sum of the cols entries im2col read from it
  // (overwrites dx).
  virtual absl::Status Col2Im(const WindowGeometry& g, int n, const float* cols,
                              float* dx) = 0;
  // y[b, a, :] = x[a, b, :] for x [d0, d1, inner], y [d1, d0, inner] (NCHW
  // <-> [C, N * HW] around the convolution GEMMs). y must not overlap x.
  virtual absl::Status SwapLeadingAxes(int d0, int d1, int64_t inner,
                                       const float* x, float* y) = 0;
  // x[i, c, s] += bias[c] for x [n, channels, spatial].
  virtual absl::Status AddChannelBias(int n, int channels, int spatial,
                                      const float* bias, float* x) = 0;
  // dbias[c] = sum over i, s of dy[i, c, s] (overwrites dbias).
  virtual absl::Status ChannelBiasGrad(int n, int channels, int spatial,
                                       const float* dy, float* dbias) = 0;
};

}  // namespace ferry

#endif  // FERRY_COMPUTE_CONV_OPS_H_
