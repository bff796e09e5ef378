#include "common/checkpoint_io.h"

#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ferry {

static_assert(std::endian::native == std::endian::little,
              "checkpoints are written and read as little-endian");

namespace {

constexpr char kMagic[8] = {'F', 'E', 'R', 'R', 'Y', 'C', 'K', 'P'};
constexpr size_t kCrcSize = sizeof(uint32_t);
// Magic, format version, and the CRC: the smallest file that can be checked.
constexpr size_t kMinSize = sizeof(kMagic) + sizeof(uint32_t) + kCrcSize;

uLong UpdateCrc32(uLong crc, absl::string_view bytes) {
  const auto* p = reinterpret_cast<const Bytef*>(bytes.data());
  size_t left = bytes.size();
  while (left > 0) {  // crc32 takes a uInt length
    const uInt n = static_cast<uInt>(std::min<size_t>(left, 1u << 30));
    crc = crc32(crc, p, n);
    p += n;
    left -= n;
  }
  return crc;
}

uint32_t Crc32(absl::string_view bytes) {
  return static_cast<uint32_t>(UpdateCrc32(crc32(0L, Z_NULL, 0), bytes));
}

// Crc32 read in pieces, each handed to `done` (when set) once read.
uint32_t Crc32InPieces(absl::string_view bytes, const BytesDone& done) {
  if (!done) return Crc32(bytes);
  constexpr size_t kPiece = size_t{8} << 20;
  uLong crc = crc32(0L, Z_NULL, 0);
  for (size_t pos = 0; pos < bytes.size(); pos += kPiece) {
    const absl::string_view piece = bytes.substr(pos, kPiece);
    crc = UpdateCrc32(crc, piece);
    done(piece);
  }
  return static_cast<uint32_t>(crc);
}

// Passes bytes on to another sink and keeps the CRC of all of them.
class CrcSink final : public ByteSink {
 public:
  explicit CrcSink(ByteSink& inner) : inner_(inner) {}
  absl::Status Append(absl::string_view bytes) override {
    crc_ = UpdateCrc32(crc_, bytes);
    return inner_.Append(bytes);
  }
  uint32_t crc() const { return static_cast<uint32_t>(crc_); }

 private:
  ByteSink& inner_;
  uLong crc_ = crc32(0L, Z_NULL, 0);
};

template <typename T>
void Put(std::string& out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out.append(bytes, sizeof(T));
}

absl::string_view FloatBytes(absl::Span<const float> values) {
  return absl::string_view(reinterpret_cast<const char*>(values.data()),
                           values.size() * sizeof(float));
}

// Reads fields front to back; a read past the end sets `truncated`.
class Reader {
 public:
  explicit Reader(absl::string_view bytes) : bytes_(bytes) {}

  template <typename T>
  T Get() {
    T value{};
    if (Take(sizeof(T)))
      std::memcpy(&value, bytes_.data() + pos_ - sizeof(T), sizeof(T));
    return value;
  }
  absl::string_view GetBytes(size_t n) {
    if (!Take(n)) return {};
    return bytes_.substr(pos_ - n, n);
  }
  bool truncated() const { return truncated_; }
  size_t pos() const { return pos_; }

 private:
  bool Take(size_t n) {
    if (truncated_ || bytes_.size() - pos_ < n) {
      truncated_ = true;
      return false;
    }
    pos_ += n;
    return true;
  }

  absl::string_view bytes_;
  size_t pos_ = 0;
  bool truncated_ = false;
};

struct Header {
  uint32_t format = 0;
  CheckpointIdentity identity;
  int64_t version = 0;
  int64_t steps_applied = 0;
  uint32_t num_state = 0;
  uint64_t elements = 0;
};

// Parses the header of `body` (the file without its CRC). False when the
// body ends inside it.
bool ParseHeader(Reader& r, Header& h) {
  r.GetBytes(sizeof(kMagic));
  h.format = r.Get<uint32_t>();
  const uint32_t job_length = r.Get<uint32_t>();
  h.identity.job_id = std::string(r.GetBytes(job_length));
  h.identity.shard_id = r.Get<int32_t>();
  h.identity.num_shards = r.Get<int32_t>();
  h.identity.range_begin = r.Get<int64_t>();
  h.identity.range_end = r.Get<int64_t>();
  h.version = r.Get<int64_t>();
  h.steps_applied = r.Get<int64_t>();
  h.num_state = r.Get<uint32_t>();
  h.elements = r.Get<uint64_t>();
  return !r.truncated();
}

// The body size a header implies, or nullopt when it overflows.
std::optional<uint64_t> ImpliedBodySize(const Header& h, size_t header_size) {
  const uint64_t buffers = uint64_t{h.num_state} + 1;
  if (h.elements > (uint64_t{1} << 60) / sizeof(float) / buffers) {
    return std::nullopt;
  }
  return header_size + buffers * h.elements * sizeof(float);
}

PackedColumn<float> GetFloats(Reader& r, uint64_t n) {
  const absl::string_view bytes = r.GetBytes(n * sizeof(float));
  return PackedColumn<float>(bytes.data(), bytes.size() / sizeof(float));
}

}  // namespace

