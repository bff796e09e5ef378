#include "common/checkpoint_io.h"

#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/file_system.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/checkpoint_crc.h"

namespace ferry {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

CheckpointIdentity Identity() { return CheckpointIdentity{"job", 1, 3, 4, 7}; }

ShardCheckpoint Sample(int64_t version = 12) {
  ShardCheckpoint c;
  c.identity = Identity();
  c.version = version;
  c.steps_applied = version + 5;
  c.params = {1.5f, -2.0f, static_cast<float>(version)};
  c.state = {{0.25f, 0.5f, 0.75f}, {1e-8f, 3.0f, -0.0f}};
  return c;
}

void ExpectSame(const ShardCheckpoint& a, const ShardCheckpoint& b) {
  EXPECT_EQ(a.identity.job_id, b.identity.job_id);
  EXPECT_EQ(a.identity.shard_id, b.identity.shard_id);
  EXPECT_EQ(a.identity.num_shards, b.identity.num_shards);
  EXPECT_EQ(a.identity.range_begin, b.identity.range_begin);
  EXPECT_EQ(a.identity.range_end, b.identity.range_end);
  EXPECT_EQ(a.version, b.version);
  EXPECT_EQ(a.steps_applied, b.steps_applied);
  EXPECT_EQ(a.params, b.params);
  EXPECT_EQ(a.state, b.state);
}

// Rewrites the trailing CRC so that only the edited field is "wrong".

TEST(CheckpointIoTest, RoundTrip) {
  const ShardCheckpoint c = Sample();
  const std::string bytes = EncodeCheckpoint(c);
  EXPECT_EQ(bytes.substr(0, 8), "FERRYCKP");
  // magic, format, job (4 + 3), ids 8, range 16, version and steps 16,
  // buffer count 4 and size 8, 3 buffers of 3 floats, crc.
  EXPECT_EQ(bytes.size(), 8u + 4 + 7 + 8 + 16 + 16 + 12 + 36 + 4);
  absl::StatusOr<ShardCheckpoint> back = DecodeCheckpoint(bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSame(*back, c);
  EXPECT_TRUE(CheckIdentity(*back, Identity()).ok());

  ShardCheckpoint sgd = Sample();  // no optimizer state
  sgd.state.clear();
  back = DecodeCheckpoint(EncodeCheckpoint(sgd));
  ASSERT_TRUE(back.ok()) << back.status();
  ExpectSame(*back, sgd);
}

TEST(CheckpointIoTest, EveryTruncationAndExtensionIsDataLoss) {
  const std::string bytes = EncodeCheckpoint(Sample());
  for (size_t n = 0; n < bytes.size(); ++n) {
    absl::Status status = DecodeCheckpoint(bytes.substr(0, n)).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss)
        << n << ": " << status;
  }
  EXPECT_THAT(
      DecodeCheckpoint(bytes.substr(0, bytes.size() - 12)).status().message(),
      HasSubstr("truncated"));
  EXPECT_EQ(DecodeCheckpoint(bytes + "x").status().code(),
            absl::StatusCode::kDataLoss);
}

TEST(CheckpointIoTest, EveryFlippedByteIsDataLoss) {
  const std::string bytes = EncodeCheckpoint(Sample());
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (const char mask : {'\x01', '\x80'}) {
      std::string corrupt = bytes;
      corrupt[i] ^= mask;
      const absl::Status status = DecodeCheckpoint(corrupt).status();
      EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss)
          << i << ": " << status;
    }
  }
  std::string corrupt = bytes;
  corrupt[75] ^= 1;  // inside the params (header: 71 bytes)
  EXPECT_THAT(DecodeCheckpoint(corrupt).status().message(),
              HasSubstr("checksum"));
  corrupt = bytes;
  corrupt[0] = 'X';
  EXPECT_THAT(DecodeCheckpoint(corrupt).status().message(), HasSubstr("magic"));
}

TEST(CheckpointIoTest, UnknownFormatIsFailedPreconditionBadSizesDataLoss) {
  std::string bytes = EncodeCheckpoint(Sample());
  bytes[8] = 4;  // format version (1 to 3 are known)
  testing::FixCheckpointCrc(bytes);
  absl::Status status = DecodeCheckpoint(bytes).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_THAT(status.message(), HasSubstr("format version 4"));

  bytes = EncodeCheckpoint(Sample());
  // Header offsets: job length at 12, job at 16, range_end at 35.
  bytes[35] = 8;  // range [4, 8) but 3 elements per buffer
  testing::FixCheckpointCrc(bytes);
  status = DecodeCheckpoint(bytes).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_THAT(status.message(), HasSubstr("do not add up"));
}

