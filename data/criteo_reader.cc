#include "data/criteo_reader.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace ferry {

absl::StatusOr<std::unique_ptr<CriteoReader>> CriteoReader::Open(
    const std::string& path, const CriteoReaderOptions& options) {
  if (!(options.max_malformed_fraction >= 0.0 &&
        options.max_malformed_fraction <= 1.0) ||
      options.max_line_bytes < 64 || options.block_bytes < 64) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: reader options out of range (malformed fraction %g in [0, 1], "
        "line and block bytes >= 64)",
        path, options.max_malformed_fraction));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<ByteStream> stream, ByteStream::Open(path));
  std::unique_ptr<CriteoReader> reader(
      new CriteoReader(std::move(stream), options));
  reader->buffer_.resize(static_cast<size_t>(
      std::max(options.block_bytes, options.max_line_bytes + 1)));
  return reader;
}

absl::StatusOr<bool> CriteoReader::FillLine() {
  while (true) {
    if (pos_ < end_ &&
        std::memchr(buffer_.data() + pos_, '\n', end_ - pos_) != nullptr) {
      return true;
    }
    if (eof_) return pos_ < end_;
    // Keep the unread part, then read after it.
    if (pos_ > 0) {
      std::memmove(buffer_.data(), buffer_.data() + pos_, end_ - pos_);
      end_ -= pos_;
      pos_ = 0;
    }
    if (end_ == buffer_.size()) {
      // No newline in a whole buffer: a line longer than allowed. Drop what
      // is held and skip to its end.
      skipping_long_line_ = true;
      end_ = 0;
    }
    const uint64_t room = buffer_.size() - end_;
    ASSIGN_OR_RETURN(
        const uint64_t got,
        stream_->Read(reinterpret_cast<uint8_t*>(buffer_.data() + end_), room));
    end_ += got;
    if (got < room) {  // ByteStream reads short only at the end
      RETURN_IF_ERROR(stream_->CheckCleanEnd());
      eof_ = true;
    }
  }
}

void CriteoReader::CountMalformed(int64_t line_number,
                                  const std::string& reason) {
  ++stats_.malformed;
  if (static_cast<int>(stats_.first_errors.size()) < kCriteoErrorsKept) {
    stats_.first_errors.push_back(
        absl::StrCat("line ", line_number, ": ", reason));
  }
}

absl::Status CriteoReader::CheckMalformedShare(bool at_end) const {
  if (at_end && stats_.examples == 0) {
    return absl::DataLossError(absl::StrCat(
        stream_->path(), ": no examples",
        stats_.lines == 0
            ? " (the file is empty)"
            : absl::StrCat(" (", stats_.malformed, " malformed lines; first: ",
                           absl::StrJoin(stats_.first_errors, "; "), ")")));
  }
  if (!at_end && stats_.lines < kCriteoEarlyCheckLines) return absl::OkStatus();
  const double share = static_cast<double>(stats_.malformed) /
                       static_cast<double>(std::max<int64_t>(1, stats_.lines));
  if (share > options_.max_malformed_fraction) {
    return absl::DataLossError(absl::StrFormat(
        "%s: %d of %d lines malformed (over %g%%), not a Criteo TSV file? "
        "First: %s",
        stream_->path(), stats_.malformed, stats_.lines,
        100.0 * options_.max_malformed_fraction,
        absl::StrJoin(stats_.first_errors, "; ")));
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> CriteoReader::Next(CriteoExample& out) {
  RETURN_IF_ERROR(failed_);
  auto fail = [&](absl::Status status) {
    failed_ = status;
    return status;
  };
  while (true) {
    absl::StatusOr<bool> more = FillLine();
    if (!more.ok()) return fail(more.status());
    if (!*more) {
      if (absl::Status share = CheckMalformedShare(true); !share.ok())
        return fail(std::move(share));
      return false;
    }
    const char* begin = buffer_.data() + pos_;
    const char* newline =
        static_cast<const char*>(std::memchr(begin, '\n', end_ - pos_));
    const size_t length =
        newline == nullptr ? end_ - pos_ : static_cast<size_t>(newline - begin);
    pos_ += length + (newline == nullptr ? 0 : 1);
    ++line_number_;
    const absl::string_view line(begin, length);
    if (skipping_long_line_) {
      skipping_long_line_ = false;
      ++stats_.lines;
      CountMalformed(
          line_number_,
          absl::StrCat("longer than ", options_.max_line_bytes, " bytes"));
    } else if (line.empty() || line == "\r") {
      continue;  // blank lines are not examples, nor errors
    } else {
      ++stats_.lines;
      if (static_cast<int64_t>(length) > options_.max_line_bytes) {
        CountMalformed(
            line_number_,
            absl::StrCat("longer than ", options_.max_line_bytes, " bytes"));
      } else if (absl::Status parsed = ParseCriteoLine(line, out);
                 !parsed.ok()) {
        CountMalformed(line_number_, std::string(parsed.message()));
      } else {
        ++stats_.examples;
        return true;
      }
    }
    if (absl::Status share = CheckMalformedShare(false); !share.ok())
      return fail(std::move(share));
  }
}

std::string CriteoReader::Summary() const {
  std::string s = absl::StrFormat("%s: %d lines, %d examples, %d malformed",
                                  stream_->path(), stats_.lines,
                                  stats_.examples, stats_.malformed);
  if (!stats_.first_errors.empty()) {
    absl::StrAppend(&s, " (first: ", absl::StrJoin(stats_.first_errors, "; "),
                    ")");
  }
  return s;
}

}  // namespace ferry
