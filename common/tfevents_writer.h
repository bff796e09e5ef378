// TfEventsWriter: a TensorBoard event file ("events.out.tfevents.<unix
// seconds>.<hostname>.<pid>.<n>") of scalar summaries, without TensorFlow.
//
// Format (what TensorBoard's reader expects): TFRecord framing, each record
//   uint64 length (little endian) | uint32 masked CRC32C of those 8 bytes |
//   data | uint32 masked CRC32C of data
// where data is a serialized tensorflow.Event. The first record is an Event
// with wall_time and file_version "brain.Event:2"; each later one carries
// wall_time (field 1, double), step (2, int64) and summary (5): Summary {
// repeated Value value = 1 { string tag = 1; float simple_value = 2; } }.
// The protobuf encoding is written by hand here (those field numbers are
// TensorBoard's); tests/common/tfevents_writer_test.cc reads it back.
//
// Every record is flushed to the OS as it is written: a crash loses at most
// the point being written. A new writer never reuses a file: TensorBoard
// reads each file of a directory, so a restarted process starts a new one.
//
// Thread safety: thread-safe.
#ifndef FERRY_COMMON_TFEVENTS_WRITER_H_
#define FERRY_COMMON_TFEVENTS_WRITER_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ferry {

// Pure encoders (exposed for tests).
// A TFRecord: the framing above around `data`.
std::string FrameTfRecord(absl::string_view data);
// A serialized Event with wall_time and file_version "brain.Event:2".
std::string EncodeFileVersionEvent(double wall_time);
// A serialized Event with wall_time, step and one simple_value per entry.
std::string EncodeScalarsEvent(
    double wall_time, int64_t step,
    const std::vector<std::pair<std::string, float>>& values);

class TfEventsWriter {
 public:
  // Creates `dir` (and missing parents) and a new event file in it, and
  // writes the file_version record. INVALID_ARGUMENT for an empty `dir`;
  // PERMISSION_DENIED / INTERNAL (naming the path) when it cannot be
  // created or written.
  static absl::StatusOr<std::unique_ptr<TfEventsWriter>> Open(
      const std::string& dir);
  ~TfEventsWriter();
  TfEventsWriter(const TfEventsWriter&) = delete;
  TfEventsWriter& operator=(const TfEventsWriter&) = delete;

  // Appends one Event with these scalars and flushes it. INTERNAL (naming
  // the file and the OS error) when the write fails.
  absl::Status WriteScalars(
      int64_t step, absl::Time wall_time,
      const std::vector<std::pair<std::string, float>>& values);
  const std::string& path() const { return path_; }

 private:
  TfEventsWriter(std::string path, std::FILE* file)
      : path_(std::move(path)), file_(file) {}
  absl::Status WriteRecord(absl::string_view data)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::string path_;
  absl::Mutex mu_;
  std::FILE* file_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ferry

#endif  // FERRY_COMMON_TFEVENTS_WRITER_H_
