#include "common/gradient_codec.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <numeric>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ferry {

static_assert(std::endian::native == std::endian::little,
              "gradient wire forms are little-endian");

namespace {

uint32_t Bits(float f) { return std::bit_cast<uint32_t>(f); }
float FromBits(uint32_t u) { return std::bit_cast<float>(u); }

bool KnownEncoding(GradientEncoding e) {
  switch (e) {
    case GradientEncoding::kFp32:
    case GradientEncoding::kFp16:
    case GradientEncoding::kBf16:
    case GradientEncoding::kTopK:
    case GradientEncoding::kZeros:
      return true;
  }
  return false;
}

// Sort key of top-k: |v|, NaN largest.
float Magnitude(float v) { return std::isnan(v) ? INFINITY : std::fabs(v); }

// The indices (increasing) of the k largest |values|.
std::vector<uint32_t> SelectTopK(const float* values, int64_t n, int64_t k) {
  std::vector<uint32_t> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), 0u);
  if (k < n) {
    std::nth_element(idx.begin(), idx.begin() + k, idx.end(),
                     [values](uint32_t a, uint32_t b) {
                       const float ma = Magnitude(values[a]);
                       const float mb = Magnitude(values[b]);
                       return ma != mb ? ma > mb : a < b;
                     });
    idx.resize(static_cast<size_t>(k));
  }
  std::sort(idx.begin(), idx.end());
  return idx;
}

template <typename T>
void Append(std::string* out, const T* data, size_t count) {
  out->append(reinterpret_cast<const char*>(data), count * sizeof(T));
}

}  // namespace

absl::StatusOr<GradientCompression> ParseCompression(absl::string_view spec,
                                                     bool error_feedback) {
  GradientCompression c;
  c.error_feedback = error_feedback;
  if (spec == "none" || spec == "fp32" || spec.empty()) {
    c.encoding = GradientEncoding::kFp32;
  } else if (spec == "fp16") {
    c.encoding = GradientEncoding::kFp16;
  } else if (spec == "bf16") {
    c.encoding = GradientEncoding::kBf16;
  } else if (absl::StartsWith(spec, "topk:")) {
    c.encoding = GradientEncoding::kTopK;
    if (!absl::SimpleAtod(spec.substr(5), &c.topk_ratio) ||
        !(c.topk_ratio > 0.0 && c.topk_ratio <= 1.0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "compression '", spec,
          "': the top-k ratio must be a number in (0, 1], e.g. topk:0.01"));
    }
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown compression '", spec,
                     "': use none, fp16, bf16 or topk:R with 0 < R <= 1"));
  }
  return c;
}

std::string CompressionName(const GradientCompression& c) {
  switch (c.encoding) {
    case GradientEncoding::kFp32:
      return "none";
    case GradientEncoding::kFp16:
      return "fp16";
    case GradientEncoding::kBf16:
      return "bf16";
    case GradientEncoding::kTopK:
      return absl::StrCat("topk:", c.topk_ratio);
    case GradientEncoding::kZeros:
      return "zeros";
  }
  return absl::StrCat("encoding#", static_cast<int>(c.encoding));
}

absl::Status ValidateCompression(const GradientCompression& c) {
  if (!KnownEncoding(c.encoding) || c.encoding == GradientEncoding::kZeros) {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown gradient compression ", static_cast<int>(c.encoding),
        " (0 fp32, 1 fp16, 2 bf16, 3 top-k)"));
  }
  if (c.encoding == GradientEncoding::kTopK &&
      !(c.topk_ratio > 0.0 && c.topk_ratio <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "top-k ratio ", c.topk_ratio, " is outside (0, 1]; e.g. 0.01"));
  }
  return absl::OkStatus();
}

int64_t TopKCount(int64_t n, double ratio) {
  if (n <= 0) return 0;
  const double k = std::ceil(ratio * static_cast<double>(n));
  if (!(k >= 1.0)) return 1;  // also NaN
  if (k >= static_cast<double>(n)) return n;
  return static_cast<int64_t>(k);
}

int64_t EncodedBytes(GradientEncoding encoding, int64_t n, double ratio) {
  switch (encoding) {
    case GradientEncoding::kFp32:
      return 4 * n;
    case GradientEncoding::kFp16:
    case GradientEncoding::kBf16:
      return 2 * n;
    case GradientEncoding::kTopK:
      return 8 * TopKCount(n, ratio);
    case GradientEncoding::kZeros:
      return 0;
  }
  return 4 * n;
}

