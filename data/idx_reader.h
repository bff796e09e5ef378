// Reader for IDX files, the format of MNIST and Fashion-MNIST.
//
// An IDX file is a big-endian header followed by row-major data:
//   bytes 0-1  zero
//   byte  2    element type (only 0x08, unsigned byte, is supported)
//   byte  3    rank (number of dimensions)
//   then one u32 per dimension, then product(dims) elements.
// Images are magic 0x00000803 (u8 [n, rows, cols]); labels are 0x00000801
// (u8 [n]). Files may be gzip-compressed (.gz; concatenated members are
// fine) or plain; the reader detects which from the content, not the name. A
// gzip stream must be complete: a file cut anywhere, trailer included, or with
// a wrong CRC is DATA_LOSS.
//
// Corrupt input never crashes the reader and never makes it allocate more than
// the header declares, nor more than the file could possibly hold (its size for
// plain files, its size times deflate's maximum ratio for gzip files).
//
// Thread safety: the functions are thread-safe (they share no state).
#ifndef FERRY_DATA_IDX_READER_H_
#define FERRY_DATA_IDX_READER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ferry {

inline constexpr uint32_t kIdxImagesMagic = 0x00000803;  // u8, rank 3
inline constexpr uint32_t kIdxLabelsMagic = 0x00000801;  // u8, rank 1

// Largest data section accepted (header-declared element count), 4 GiB.
inline constexpr uint64_t kMaxIdxDataBytes = uint64_t{1} << 32;

// An IDX array of unsigned bytes.
struct IdxArray {
  std::vector<int64_t> dims;  // as declared by the header, outermost first
  std::vector<uint8_t> data;  // row-major; size() == product of dims
};

// Reads the IDX file at `path` (gzip-compressed or plain), which must hold u8
// elements of rank `expected_rank` (1 for labels, 3 for images).
//
// Errors (every message names `path`):
//   INVALID_ARGUMENT    expected_rank is outside [1, 8];
//   NOT_FOUND           no file at `path` ("<path> not found");
//   PERMISSION_DENIED   the file cannot be opened for reading;
//   FAILED_PRECONDITION `path` is not a regular file (e.g. a directory);
//   DATA_LOSS           wrong magic (element type or rank), truncated header,
//                       fewer or more data bytes than the header declares, a
//                       size over kMaxIdxDataBytes, a corrupt gzip stream;
//                       the message says what was expected and what was found;
//   RESOURCE_EXHAUSTED  zlib ran out of memory;
//   INTERNAL            other I/O failures.
absl::StatusOr<IdxArray> ReadIdxFile(const std::string& path,
                                     int expected_rank);

}  // namespace ferry

#endif  // FERRY_DATA_IDX_READER_H_
