// CRC32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of
// TFRecord files and of TensorBoard's event files. Table-driven, portable
// (no SSE4.2 intrinsics): the metrics writers checksum a few hundred bytes
// per training step, so speed does not matter here.
//
// Thread safety: pure functions.
#ifndef FERRY_COMMON_CRC32C_H_
#define FERRY_COMMON_CRC32C_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace ferry {

// Extends `crc` (the CRC32C of some bytes A) to the CRC32C of A + `data`.
// Crc32cExtend(0, data) == Crc32c(data).
uint32_t Crc32cExtend(uint32_t crc, absl::string_view data);

// The CRC32C of `data`; Crc32c("123456789") == 0xE3069283.
inline uint32_t Crc32c(absl::string_view data) { return Crc32cExtend(0, data); }

// TFRecord's masked CRC ("((crc >> 15) | (crc << 17)) + 0xa282ead8"), so
// that a CRC of data that itself holds CRCs is not degenerate.
inline uint32_t MaskCrc32c(uint32_t crc) {
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}
inline uint32_t UnmaskCrc32c(uint32_t masked) {
  const uint32_t rot = masked - 0xa282ead8u;
  return (rot >> 17) | (rot << 15);
}

}  // namespace ferry

#endif  // FERRY_COMMON_CRC32C_H_
