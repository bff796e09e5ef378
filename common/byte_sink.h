// ByteSink: where an encoder writes bytes front to back (a file being
// written, a string), so that one encoder serves both a streamed write and
// an in-memory copy.
//
// Thread safety: one thread at a time.
#ifndef FERRY_COMMON_BYTE_SINK_H_
#define FERRY_COMMON_BYTE_SINK_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ferry {

class ByteSink {
 public:
  virtual ~ByteSink() = default;
  // Appends `bytes`. Errors are the destination's (a file system's); once
  // one failed, the bytes appended so far are not a usable prefix and the
  // caller gives up.
  virtual absl::Status Append(absl::string_view bytes) = 0;
};

// Appends to a string (not owned; it must outlive the sink). Never fails.
class StringByteSink final : public ByteSink {
 public:
  explicit StringByteSink(std::string* out) : out_(out) {}
  absl::Status Append(absl::string_view bytes) override {
    out_->append(bytes.data(), bytes.size());
    return absl::OkStatus();
  }

 private:
  std::string* const out_;
};

}  // namespace ferry

#endif  // FERRY_COMMON_BYTE_SINK_H_
