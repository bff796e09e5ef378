#include "data/idx_reader.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "data/byte_stream.h"

namespace ferry {
namespace {

constexpr uint8_t kIdxTypeU8 = 0x08;
constexpr int kMaxIdxRank = 8;
uint32_t LoadBigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) |
         (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

}  // namespace

absl::StatusOr<IdxArray> ReadIdxFile(const std::string& path,
                                     int expected_rank) {
  if (expected_rank < 1 || expected_rank > kMaxIdxRank) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: expected IDX rank %d is outside [1, %d]", path,
                        expected_rank, kMaxIdxRank));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<ByteStream> stream, ByteStream::Open(path));
  const uint64_t header_bytes = 4 + 4 * static_cast<uint64_t>(expected_rank);
  const uint32_t expected_magic =
      (uint32_t{kIdxTypeU8} << 8) | static_cast<uint32_t>(expected_rank);

  uint8_t header[4 + 4 * kMaxIdxRank];
  ASSIGN_OR_RETURN(uint64_t got, stream->Read(header, 4));
  if (got < 4) {
    return absl::DataLossError(
        absl::StrFormat("%s: truncated IDX header: expected %d bytes, found %d",
                        path, header_bytes, got));
  }
  const uint32_t magic = LoadBigEndian32(header);
  if (magic != expected_magic) {
    return absl::DataLossError(absl::StrFormat(
        "%s: bad IDX magic: expected 0x%08x (u8 elements, rank %d), found "
        "0x%08x",
        path, expected_magic, expected_rank, magic));
  }
  ASSIGN_OR_RETURN(got, stream->Read(header + 4, header_bytes - 4));
  if (got < header_bytes - 4) {
    return absl::DataLossError(
        absl::StrFormat("%s: truncated IDX header: expected %d bytes, found %d",
                        path, header_bytes, 4 + got));
  }

  IdxArray out;
  uint64_t total = 1;  // saturates at kMaxIdxDataBytes + 1
  for (int i = 0; i < expected_rank; ++i) {
    const uint64_t dim = LoadBigEndian32(header + 4 + 4 * i);
    out.dims.push_back(static_cast<int64_t>(dim));
    if (total != 0 && dim != 0 && total > kMaxIdxDataBytes / dim) {
      total = kMaxIdxDataBytes + 1;
    } else {
      total *= dim;
    }
  }
  const std::string shape = absl::StrJoin(out.dims, " x ");
  if (total > kMaxIdxDataBytes) {
    return absl::DataLossError(absl::StrFormat(
        "%s: IDX header declares %s elements, more than the limit of %d bytes",
        path, shape, kMaxIdxDataBytes));
  }
  // Refuse before allocating when the file cannot hold what the header says.
  const uint64_t file_size = stream->file_size();
  if (!stream->gzip()) {
    const uint64_t available = file_size - std::min(file_size, header_bytes);
    if (total > available) {
      return absl::DataLossError(absl::StrFormat(
          "%s: truncated IDX data: header declares %s = %d bytes, found %d",
          path, shape, total, available));
    }
  } else if (file_size < kMaxIdxDataBytes &&
             total > file_size * kMaxDeflateRatio) {
    return absl::DataLossError(absl::StrFormat(
        "%s: truncated IDX data: header declares %s = %d bytes, but a "
        "%d-byte gzip file holds at most %d",
        path, shape, total, file_size, file_size * kMaxDeflateRatio));
  }

  out.data.resize(total);
  ASSIGN_OR_RETURN(got, stream->Read(out.data.data(), total));
  if (got < total) {
    return absl::DataLossError(absl::StrFormat(
        "%s: truncated IDX data: header declares %s = %d bytes, found %d", path,
        shape, total, got));
  }
  uint8_t extra = 0;
  ASSIGN_OR_RETURN(got, stream->Read(&extra, 1));
  if (got != 0) {
    return absl::DataLossError(absl::StrFormat(
        "%s: IDX size mismatch: header declares %s = %d data bytes, but the "
        "file holds more",
        path, shape, total));
  }
  RETURN_IF_ERROR(stream->CheckCleanEnd());
  return out;
}

}  // namespace ferry