absl::Status EncodeCheckpointTo(const CheckpointDenseView& dense,
                                absl::Span<const TablePartSource* const> tables,
                                ByteSink& sink) {
  const CheckpointIdentity& id = dense.identity;
  uint32_t format = kCheckpointFormatVersion;
  if (!tables.empty()) {
    format = tables[0]->counters().has_value()
                 ? kCheckpointFormatWithTableCounters
                 : kCheckpointFormatWithTables;
  }
  CrcSink crc(sink);
  std::string head;
  head.append(kMagic, sizeof(kMagic));
  Put<uint32_t>(head, format);
  Put<uint32_t>(head, static_cast<uint32_t>(id.job_id.size()));
  head.append(id.job_id);
  Put<int32_t>(head, id.shard_id);
  Put<int32_t>(head, id.num_shards);
  Put<int64_t>(head, id.range_begin);
  Put<int64_t>(head, id.range_end);
  Put<int64_t>(head, dense.version);
  Put<int64_t>(head, dense.steps_applied);
  Put<uint32_t>(head, static_cast<uint32_t>(dense.state.size()));
  Put<uint64_t>(head, dense.params.size());
  if (absl::Status s = crc.Append(head); !s.ok()) return s;
  if (absl::Status s = crc.Append(FloatBytes(dense.params)); !s.ok()) return s;
  for (absl::Span<const float> buffer : dense.state) {
    if (absl::Status s = crc.Append(FloatBytes(buffer)); !s.ok()) return s;
  }
  if (!tables.empty()) {
    absl::Status s =
        WriteTables(tables, format == kCheckpointFormatWithTableCounters, crc);
    if (!s.ok()) return s;
  }
  std::string tail;
  Put<uint32_t>(tail, crc.crc());
  return sink.Append(tail);
}

std::string EncodeCheckpoint(const ShardCheckpoint& c) {
  std::string out;
  out.reserve(64 + c.identity.job_id.size() +
              (c.state.size() + 1) * c.params.size() * sizeof(float));
  const TableCheckpointSources sources(c.tables);
  StringByteSink sink(&out);
  // A string sink does not fail, and valid tables do not change.
  EncodeCheckpointTo(DenseViewOf(c), sources.pointers(), sink).IgnoreError();
  return out;
}

CheckpointDenseView DenseViewOf(const ShardCheckpoint& c) {
  CheckpointDenseView view;
  view.identity = c.identity;
  view.version = c.version;
  view.steps_applied = c.steps_applied;
  view.params = c.params;
  for (const std::vector<float>& buffer : c.state) view.state.push_back(buffer);
  return view;
}

ShardCheckpoint CheckpointView::Copy() const {
  ShardCheckpoint c;
  c.identity = identity;
  c.version = version;
  c.steps_applied = steps_applied;
  c.params = params.ToVector();
  for (const PackedColumn<float>& buffer : state) {
    c.state.push_back(buffer.ToVector());
  }
  for (const TableCheckpointView& table : tables) {
    c.tables.push_back(table.Copy());
  }
  return c;
}

absl::StatusOr<ShardCheckpoint> DecodeCheckpoint(absl::string_view bytes) {
  absl::StatusOr<CheckpointView> view = DecodeCheckpointView(bytes);
  if (!view.ok()) return view.status();
  return view->Copy();
}

