// The bytes of a file, gunzipped when it starts with the gzip magic (possibly
// several concatenated members; bytes after the last member that do not start
// another one are ignored, as gzip does). The dataset readers (IDX, Criteo
// TSV) read through it, a block at a time.
//
// We drive inflate() ourselves rather than use gzread(): gzread reports a clean
// end of file for some streams cut inside their last block or trailer (when a
// large read fills the caller's buffer exactly as the input runs out), and
// truncated files must never read as valid.
//
// Thread safety: one thread uses a stream.
#ifndef FERRY_DATA_BYTE_STREAM_H_
#define FERRY_DATA_BYTE_STREAM_H_

#include <zlib.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ferry {

// Deflate cannot expand its input more than 1032:1 (a 258-byte match coded in
// two bits), so a gzip file of S bytes decompresses to at most S * 1032 bytes.
inline constexpr uint64_t kMaxDeflateRatio = 1032;

class ByteStream {
 public:
  ~ByteStream();
  ByteStream(const ByteStream&) = delete;
  ByteStream& operator=(const ByteStream&) = delete;

  // Opens `path`; every error message names it. Errors: NOT_FOUND,
  // PERMISSION_DENIED, FAILED_PRECONDITION (not a regular file), INTERNAL.
  static absl::StatusOr<std::unique_ptr<ByteStream>> Open(
      const std::string& path);

  const std::string& path() const { return path_; }
  bool gzip() const { return gzip_; }
  uint64_t file_size() const { return file_size_; }

  // Reads up to `len` bytes of (decompressed) data into `dst`; returns fewer
  // only at the end of the data, including the early end of a cut gzip stream
  // (CheckCleanEnd() reports that).
  // Errors: DATA_LOSS (corrupt gzip stream), RESOURCE_EXHAUSTED (zlib out of
  // memory), INTERNAL (I/O).
  absl::StatusOr<uint64_t> Read(uint8_t* dst, uint64_t len);

  // After Read() returned less than asked: OK iff the data ended cleanly,
  // DATA_LOSS for a gzip stream that ends inside a member.
  absl::Status CheckCleanEnd() const;

 private:
  ByteStream(std::string path, int fd);

  // Appends file bytes after the unread input; returns how many, 0 at EOF.
  // Callers call it only with fewer than in_.size() bytes unread.
  absl::StatusOr<size_t> Fill();
  absl::StatusOr<uint64_t> Copy(uint8_t* dst, uint64_t len);
  absl::StatusOr<uint64_t> Inflate(uint8_t* dst, uint64_t len);

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

}  // namespace ferry

#endif  // FERRY_DATA_BYTE_STREAM_H_
