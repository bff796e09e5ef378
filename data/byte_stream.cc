#include "data/byte_stream.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ferry {
namespace {

constexpr size_t kInputBufferBytes = 128 * 1024;

std::string ErrnoMessage(int err) {
  return std::generic_category().message(err);
}

}  // namespace

ByteStream::~ByteStream() {
  if (inflating_) inflateEnd(&strm_);
  if (fd_ >= 0) close(fd_);
}

absl::StatusOr<std::unique_ptr<ByteStream>> ByteStream::Open(
    const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) {
      return absl::NotFoundError(absl::StrCat(path, " not found"));
    }
    if (err == EACCES || err == EPERM) {
      return absl::PermissionDeniedError(
          absl::StrCat(path, ": cannot open for reading: ", ErrnoMessage(err)));
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

absl::StatusOr<uint64_t> ByteStream::Read(uint8_t* dst, uint64_t len) {
  return gzip_ ? Inflate(dst, len) : Copy(dst, len);
}

absl::Status ByteStream::CheckCleanEnd() const {
  if (!truncated_) return absl::OkStatus();
  return absl::DataLossError(
      absl::StrCat(path_,
                   ": truncated gzip stream (the file ends inside its data or "
                   "its CRC/length trailer)"));
}

ByteStream::ByteStream(std::string path, int fd)
    : path_(std::move(path)), fd_(fd), in_(kInputBufferBytes) {
  std::memset(&strm_, 0, sizeof(strm_));
  strm_.next_in = in_.data();
  strm_.avail_in = 0;
}

absl::StatusOr<size_t> ByteStream::Fill() {
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

absl::StatusOr<uint64_t> ByteStream::Copy(uint8_t* dst, uint64_t len) {
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

absl::StatusOr<uint64_t> ByteStream::Inflate(uint8_t* dst, uint64_t len) {
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

}  // namespace ferry