absl::StatusOr<CheckpointView> DecodeCheckpointView(absl::string_view bytes,
                                                    const BytesDone& done) {
  if (bytes.size() < sizeof(kMagic) ||
      std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    return absl::DataLossError(absl::StrFormat(
        "not a ferry checkpoint (bad magic; %d bytes)", bytes.size()));
  }
  if (bytes.size() < kMinSize) {
    return absl::DataLossError(
        absl::StrFormat("checkpoint truncated to %d bytes", bytes.size()));
  }
  const absl::string_view body = bytes.substr(0, bytes.size() - kCrcSize);
  uint32_t stored_crc = 0;
  std::memcpy(&stored_crc, bytes.data() + body.size(), kCrcSize);
  Reader r(body);
  Header h;
  const bool have_header = ParseHeader(r, h);
  if (const uint32_t computed = Crc32InPieces(body, done);
      stored_crc != computed) {
    // Say "truncated" when the header (if it reads) implies another size.
    if (have_header && h.format == kCheckpointFormatVersion) {
      const std::optional<uint64_t> implied = ImpliedBodySize(h, r.pos());
      if (implied.has_value() && *implied != body.size()) {
        return absl::DataLossError(absl::StrFormat(
            "checkpoint truncated or extended: %d bytes, its header implies %d",
            bytes.size(), *implied + kCrcSize));
      }
    }
    if (!have_header) {
      return absl::DataLossError(absl::StrFormat(
          "checkpoint truncated inside its header (%d bytes)", bytes.size()));
    }
    return absl::DataLossError(absl::StrFormat(
        "checkpoint checksum mismatch (stored %08x, computed %08x): corrupt",
        stored_crc, computed));
  }
  // The CRC holds: what follows is what the writer wrote.
  Reader format_reader(body.substr(sizeof(kMagic)));
  const uint32_t format = format_reader.Get<uint32_t>();
  if (format != kCheckpointFormatVersion &&
      format != kCheckpointFormatWithTables &&
      format != kCheckpointFormatWithTableCounters) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "checkpoint format version %d is not supported (this build reads %d, "
        "%d and %d)",
        format, kCheckpointFormatVersion, kCheckpointFormatWithTables,
        kCheckpointFormatWithTableCounters));
  }
  const bool with_tables = format != kCheckpointFormatVersion;
  if (!have_header) {
    return absl::DataLossError("checkpoint header does not fit in the file");
  }
  const CheckpointIdentity& id = h.identity;
  const std::optional<uint64_t> implied = ImpliedBodySize(h, r.pos());
  // The range's width in uint64_t: for any range_begin <= range_end it is
  // exact, where the int64_t difference could overflow (fuzzer finding
  // tests/fuzz/regressions/checkpoint_reader_fuzz/range-width-overflow).
  if (id.range_end < id.range_begin ||
      static_cast<uint64_t>(id.range_end) -
              static_cast<uint64_t>(id.range_begin) !=
          h.elements ||
      !implied.has_value() ||
      (with_tables ? *implied > body.size() : *implied != body.size())) {
    return absl::DataLossError(absl::StrFormat(
        "checkpoint sizes do not add up: range [%d, %d), %d elements per "
        "buffer, %d state buffers, %d bytes",
        id.range_begin, id.range_end, h.elements, h.num_state, bytes.size()));
  }
  // Fuzzer finding tests/fuzz/regressions/checkpoint_reader_fuzz/
  // state-buffer-count-unbounded: with 0 elements any count adds up.
  if (h.num_state > kMaxCheckpointStateBuffers) {
    return absl::DataLossError(absl::StrFormat(
        "checkpoint claims %d optimizer state buffers; at most %d", h.num_state,
        kMaxCheckpointStateBuffers));
  }
  CheckpointView c;
  c.identity = h.identity;
  c.version = h.version;
  c.steps_applied = h.steps_applied;
  c.params = GetFloats(r, h.elements);
  for (uint32_t i = 0; i < h.num_state; ++i) {
    c.state.push_back(GetFloats(r, h.elements));
  }
  if (with_tables) {
    absl::StatusOr<std::vector<TableCheckpointView>> tables = DecodeTableViews(
        body.substr(*implied), format == kCheckpointFormatWithTableCounters);
    if (!tables.ok()) return tables.status();
    // Writers use versions 2 and 3 only for tables (the encoding is
    // canonical).
    if (tables->empty()) {
      return absl::DataLossError(absl::StrFormat(
          "checkpoint format version %d without embedding tables", format));
    }
    c.tables = *std::move(tables);
  }
  return c;
}

absl::Status CheckIdentity(const ShardCheckpoint& checkpoint,
                           const CheckpointIdentity& expected) {
  return CheckIdentityOf(checkpoint.identity, expected);
}

absl::Status CheckIdentityOf(const CheckpointIdentity& got,
                             const CheckpointIdentity& expected) {
  if (got.job_id != expected.job_id) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "checkpoint is of job '%s', not '%s'", got.job_id, expected.job_id));
  }
  if (got.shard_id != expected.shard_id ||
      got.num_shards != expected.num_shards) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "checkpoint is of shard %d of %d, not shard %d of %d", got.shard_id,
        got.num_shards, expected.shard_id, expected.num_shards));
  }
  if (got.range_begin != expected.range_begin ||
      got.range_end != expected.range_end) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "checkpoint holds range [%d, %d), this shard owns [%d, %d)",
        got.range_begin, got.range_end, expected.range_begin,
        expected.range_end));
  }
  return absl::OkStatus();
}

std::string CheckpointPath(const std::string& dir, int32_t shard_id,
                           int64_t version) {
  return absl::StrFormat("%s/shard-%d-v%012d.ckpt", dir, shard_id, version);
}

std::optional<int64_t> ParseCheckpointName(absl::string_view name,
                                           int32_t shard_id) {
  const std::string prefix = absl::StrCat("shard-", shard_id, "-v");
  constexpr absl::string_view kSuffix = ".ckpt";
  if (!absl::StartsWith(name, prefix) || !absl::EndsWith(name, kSuffix)) {
    return std::nullopt;
  }
  name.remove_prefix(prefix.size());
  name.remove_suffix(kSuffix.size());
  if (name.empty() ||
      !std::all_of(name.begin(), name.end(), absl::ascii_isdigit)) {
    return std::nullopt;
  }
  int64_t version = 0;
  if (!absl::SimpleAtoi(name, &version)) return std::nullopt;
  return version;
}

}  // namespace ferry