// fp32 -> fp16, round to nearest even (after F. Giesen, "half.c").
uint16_t FloatToHalf(float f) {
  uint32_t u = Bits(f);
  const uint32_t sign = u & 0x80000000u;
  u ^= sign;
  uint16_t out;
  if (u >= (127u + 16u) << 23) {              // >= 65536, inf or NaN
    out = u > 0x7f800000u ? 0x7e00 : 0x7c00;  // NaN -> qNaN, else inf
  } else if (u < 113u << 23) {                // below 2^-14: subnormal or zero
    // Adding 0.5 aligns the 10 mantissa bits at the bottom of the float;
    // the fp32 addition rounds to nearest even.
    const float magic = FromBits(((127u - 15u) + (23u - 10u) + 1u) << 23);
    const float sum = FromBits(u) + magic;
    out = static_cast<uint16_t>(Bits(sum) - Bits(magic));
  } else {
    const uint32_t mant_odd = (u >> 13) & 1u;
    u += (static_cast<uint32_t>(15 - 127) << 23) + 0xfffu;  // rebias, round
    u += mant_odd;                                          // ties to even
    out = static_cast<uint16_t>(u >> 13);  // may carry into inf: correct
  }
  return static_cast<uint16_t>(out | (sign >> 16));
}

float HalfToFloat(uint16_t h) {
  const uint32_t exp = h & 0x7c00u;
  const uint32_t mant = h & 0x03ffu;
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t u;
  if (exp == 0x7c00u) {
    u = 0x7f800000u | (mant << 13);  // inf or NaN (payload kept)
  } else if (exp != 0) {
    u = ((exp >> 10) + 112u) << 23 | (mant << 13);
  } else {
    // Zero or subnormal: mant * 2^-24, exact in fp32.
    const float v = static_cast<float>(mant) * 0x1p-24f;
    return std::bit_cast<float>(Bits(v) | sign);
  }
  return FromBits(u | sign);
}

uint16_t FloatToBf16(float f) {
  const uint32_t u = Bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) {  // NaN: keep it quiet and NaN
    return static_cast<uint16_t>((u >> 16) | 0x0040u);
  }
  const uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding) >> 16);
}

float Bf16ToFloat(uint16_t b) {
  return FromBits(static_cast<uint32_t>(b) << 16);
}

float RoundTrip(GradientEncoding encoding, float v) {
  switch (encoding) {
    case GradientEncoding::kFp16:
      return HalfToFloat(FloatToHalf(v));
    case GradientEncoding::kBf16:
      return Bf16ToFloat(FloatToBf16(v));
    default:
      return v;
  }
}

void Encode(GradientEncoding encoding, const float* values, int64_t n,
            double ratio, std::string* out) {
  const size_t count = static_cast<size_t>(n);
  switch (encoding) {
    case GradientEncoding::kFp32:
      Append(out, values, count);
      return;
    case GradientEncoding::kFp16:
    case GradientEncoding::kBf16: {
      const size_t start = out->size();
      out->resize(start + 2 * count);
      char* p = out->data() + start;
      const bool half = encoding == GradientEncoding::kFp16;
      for (size_t i = 0; i < count; ++i) {
        const uint16_t h =
            half ? FloatToHalf(values[i]) : FloatToBf16(values[i]);
        std::memcpy(p + 2 * i, &h, 2);
      }
      return;
    }
    case GradientEncoding::kTopK: {
      const std::vector<uint32_t> idx =
          SelectTopK(values, n, TopKCount(n, ratio));
      std::vector<float> picked(idx.size());
      for (size_t i = 0; i < idx.size(); ++i) picked[i] = values[idx[i]];
      Append(out, idx.data(), idx.size());
      Append(out, picked.data(), picked.size());
      return;
    }
    case GradientEncoding::kZeros:
      return;  // the values are taken to be zeros
  }
}

