#include "data/idx_reader.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace ferry {
namespace {

constexpr uint8_t kIdxTypeU8 = 0x08;
constexpr int kMaxIdxRank = 8;
constexpr size_t kInputBufferBytes = 128 * 1024;
// Deflate cannot expand its input more than 1032:1 (a 258-byte match coded in
// two bits), so a gzip file of S bytes decompresses to at most S * 1032 bytes.
constexpr uint64_t kMaxDeflateRatio = 1032;

std::string ErrnoMessage(int err) {
  return std::generic_category().message(err);
}

uint32_t LoadBigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) |
         (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// The bytes of a file, gunzipped when it starts with the gzip magic (possibly
// several concatenated members; bytes after the last member that do not start
// another one are ignored, as gzip does).
//
// We drive inflate() ourselves rather than use gzread(): gzread reports a clean
// end of file for some streams cut inside their last block or trailer (when a
// large read fills the caller's buffer exactly as the input runs out), and
// truncated files must never read as valid.
class ByteStream {
 public:
  ~ByteStream() {
    if (inflating_) inflateEnd(&strm_);
    if (fd_ >= 0) close(fd_);
  }
  ByteStream(const ByteStream&) = delete;
  ByteStream& operator=(const ByteStream&) = delete;

  // Errors: NOT_FOUND, PERMISSION_DENIED, FAILED_PRECONDITION (not a regular
  // file), INTERNAL.
  static absl::StatusOr<std::unique_ptr<ByteStream>> Open(
      const std::string& path) {
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      const int err = errno;
      if (err == ENOENT || err == ENOTDIR) {
        return absl::NotFoundError(absl::StrCat(path, " not found"));
      }
      if (err == EACCES || err == EPERM) {
        return absl::PermissionDeniedError(absl::StrCat(
            path, ": cannot open for reading: ", ErrnoMessage(err)));
      }
      return absl::InternalError(
          absl::StrCat(path, ": cannot open: ", ErrnoMessage(err)));
    }
    std::unique_ptr<ByteStream> stream(new ByteStream(path, fd));  // owns fd
    struct stat st;
    if (fstat(fd, &st) != 0) {
      const int err = errno;
      return absl::InternalError(
          absl::StrCat(path, ": cannot stat: ", ErrnoMessage(err)));
    }
    if (!S_ISREG(st.st_mode)) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, " is not a regular file"));
    }
    stream->file_size_ = static_cast<uint64_t>(st.st_size);
    // Look at the first two bytes to tell gzip from plain.
    while (stream->strm_.avail_in < 2) {
      ASSIGN_OR_RETURN(size_t n, stream->Fill());
      if (n == 0) break;
    }
    if (stream->strm_.avail_in >= 2 && stream->strm_.next_in[0] == 0x1f &&
        stream->strm_.next_in[1] == 0x8b) {
      const int ret = inflateInit2(&stream->strm_, 15 + 16);  // gzip only
      if (ret != Z_OK) {
        return absl::InternalError(
            absl::StrCat(path, ": cannot start zlib (error ", ret, ")"));
      }
      stream->inflating_ = true;
      stream->gzip_ = true;
    }
    return stream;
  }

  bool gzip() const { return gzip_; }
  uint64_t file_size() const { return file_size_; }

  // Reads up to `len` bytes of (decompressed) data into `dst`; returns fewer
  // only at the end of the data, including the early end of a cut gzip stream
  // (CheckCleanEnd() reports that).
  // Errors: DATA_LOSS (corrupt gzip stream), INTERNAL (I/O).
  absl::StatusOr<uint64_t> Read(uint8_t* dst, uint64_t len) {
    return gzip_ ? Inflate(dst, len) : Copy(dst, len);
  }

  // After Read() returned less than asked: OK iff the data ended cleanly,
  // DATA_LOSS for a gzip stream that ends inside a member.
  absl::Status CheckCleanEnd() const {
    if (!truncated_) return absl::OkStatus();
    return absl::DataLossError(absl::StrCat(
        path_,
        ": truncated gzip stream (the file ends inside its data or "
        "its CRC/length trailer)"));
  }

 private:
  ByteStream(std::string path, int fd)
      : path_(std::move(path)), fd_(fd), in_(kInputBufferBytes) {
    std::memset(&strm_, 0, sizeof(strm_));
    strm_.next_in = in_.data();
    strm_.avail_in = 0;
  }

  // Appends file bytes after the unread input; returns how many, 0 at EOF.
  // Callers call it only with fewer than in_.size() bytes unread.
  absl::StatusOr<size_t> Fill() {
    if (strm_.avail_in > 0 && strm_.next_in != in_.data()) {
      std::memmove(in_.data(), strm_.next_in, strm_.avail_in);
    }
    strm_.next_in = in_.data();
    const size_t room = in_.size() - strm_.avail_in;
    if (room == 0) return 0;
    for (;;) {
      const ssize_t n = read(fd_, in_.data() + strm_.avail_in, room);
      if (n >= 0) {
        strm_.avail_in += static_cast<uInt>(n);
        return static_cast<size_t>(n);
      }
      const int err = errno;
      if (err != EINTR) {
        return absl::InternalError(
            absl::StrCat(path_, ": read error: ", ErrnoMessage(err)));
      }
    }
  }

  absl::StatusOr<uint64_t> Copy(uint8_t* dst, uint64_t len) {
    uint64_t got = 0;
    while (got < len) {
      if (strm_.avail_in == 0) {
        ASSIGN_OR_RETURN(size_t n, Fill());
        if (n == 0) break;
      }
      const uint64_t take = std::min<uint64_t>(len - got, strm_.avail_in);
      std::memcpy(dst + got, strm_.next_in, take);
      strm_.next_in += take;
      strm_.avail_in -= static_cast<uInt>(take);
      got += take;
    }
    return got;
  }

  absl::StatusOr<uint64_t> Inflate(uint8_t* dst, uint64_t len) {
    uint64_t got = 0;
    while (!done_ && got < len) {
      if (strm_.avail_in == 0) {
        ASSIGN_OR_RETURN(size_t n, Fill());
        if (n == 0) {
          truncated_ = !member_ended_;
          done_ = true;
          break;
        }
      }
      if (member_ended_) {
        if (strm_.next_in[0] != 0x1f) {  // not another member: ignore the rest
          done_ = true;
          break;
        }
        inflateReset(&strm_);
        member_ended_ = false;
      }
      const auto chunk = static_cast<uInt>(
          std::min<uint64_t>(len - got, std::numeric_limits<uInt>::max()));
      strm_.next_out = dst + got;
      strm_.avail_out = chunk;
      const int ret = inflate(&strm_, Z_NO_FLUSH);
      got += chunk - strm_.avail_out;
      if (ret == Z_STREAM_END) {
        member_ended_ = true;
      } else if (ret == Z_MEM_ERROR) {
        return absl::ResourceExhaustedError(
            absl::StrCat(path_, ": out of memory in zlib"));
      } else if (ret != Z_OK && !(ret == Z_BUF_ERROR && strm_.avail_in == 0)) {
        return absl::DataLossError(
            absl::StrCat(path_, ": corrupt gzip stream (",
                         strm_.msg != nullptr ? strm_.msg : "zlib error", ")"));
      }
    }
    return got;
  }

  const std::string path_;
  const int fd_;
  std::vector<uint8_t> in_;  // file bytes; unread ones at strm_.next_in
  z_stream strm_;
  uint64_t file_size_ = 0;
  bool gzip_ = false;
  bool inflating_ = false;     // inflateInit2 succeeded
  bool member_ended_ = false;  // inflate returned Z_STREAM_END
  bool done_ = false;          // no more data will come
  bool truncated_ = false;     // input ended inside a gzip member
};

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
