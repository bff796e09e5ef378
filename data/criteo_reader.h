// Streams the examples of a Criteo TSV file (data/criteo_format.h), plain or
// gzip (detected from the content), a block at a time: memory stays at the
// block size whatever the file's size.
//
// Malformed lines are skipped and counted; the first few are kept with their
// line numbers and reasons for the report. A file is refused (DATA_LOSS) when
// more than `max_malformed_fraction` of its lines are malformed: checked from
// kCriteoEarlyCheckLines lines on (a file of another format fails fast) and
// at the end. A file without any example is refused too.
//
// Thread safety: one thread uses a reader.
#ifndef FERRY_DATA_CRITEO_READER_H_
#define FERRY_DATA_CRITEO_READER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/byte_stream.h"
#include "data/criteo_format.h"

namespace ferry {

inline constexpr int64_t kCriteoEarlyCheckLines = 1000;
inline constexpr int kCriteoErrorsKept = 5;

struct CriteoReaderOptions {
  double max_malformed_fraction = 0.5;
  // A longer line is malformed (and skipped without being held).
  int64_t max_line_bytes = 64 * 1024;
  int64_t block_bytes = 256 * 1024;
};

struct CriteoReadStats {
  int64_t lines = 0;     // non-empty lines seen so far
  int64_t examples = 0;  // of them parsed
  int64_t malformed = 0;
  // "line N: reason" for the first kCriteoErrorsKept malformed lines.
  std::vector<std::string> first_errors;
};

class CriteoReader {
 public:
  // Errors: as ByteStream::Open; INVALID_ARGUMENT for options out of range.
  static absl::StatusOr<std::unique_ptr<CriteoReader>> Open(
      const std::string& path, const CriteoReaderOptions& options = {});

  // The next example into `out`: true, or false at the clean end of the
  // file. Errors (messages name the file): DATA_LOSS for a file mostly
  // malformed (with its first bad lines), one without any example, a
  // corrupt or truncated gzip stream; INTERNAL for I/O. After an error the
  // reader stays failed.
  absl::StatusOr<bool> Next(CriteoExample& out);

  const CriteoReadStats& stats() const { return stats_; }
  // One line for logs: lines, examples, malformed and the first errors.
  std::string Summary() const;

 private:
  CriteoReader(std::unique_ptr<ByteStream> stream, CriteoReaderOptions options)
      : stream_(std::move(stream)), options_(options) {}

  // Makes [pos_, end_) hold at least one whole line or the file's rest;
  // false when nothing is left.
  absl::StatusOr<bool> FillLine();
  absl::Status CheckMalformedShare(bool at_end) const;
  void CountMalformed(int64_t line_number, const std::string& reason);

  std::unique_ptr<ByteStream> stream_;
  const CriteoReaderOptions options_;
  std::vector<char> buffer_;
  size_t pos_ = 0, end_ = 0;
  bool eof_ = false;
  bool skipping_long_line_ = false;
  int64_t line_number_ = 0;  // of the last line taken, 1-based
  absl::Status failed_;
  CriteoReadStats stats_;
};

}  // namespace ferry

#endif  // FERRY_DATA_CRITEO_READER_H_
