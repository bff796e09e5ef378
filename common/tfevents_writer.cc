#include "common/tfevents_writer.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/crc32c.h"

namespace ferry {
namespace {

// Protobuf wire format, the few pieces an Event needs.
enum WireType : uint32_t {
  kVarint = 0,
  kFixed64 = 1,
  kLengthDelimited = 2,
  kFixed32 = 5
};

void PutVarint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void PutTag(std::string& out, uint32_t field, WireType type) {
  PutVarint(out, (static_cast<uint64_t>(field) << 3) | type);
}

void PutFixed(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

void PutDouble(std::string& out, uint32_t field, double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  PutTag(out, field, kFixed64);
  PutFixed(out, bits, 8);
}

void PutBytes(std::string& out, uint32_t field, absl::string_view bytes) {
  PutTag(out, field, kLengthDelimited);
  PutVarint(out, bytes.size());
  out.append(bytes.data(), bytes.size());
}

// tensorflow.Event / Summary / Summary.Value field numbers.
constexpr uint32_t kEventWallTime = 1, kEventStep = 2, kEventFileVersion = 3,
                   kEventSummary = 5;
constexpr uint32_t kSummaryValue = 1;
constexpr uint32_t kValueTag = 1, kValueSimpleValue = 2;

std::atomic<int> file_counter{0};

std::string Hostname() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0')
    return "localhost";
  return name;
}

absl::Status OsError(const std::string& what, const std::string& path,
                     int err) {
  const std::string message =
      absl::StrCat(what, " ", path, ": ", std::strerror(err));
  if (err == EACCES || err == EPERM || err == EROFS)
    return absl::PermissionDeniedError(message);
  return absl::InternalError(message);
}

}  // namespace

std::string FrameTfRecord(absl::string_view data) {
  std::string out;
  out.reserve(data.size() + 16);
  PutFixed(out, data.size(), 8);
  PutFixed(out, MaskCrc32c(Crc32c(absl::string_view(out.data(), 8))), 4);
  out.append(data.data(), data.size());
  PutFixed(out, MaskCrc32c(Crc32c(data)), 4);
  return out;
}

std::string EncodeFileVersionEvent(double wall_time) {
  std::string event;
  PutDouble(event, kEventWallTime, wall_time);
  PutBytes(event, kEventFileVersion, "brain.Event:2");
  return event;
}

std::string EncodeScalarsEvent(
    double wall_time, int64_t step,
    const std::vector<std::pair<std::string, float>>& values) {
  std::string summary;
  for (const auto& [tag, value] : values) {
    std::string v;
    PutBytes(v, kValueTag, tag);
    uint32_t bits;
    std::memcpy(&bits, &value, sizeof(bits));
    PutTag(v, kValueSimpleValue, kFixed32);
    PutFixed(v, bits, 4);
    PutBytes(summary, kSummaryValue, v);
  }
  std::string event;
  PutDouble(event, kEventWallTime, wall_time);
  PutTag(event, kEventStep, kVarint);
  PutVarint(event, static_cast<uint64_t>(step));
  PutBytes(event, kEventSummary, summary);
  return event;
}

absl::StatusOr<std::unique_ptr<TfEventsWriter>> TfEventsWriter::Open(
    const std::string& dir) {
  if (dir.empty())
    return absl::InvalidArgumentError("the TensorBoard directory is empty");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return OsError("cannot create the TensorBoard directory", dir, ec.value());
  const absl::Time now = absl::Now();
  const std::string stem =
      absl::StrCat(dir, "/events.out.tfevents.", absl::ToUnixSeconds(now), ".",
                   Hostname(), ".", getpid(), ".");
  // "x": never reuse a file (another writer of this process, same second).
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const std::string path = absl::StrCat(stem, file_counter.fetch_add(1));
    std::FILE* file = std::fopen(path.c_str(), "wbx");
    if (file == nullptr && errno == EEXIST) continue;
    if (file == nullptr)
      return OsError("cannot create the TensorBoard event file", path, errno);
    std::unique_ptr<TfEventsWriter> writer(new TfEventsWriter(path, file));
    absl::MutexLock lock(&writer->mu_);
    const absl::Status s = writer->WriteRecord(
        EncodeFileVersionEvent(absl::ToDoubleSeconds(now - absl::UnixEpoch())));
    if (!s.ok()) return s;
    return writer;
  }
  return absl::InternalError(
      absl::StrCat("no free event file name ", stem, "N"));
}

TfEventsWriter::~TfEventsWriter() {
  absl::MutexLock lock(&mu_);
  if (file_ != nullptr) std::fclose(file_);
}

absl::Status TfEventsWriter::WriteScalars(
    int64_t step, absl::Time wall_time,
    const std::vector<std::pair<std::string, float>>& values) {
  const std::string event = EncodeScalarsEvent(
      absl::ToDoubleSeconds(wall_time - absl::UnixEpoch()), step, values);
  absl::MutexLock lock(&mu_);
  return WriteRecord(event);
}

absl::Status TfEventsWriter::WriteRecord(absl::string_view data) {
  const std::string record = FrameTfRecord(data);
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size() ||
      std::fflush(file_) != 0) {
    return OsError("cannot write the TensorBoard event file", path_, errno);
  }
  return absl::OkStatus();
}

}  // namespace ferry
