// Fuzz target: the PS checkpoint reader (common/checkpoint_io.h).
//
// Input: byte 0 % 4 picks the mode.
//  0: the rest is a checkpoint file, decoded as is (DecodeCheckpoint).
//  1: the rest is a checkpoint file without its CRC; the right CRC is
//     appended, so mutations get past the checksum into the header and
//     size checks (the seeds are valid files less their last 4 bytes).
//  2: a directory: the rest is split into frames, each stored in an
//     in-memory file system under a checkpoint name of shard 0 (a fuzzed
//     version, sometimes a fuzzed name); then a CheckpointStore lists,
//     loads the newest, loads one version and deletes newer ones.
//  3: round trip: a checkpoint built from the bytes (sizes bounded) is
//     encoded and decoded.
//
// Oracles: every decode that succeeds re-encodes to exactly the bytes it
// read; a canonical checkpoint name parses back to its version; the
// newest checkpoint a store loads holds range_end - range_begin params and
// as many elements in each state buffer; a round trip gives back what was
// encoded.
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/checkpoint_io.h"
#include "common/file_system.h"
#include "tests/fuzz/fuzz_input.h"

namespace ferry::fuzz {
namespace {

constexpr char kDir[] = "/ckpt";

std::string WithCrc(std::string body) {
  const uint32_t crc = static_cast<uint32_t>(
      crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(body.data()),
            static_cast<uInt>(body.size())));
  for (int i = 0; i < 4; ++i) body.push_back(static_cast<char>(crc >> (8 * i)));
  return body;
}

bool SameFloats(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
}

void DecodeAndCheck(const std::string& bytes) {
  absl::StatusOr<ShardCheckpoint> c = DecodeCheckpoint(bytes);
  if (!c.ok()) return;
  FuzzCheck(EncodeCheckpoint(*c) == bytes,
            "a decoded checkpoint does not re-encode to its bytes");
}

void Store(FuzzInput& in) {
  InMemoryFileSystem fs;
  CheckpointIdentity identity;
  identity.job_id = "job";
  identity.shard_id = 0;
  identity.num_shards = 2;
  identity.range_begin = 0;
  identity.range_end = in.Range(0, 4);
  for (int i = 0; i < 6 && !in.empty(); ++i) {
    const uint8_t how = in.Byte();
    const bool canonical = how != 0xff;
    // Read in the input's order: the name (or the version) first.
    const std::string fuzzed_name = canonical ? "" : in.Frame();
    const int64_t version = canonical ? in.Range(0, 9) : -1;
    const std::string name =
        canonical ? CheckpointPath("", 0, version).substr(1) : fuzzed_name;
    std::string contents = in.Frame();
    if (how & 0x01) contents = WithCrc(std::move(contents));
    fs.SetFileContents(absl::StrCat(kDir, "/", name), contents);
    const std::optional<int64_t> parsed = ParseCheckpointName(name, 0);
    if (canonical) {
      FuzzCheck(parsed.has_value() && *parsed == version,
                "a CheckpointPath name does not parse back to its version");
    }
  }
  CheckpointStore store(&fs, kDir, identity);
  store.ListVersions().IgnoreError();
  absl::StatusOr<ShardCheckpoint> newest = store.LoadNewest();
  if (newest.ok()) {
    const size_t n =
        static_cast<size_t>(identity.range_end - identity.range_begin);
    bool sized = newest->params.size() == n;
    for (const std::vector<float>& buffer : newest->state) {
      sized = sized && buffer.size() == n;
    }
    FuzzCheck(sized,
              "LoadNewest returned a checkpoint whose buffers do not hold "
              "range_end - range_begin elements");
  }
  store.LoadVersion(in.Range(-1, 10)).IgnoreError();
  store.DeleteNewerThan(in.Range(-1, 10)).IgnoreError();
}

void RoundTrip(FuzzInput& in) {
  ShardCheckpoint c;
  c.identity.job_id = in.Frame();
  c.identity.shard_id = in.Int<int32_t>();
  c.identity.num_shards = in.Int<int32_t>();
  c.identity.range_begin = in.Int<int64_t>() / 2;
  const int64_t n = in.Range(0, 64);
  c.identity.range_end = c.identity.range_begin + n;
  c.version = in.Int<int64_t>();
  c.steps_applied = in.Int<int64_t>();
  c.params.resize(static_cast<size_t>(n));
  for (float& v : c.params) v = in.Float();
  c.state.resize(in.Range(0, 2));
  for (std::vector<float>& buffer : c.state) {
    buffer.resize(static_cast<size_t>(n));
    for (float& v : buffer) v = in.Float();
  }
  absl::StatusOr<ShardCheckpoint> d = DecodeCheckpoint(EncodeCheckpoint(c));
  FuzzCheck(d.ok(), "an encoded checkpoint does not decode");
  bool same = d->identity.job_id == c.identity.job_id &&
              d->identity.shard_id == c.identity.shard_id &&
              d->identity.num_shards == c.identity.num_shards &&
              d->identity.range_begin == c.identity.range_begin &&
              d->identity.range_end == c.identity.range_end &&
              d->version == c.version && d->steps_applied == c.steps_applied &&
              SameFloats(d->params, c.params) &&
              d->state.size() == c.state.size();
  for (size_t i = 0; same && i < c.state.size(); ++i) {
    same = SameFloats(d->state[i], c.state[i]);
  }
  FuzzCheck(same, "a checkpoint round trip changed it");
}

}  // namespace
}  // namespace ferry::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ferry::fuzz;
  FuzzInput in(data, size);
  switch (in.Byte() % 4) {
    case 0:
      DecodeAndCheck(in.Rest());
      break;
    case 1:
      DecodeAndCheck(WithCrc(in.Rest()));
      break;
    case 2:
      Store(in);
      break;
    default:
      RoundTrip(in);
  }
  return 0;
}
