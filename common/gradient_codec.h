// Gradient compression on the wire (pure functions, absl only): fp16 and
// bf16 (round to nearest even), and top-k sparsification, plus the error
// feedback residual that makes the lossy encodings converge like fp32.
//
// Wire forms of n elements (all little-endian):
//  kFp32  n fp32 values, 4n bytes (the uncompressed form);
//  kFp16  n IEEE binary16 values, 2n bytes;
//  kBf16  n bfloat16 values (the upper half of an fp32), 2n bytes;
//  kTopK  k uint32 indices, strictly increasing and < n, then the k fp32
//         values at those indices (every other element is 0): 8k bytes,
//         k = TopKCount(n, ratio). The decoder reads k from the length, so
//         a top-k message is self-describing (any k in [1, n]; 0 when n==0).
//  kZeros no bytes: every element is 0. Not a compression a job chooses:
//         a sender may use it for any all-zero chunk (a pipeline stage's
//         gradient outside its layers), lossless under every compression.
//
// Conversions: fp32 -> fp16/bf16 round to nearest, ties to even; values
// beyond the largest finite fp16 (65504, rounding included) become +-inf,
// values below half the smallest fp16 subnormal (2^-25) become +-0; inf stays
// inf; NaN stays NaN (quiet). bf16 has fp32's range.
//
// Error feedback (Seide et al. 2014; Karimireddy et al. 2019): the caller
// keeps a residual per flat gradient element; what is encoded is
// v = grad + residual, and the new residual is v - decode(encode(v)): the
// part the wire dropped (top-k: the unsent elements; fp16/bf16: the rounding
// error) is added to the next step's gradient instead of being lost. Where
// the decoded value is not finite (overflow) the residual is set to 0.
//
// Thread safety: the functions are pure; an ErrorFeedback is used by one
// thread at a time.
#ifndef FERRY_COMMON_GRADIENT_CODEC_H_
#define FERRY_COMMON_GRADIENT_CODEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ferry {

// Mirrors ferry.v1.GradientEncoding (same numbers).
enum class GradientEncoding : int {
  kFp32 = 0,
  kFp16 = 1,
  kBf16 = 2,
  kTopK = 3,
  kZeros = 4,
};

struct GradientCompression {
  GradientEncoding encoding = GradientEncoding::kFp32;
  double topk_ratio = 0.01;    // kTopK: fraction of the elements kept, (0, 1]
  bool error_feedback = true;  // only used by lossy encodings

  bool compressed() const { return encoding != GradientEncoding::kFp32; }
  // Error feedback is in effect (a lossy encoding with feedback on).
  bool uses_feedback() const { return compressed() && error_feedback; }
};

// "none" / "fp32", "fp16", "bf16", "topk:R" with 0 < R <= 1 (e.g. topk:0.01).
// INVALID_ARGUMENT naming the accepted forms otherwise.
absl::StatusOr<GradientCompression> ParseCompression(absl::string_view spec,
                                                     bool error_feedback);
// The inverse of ParseCompression ("none", "fp16", "bf16", "topk:0.01").
std::string CompressionName(const GradientCompression& c);
// INVALID_ARGUMENT for an unknown encoding or a top-k ratio outside (0, 1].
absl::Status ValidateCompression(const GradientCompression& c);

// Elements a top-k message of n elements keeps: max(1, ceil(ratio * n)),
// at most n; 0 when n == 0.
int64_t TopKCount(int64_t n, double ratio);

// Exact encoded size in bytes of n elements (cost models call this).
// `ratio` is only used by kTopK.
int64_t EncodedBytes(GradientEncoding encoding, int64_t n, double ratio);

// Single-value conversions (exposed for tests and the ring's in-place
// rounding).
uint16_t FloatToHalf(float f);
float HalfToFloat(uint16_t h);
uint16_t FloatToBf16(float f);
float Bf16ToFloat(uint16_t b);

// decode(encode(v)) of one value for kFp16 / kBf16 (v itself for kFp32).
float RoundTrip(GradientEncoding encoding, float v);

// Appends the encoding of values[0, n) to *out (EncodedBytes() bytes).
// Top-k keeps the k largest |values| (NaN counts as largest; ties broken by
// the selection, deterministically for a given input). REQUIRES: a valid
// encoding; n >= 0.
void Encode(GradientEncoding encoding, const float* values, int64_t n,
            double ratio, std::string* out);

// What Decode does with the decoded values.
enum class DecodeOp {
  kCopy,  // dst[i] = decoded[i] (top-k: every unsent element becomes 0)
  kAdd,   // dst[i] += decoded[i]
};

// Decodes `bytes` holding n elements into dst[0, n). Errors (dst unchanged):
// INVALID_ARGUMENT for an unknown encoding; DATA_LOSS for a length that is
// not the encoding's size for n elements (top-k: not 8k bytes with
// 1 <= k <= n), or top-k indices out of range or not strictly increasing.
absl::Status Decode(GradientEncoding encoding, absl::string_view bytes,
                    int64_t n, float* dst, DecodeOp op = DecodeOp::kCopy);

// Encodes values[0, n) + residual[0, n) into *out (appended) and sets
// residual[i] = (values[i] + residual[i]) - decoded[i]. With a null
// residual it is Encode(). REQUIRES: a lossy or fp32 encoding, n >= 0.
void EncodeWithFeedback(GradientEncoding encoding, const float* values,
                        int64_t n, double ratio, float* residual,
                        std::string* out);

// The error feedback residual of one worker over its flat gradient of
// `size` elements (initially 0).
class ErrorFeedback {
 public:
  explicit ErrorFeedback(int64_t size) : residual_(size, 0.0f) {}

  int64_t size() const { return static_cast<int64_t>(residual_.size()); }
  // residual()[i] belongs to flat element i. REQUIRES for the callers that
  // index it: offset + n <= size().
  float* residual() { return residual_.data(); }
  const float* residual() const { return residual_.data(); }

  // EncodeWithFeedback over flat elements [offset, offset + n).
  // REQUIRES: 0 <= offset, offset + n <= size().
  void Encode(GradientEncoding encoding, int64_t offset, const float* values,
              int64_t n, double ratio, std::string* out) {
    EncodeWithFeedback(encoding, values, n, ratio, residual_.data() + offset,
                       out);
  }

  // Sum of |residual| (tests and diagnostics).
  double L1() const;
  void Reset() { residual_.assign(residual_.size(), 0.0f); }

 private:
  std::vector<float> residual_;
};

}  // namespace ferry

#endif  // FERRY_COMMON_GRADIENT_CODEC_H_
