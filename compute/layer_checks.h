// Argument checks of the layer kernels, shared by every backend (header-only:
// the CUDA library cannot link back to ferry_compute). Each returns
// INVALID_ARGUMENT naming the operation, or OK.
#ifndef FERRY_COMPUTE_LAYER_CHECKS_H_
#define FERRY_COMPUTE_LAYER_CHECKS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "compute/compute_backend.h"
#include "compute/kernel_math.h"

namespace ferry {

// Negative sizes, a non-positive kernel or stride, negative padding, or a
// window with no output position.
inline absl::Status ValidateWindow(const char* op, int n,
                                   const WindowGeometry& g) {
  if (n < 0 || g.channels < 0 || g.height < 0 || g.width < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: negative shape n=%d C=%d H=%d W=%d", op, n,
                        g.channels, g.height, g.width));
  }
  if (g.kernel_h <= 0 || g.kernel_w <= 0 || g.stride_h <= 0 ||
      g.stride_w <= 0 || g.pad_h < 0 || g.pad_w < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: kernel (%d, %d) and stride (%d, %d) must be positive, padding "
        "(%d, %d) non-negative",
        op, g.kernel_h, g.kernel_w, g.stride_h, g.stride_w, g.pad_h, g.pad_w));
  }
  if (OutHeight(g) <= 0 || OutWidth(g) <= 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: a (%d, %d) window with padding (%d, %d) does not fit a %dx%d "
        "input",
        op, g.kernel_h, g.kernel_w, g.pad_h, g.pad_w, g.height, g.width));
  }
  return absl::OkStatus();
}

// Negative sizes.
inline absl::Status ValidateSwap(int d0, int d1, int64_t inner) {
  if (d0 < 0 || d1 < 0 || inner < 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "SwapLeadingAxes: negative shape [%d, %d, %d]", d0, d1, inner));
  }
  return absl::OkStatus();
}

// Negative sizes of a per-channel op on [n, channels, spatial].
inline absl::Status ValidateChannels(const char* op, int n, int channels,
                                     int spatial) {
  if (n < 0 || channels < 0 || spatial < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: negative shape n=%d channels=%d spatial=%d", op, n,
                        channels, spatial));
  }
  return absl::OkStatus();
}

// Negative sizes or p outside [0, 1).
inline absl::Status ValidateDropout(int rows, int64_t row_size,
                                    const DropoutKey& key) {
  if (rows < 0 || row_size < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("Dropout: negative shape [%d, %d]", rows, row_size));
  }
  if (!(key.p >= 0.0f && key.p < 1.0f)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("Dropout: p must be in [0, 1), got %g", key.p));
  }
  return absl::OkStatus();
}

// Negative sizes, eps <= 0, or (training) fewer than 2 values per channel.
inline absl::Status ValidateBatchNorm(const char* op, const BatchNormShape& s,
                                      bool training) {
  if (s.n < 0 || s.channels < 0 || s.spatial < 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: negative shape n=%d channels=%d spatial=%d", op,
                        s.n, s.channels, s.spatial));
  }
  if (training && static_cast<int64_t>(s.n) * s.spatial < 2) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: training needs more than one value per channel, got n=%d x "
        "spatial=%d",
        op, s.n, s.spatial));
  }
  if (!(s.eps > 0.0f)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: eps must be > 0, got %g", op, s.eps));
  }
  return absl::OkStatus();
}

}  // namespace ferry

#endif  // FERRY_COMPUTE_LAYER_CHECKS_H_