absl::Status Decode(GradientEncoding encoding, absl::string_view bytes,
                    int64_t n, float* dst, DecodeOp op) {
  if (!KnownEncoding(encoding)) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown gradient encoding ", static_cast<int>(encoding),
                     " (0 fp32, 1 fp16, 2 bf16, 3 top-k, 4 zeros)"));
  }
  const size_t count = static_cast<size_t>(n);
  const bool add = op == DecodeOp::kAdd;
  switch (encoding) {
    case GradientEncoding::kFp32:
    case GradientEncoding::kFp16:
    case GradientEncoding::kBf16: {
      const size_t width = encoding == GradientEncoding::kFp32 ? 4 : 2;
      if (bytes.size() != width * count) {
        return absl::DataLossError(absl::StrFormat(
            "%s gradient of %d elements must be %d bytes, got %d",
            encoding == GradientEncoding::kFp32   ? "fp32"
            : encoding == GradientEncoding::kFp16 ? "fp16"
                                                  : "bf16",
            n, width * count, bytes.size()));
      }
      const char* p = bytes.data();
      for (size_t i = 0; i < count; ++i) {
        float v;
        if (width == 4) {
          std::memcpy(&v, p + 4 * i, 4);
        } else {
          uint16_t h;
          std::memcpy(&h, p + 2 * i, 2);
          v = encoding == GradientEncoding::kFp16 ? HalfToFloat(h)
                                                  : Bf16ToFloat(h);
        }
        dst[i] = add ? dst[i] + v : v;
      }
      return absl::OkStatus();
    }
    case GradientEncoding::kTopK: {
      const size_t k = bytes.size() / 8;
      if (bytes.size() % 8 != 0 || k > count || (k == 0 && count > 0)) {
        return absl::DataLossError(absl::StrFormat(
            "top-k gradient of %d elements must be 8k bytes with 1 <= k <= "
            "%d, got %d bytes",
            n, n, bytes.size()));
      }
      if (k == 0) return absl::OkStatus();  // an empty chunk: nothing to add
      std::vector<uint32_t> idx(k);
      std::memcpy(idx.data(), bytes.data(), 4 * k);
      for (size_t i = 0; i < k; ++i) {
        if (idx[i] >= count || (i > 0 && idx[i] <= idx[i - 1])) {
          return absl::DataLossError(absl::StrFormat(
              "top-k gradient of %d elements: index %d at position %d is out "
              "of range or not above the one before",
              n, idx[i], i));
        }
      }
      const char* values = bytes.data() + 4 * k;
      if (!add) std::fill(dst, dst + count, 0.0f);
      for (size_t i = 0; i < k; ++i) {
        float v;
        std::memcpy(&v, values + 4 * i, 4);
        dst[idx[i]] += v;
      }
      return absl::OkStatus();
    }
    case GradientEncoding::kZeros:
      if (!bytes.empty()) {
        return absl::DataLossError(absl::StrFormat(
            "an all-zeros gradient carries no bytes, got %d", bytes.size()));
      }
      if (!add) std::fill(dst, dst + count, 0.0f);
      return absl::OkStatus();
  }
  return absl::OkStatus();
}

void EncodeWithFeedback(GradientEncoding encoding, const float* values,
                        int64_t n, double ratio, float* residual,
                        std::string* out) {
  if (residual == nullptr || encoding == GradientEncoding::kFp32) {
    Encode(encoding, values, n, ratio, out);
    return;
  }
  const size_t count = static_cast<size_t>(n);
  // residual := values + residual, the value that is encoded.
  for (size_t i = 0; i < count; ++i) residual[i] += values[i];
  if (encoding == GradientEncoding::kTopK) {
    const size_t start = out->size();
    Encode(encoding, residual, n, ratio, out);
    const size_t k = (out->size() - start) / 8;
    // What was sent leaves the residual; the rest stays in it.
    for (size_t i = 0; i < k; ++i) {
      uint32_t index;
      std::memcpy(&index, out->data() + start + 4 * i, 4);
      residual[index] = 0.0f;
    }
    return;
  }
  Encode(encoding, residual, n, ratio, out);
  for (size_t i = 0; i < count; ++i) {
    const float sent = RoundTrip(encoding, residual[i]);
    residual[i] = std::isfinite(sent) ? residual[i] - sent : 0.0f;
  }
}

double ErrorFeedback::L1() const {
  double sum = 0;
  for (float r : residual_) sum += std::fabs(r);
  return sum;
}

}  // namespace ferry