TEST(CheckpointIoTest, CheckIdentityNamesTheField) {
  const ShardCheckpoint c = Sample();
  CheckpointIdentity other = Identity();
  other.job_id = "other";
  EXPECT_EQ(CheckIdentity(c, other).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(CheckIdentity(c, other).message(), HasSubstr("job 'job'"));
  other = Identity();
  other.shard_id = 2;
  EXPECT_THAT(CheckIdentity(c, other).message(), HasSubstr("shard 1 of 3"));
  other = Identity();
  other.num_shards = 4;
  EXPECT_EQ(CheckIdentity(c, other).code(),
            absl::StatusCode::kFailedPrecondition);
  other = Identity();
  other.range_begin = 3;
  EXPECT_THAT(CheckIdentity(c, other).message(), HasSubstr("range"));
}

TEST(CheckpointIoTest, Names) {
  EXPECT_EQ(CheckpointPath("/d", 3, 42), "/d/shard-3-v000000000042.ckpt");
  EXPECT_EQ(ParseCheckpointName("shard-3-v000000000042.ckpt", 3), 42);
  EXPECT_EQ(ParseCheckpointName("shard-3-v1234567890123.ckpt", 3),
            1234567890123);
  EXPECT_EQ(ParseCheckpointName("shard-3-v000000000042.ckpt", 13),
            std::nullopt);
  EXPECT_EQ(ParseCheckpointName("shard-13-v000000000042.ckpt", 3),
            std::nullopt);
  EXPECT_EQ(ParseCheckpointName("shard-3-v000000000042.ckpt.tmp", 3),
            std::nullopt);
  EXPECT_EQ(ParseCheckpointName("shard-3-v.ckpt", 3), std::nullopt);
  EXPECT_EQ(ParseCheckpointName("shard-3-v-1.ckpt", 3), std::nullopt);
}

TEST(CheckpointStoreTest, KeepsTheNewestThree) {
  InMemoryFileSystem fs;
  CheckpointStore store(&fs, "/ckpt/", Identity());
  for (int64_t v : {5, 1, 9, 7, 3}) {
    absl::StatusOr<std::string> path = store.Write(Sample(v));
    ASSERT_TRUE(path.ok()) << path.status();
    EXPECT_EQ(*path, CheckpointPath("/ckpt", 1, v));
  }
  EXPECT_THAT(*store.ListVersions(), ElementsAre(5, 7, 9));
  // Other shards' files are neither listed nor pruned.
  fs.SetFileContents("/ckpt/shard-2-v000000000001.ckpt", "x");
  ASSERT_TRUE(store.Write(Sample(11)).ok());
  EXPECT_THAT(*store.ListVersions(), ElementsAre(7, 9, 11));
  EXPECT_TRUE(fs.ReadFile("/ckpt/shard-2-v000000000001.ckpt").ok());

  absl::StatusOr<ShardCheckpoint> loaded = store.LoadVersion(9);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ExpectSame(*loaded, Sample(9));
  EXPECT_EQ(store.LoadVersion(5).status().code(), absl::StatusCode::kNotFound);
}

// The coordinator pins the versions every shard holds: a shard whose own
// writes succeed keeps them while another shard's writes fail.
TEST(CheckpointStoreTest, PinnedVersionsOutliveTheNewestThree) {
  InMemoryFileSystem fs;
  CheckpointStore store(&fs, "/ckpt", Identity());
  ASSERT_TRUE(store.Write(Sample(50)).ok());
  store.Pin({50});
  for (int64_t v : {100, 150, 200, 235})
    ASSERT_TRUE(store.Write(Sample(v)).ok());
  EXPECT_THAT(*store.ListVersions(), ElementsAre(50, 150, 200, 235));
  EXPECT_TRUE(store.LoadVersion(50).ok());
  // Unpinned, it goes at the next write.
  store.Pin({});
  ASSERT_TRUE(store.Write(Sample(300)).ok());
  EXPECT_THAT(*store.ListVersions(), ElementsAre(200, 235, 300));
}

TEST(CheckpointStoreTest, WriteRejectsAnotherSliceOrWrongSizes) {
  InMemoryFileSystem fs;
  CheckpointStore store(&fs, "/ckpt", Identity());
  ShardCheckpoint c = Sample();
  c.identity.job_id = "other";
  EXPECT_EQ(store.Write(c).status().code(),
            absl::StatusCode::kFailedPrecondition);
  c = Sample();
  c.state[1].pop_back();
  EXPECT_EQ(store.Write(c).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(fs.writes(), 0);
}

TEST(CheckpointStoreTest, LoadNewestSkipsCorruptAndForeignCheckpoints) {
  InMemoryFileSystem fs;
  CheckpointStore store(&fs, "/ckpt", Identity());
  EXPECT_EQ(store.LoadNewest().status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(store.Write(Sample(4)).ok());
  ASSERT_TRUE(store.Write(Sample(6)).ok());
  std::string bytes = EncodeCheckpoint(Sample(6));
  bytes[bytes.size() / 2] ^= 0x20;
  fs.SetFileContents(CheckpointPath("/ckpt", 1, 6), bytes);
  ShardCheckpoint foreign = Sample(8);
  foreign.identity.job_id = "other";
  fs.SetFileContents(CheckpointPath("/ckpt", 1, 8), EncodeCheckpoint(foreign));

  std::string path;
  absl::StatusOr<ShardCheckpoint> newest = store.LoadNewest(&path);
  ASSERT_TRUE(newest.ok()) << newest.status();
  EXPECT_EQ(newest->version, 4);
  EXPECT_EQ(path, CheckpointPath("/ckpt", 1, 4));
  EXPECT_EQ(store.LoadVersion(6).status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(store.LoadVersion(8).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // A file whose name and header disagree.
  fs.SetFileContents(CheckpointPath("/ckpt", 1, 5),
                     EncodeCheckpoint(Sample(4)));
  EXPECT_EQ(store.LoadVersion(5).status().code(), absl::StatusCode::kDataLoss);
}

TEST(CheckpointStoreTest, DeleteNewerThanAndFailedWrites) {
  InMemoryFileSystem fs;
  CheckpointStore store(&fs, "/ckpt", Identity());
  for (int64_t v : {2, 4, 6}) ASSERT_TRUE(store.Write(Sample(v)).ok());
  EXPECT_EQ(*store.DeleteNewerThan(3), 2);
  EXPECT_THAT(*store.ListVersions(), ElementsAre(2));
  fs.FailWrites(absl::ResourceExhaustedError("disk full"));
  EXPECT_EQ(store.Write(Sample(8)).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(*store.ListVersions(), ElementsAre(2));
}

TEST(CheckpointStoreTest, PosixRoundTripInATempDir) {
  std::string root = ::testing::TempDir() + "/ferry-ckpt-XXXXXX";
  ASSERT_NE(mkdtemp(root.data()), nullptr);
  const std::string dir = root + "/nested/dir";  // created by Write
  CheckpointStore store(PosixFileSystem(), dir, Identity());
  EXPECT_THAT(*store.ListVersions(), IsEmpty());
  EXPECT_EQ(store.LoadNewest().status().code(), absl::StatusCode::kNotFound);
  for (int64_t v = 1; v <= 5; ++v) ASSERT_TRUE(store.Write(Sample(v)).ok());
  // The newest three, and no temp file left behind.
  EXPECT_THAT(
      *PosixFileSystem()->ListDirectory(dir),
      ElementsAre("shard-1-v000000000003.ckpt", "shard-1-v000000000004.ckpt",
                  "shard-1-v000000000005.ckpt"));
  absl::StatusOr<ShardCheckpoint> newest = store.LoadNewest();
  ASSERT_TRUE(newest.ok()) << newest.status();
  ExpectSame(*newest, Sample(5));
  EXPECT_EQ(PosixFileSystem()->ReadFile(dir + "/missing").status().code(),
            absl::StatusCode::kNotFound);
  std::filesystem::remove_all(root);
}

TEST(CheckpointWriterTest, WritesWhatWriteWritesOnlyOnCommit) {
  InMemoryFileSystem fs;
  CheckpointStore store(&fs, "/ckpt", Identity());
  const ShardCheckpoint c = Sample(3);
  std::unique_ptr<CheckpointWriter> writer = store.NewWriter();
  EXPECT_EQ(writer->Commit().status().code(),
            absl::StatusCode::kFailedPrecondition);  // nothing written yet
  ASSERT_TRUE(writer->Write(DenseViewOf(c), {}).ok());
  EXPECT_THAT(*store.ListVersions(), IsEmpty());  // not before the commit
  absl::StatusOr<std::string> path = writer->Commit();
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*path, CheckpointPath("/ckpt", 1, 3));
  EXPECT_EQ(*fs.ReadFile(*path), EncodeCheckpoint(c));
  EXPECT_EQ(writer->Commit().status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(writer->Write(DenseViewOf(c), {}).code(),
            absl::StatusCode::kFailedPrecondition);  // one checkpoint each
  // Another slice or wrong sizes: refused before anything is written.
  ShardCheckpoint other = Sample(4);
  other.identity.shard_id = 2;
  EXPECT_EQ(store.NewWriter()->Write(DenseViewOf(other), {}).code(),
            absl::StatusCode::kFailedPrecondition);
  ShardCheckpoint short_state = Sample(4);
  short_state.state[0].pop_back();
  EXPECT_EQ(store.NewWriter()->Write(DenseViewOf(short_state), {}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(*store.ListVersions(), ElementsAre(3));
  EXPECT_EQ(fs.writes(), 1);
}

TEST(CheckpointWriterTest, AFailedWriteLeavesThePreviousCheckpoints) {
  InMemoryFileSystem fs;
  CheckpointStore store(&fs, "/ckpt", Identity());
  for (int64_t v : {1, 2, 3}) ASSERT_TRUE(store.Write(Sample(v)).ok());
  const std::string v3 = *fs.ReadFile(CheckpointPath("/ckpt", 1, 3));
  // The disk fills up halfway through the next checkpoint.
  fs.FailWritesAfter(40);
  std::unique_ptr<CheckpointWriter> writer = store.NewWriter();
  EXPECT_EQ(writer->Write(DenseViewOf(Sample(4)), {}).code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(writer->Commit().status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store.Write(Sample(4)).status().code(),
            absl::StatusCode::kResourceExhausted);
  // Nothing pruned, nothing replaced.
  EXPECT_THAT(*store.ListVersions(), ElementsAre(1, 2, 3));
  EXPECT_EQ(*fs.ReadFile(CheckpointPath("/ckpt", 1, 3)), v3);
  absl::StatusOr<ShardCheckpoint> newest = store.LoadNewest();
  ASSERT_TRUE(newest.ok()) << newest.status();
  ExpectSame(*newest, Sample(3));
}

// A table whose rows come short of its header (a table changed while it
// was read).
class ShortTable final : public TablePartSource {
 public:
  int32_t table() const override { return 0; }
  uint32_t row_floats() const override { return 1; }
  uint64_t rows() const override { return 3; }
  uint64_t pending() const override { return 0; }
  std::optional<TableCounters> counters() const override {
    return TableCounters{};
  }
  void ForEachRun(
      const std::function<void(const TableRowRun&)>& fn) const override {
    fn(TableRowRun{ids_, seen_, values_});
  }
  void ForEachPending(
      const std::function<void(uint64_t, int32_t, int64_t)>&) const override {}

 private:
  std::vector<uint64_t> ids_ = {1, 2};
  std::vector<int64_t> seen_ = {0, 0};
  std::vector<float> values_ = {0.5f, 0.25f};
};

TEST(CheckpointWriterTest, PosixFailedWriteRemovesItsTempFile) {
  std::string root = ::testing::TempDir() + "/ferry-ckpt-XXXXXX";
  ASSERT_NE(mkdtemp(root.data()), nullptr);
  CheckpointStore store(PosixFileSystem(), root, Identity());
  ASSERT_TRUE(store.Write(Sample(5)).ok());
  ShortTable table;
  const TablePartSource* tables[] = {&table};
  std::unique_ptr<CheckpointWriter> writer = store.NewWriter();
  const absl::Status status = writer->Write(DenseViewOf(Sample(5)), tables);
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal) << status;
  EXPECT_THAT(*PosixFileSystem()->ListDirectory(root),
              ElementsAre("shard-1-v000000000005.ckpt"));
  // Written but never committed: gone with its writer.
  writer = store.NewWriter();
  ASSERT_TRUE(writer->Write(DenseViewOf(Sample(6)), {}).ok());
  writer.reset();
  EXPECT_THAT(*PosixFileSystem()->ListDirectory(root),
              ElementsAre("shard-1-v000000000005.ckpt"));
  absl::StatusOr<ShardCheckpoint> newest = store.LoadNewest();
  ASSERT_TRUE(newest.ok()) << newest.status();
  ExpectSame(*newest, Sample(5));
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace ferry
