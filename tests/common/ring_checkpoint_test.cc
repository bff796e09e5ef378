// Ring checkpoint parts on disk (common/ring_checkpoint.h): written by rank,
// read back whole, and every way a part can be missing or wrong.
#include "common/ring_checkpoint.h"

#include <string>
#include <vector>

#include "common/file_system.h"
#include "common/sharding.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

constexpr int64_t kElements = 10;
constexpr int kRingParts = 3;

// The value of element i of buffer k (0: params) in the checkpoint at
// `version`.
float PartValue(int k, int64_t i, int64_t version) {
  return static_cast<float>(100 * k + i) + 0.5f * static_cast<float>(version);
}

ShardCheckpoint PartOf(const std::string& job, const RingCheckpointPart& p,
                       int64_t version, int buffers = 1) {
  ShardCheckpoint part;
  part.identity = RingCheckpointPartIdentity(job, p);
  part.version = version;
  part.steps_applied = version;
  for (int64_t i = part.identity.range_begin; i < part.identity.range_end;
       ++i) {
    part.params.push_back(PartValue(0, i, version));
  }
  for (int k = 1; k <= buffers; ++k) {
    std::vector<float>& state = part.state.emplace_back();
    for (int64_t i = part.identity.range_begin; i < part.identity.range_end;
         ++i) {
      state.push_back(PartValue(k, i, version));
    }
  }
  return part;
}

ShardCheckpoint Part(const std::string& job, int rank, int parts,
                     int64_t version, int buffers = 1) {
  return PartOf(job, {rank, parts, ShardRange(kElements, parts, rank)}, version,
                buffers);
}

void WriteAll(InMemoryFileSystem& fs, int64_t version) {
  for (int r = 0; r < kRingParts; ++r) {
    ASSERT_TRUE(
        WriteRingCheckpointPart(&fs, "/ck", Part("job", r, kRingParts, version))
            .ok());
  }
}

TEST(RingCheckpointTest, PartsSplitTheStateAndLoadBackWhole) {
  InMemoryFileSystem fs;
  WriteAll(fs, 8);
  // Each rank wrote its third (3 + 3 + 4 elements).
  EXPECT_EQ(
      RingCheckpointPartIdentity("job", 0, kRingParts, kElements).range_end, 3);
  EXPECT_EQ(
      RingCheckpointPartIdentity("job", 2, kRingParts, kElements).range_begin,
      6);
  absl::StatusOr<RingCheckpoint> loaded =
      LoadRingCheckpoint(&fs, "/ck", "job", 8, kElements, 1);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->steps_applied, 8);
  std::vector<float> params, momentum;
  for (int64_t i = 0; i < kElements; ++i) {
    params.push_back(PartValue(0, i, 8));
    momentum.push_back(PartValue(1, i, 8));
  }
  EXPECT_THAT(loaded->params, ElementsAreArray(params));
  ASSERT_EQ(loaded->state.size(), 1u);
  EXPECT_THAT(loaded->state[0], ElementsAreArray(momentum));
}

TEST(RingCheckpointTest, MissingDamagedOrForeignPartsAreRefusedByPath) {
  InMemoryFileSystem fs;
  WriteAll(fs, 8);
  // A version nobody wrote.
  absl::Status missing =
      LoadRingCheckpoint(&fs, "/ck", "job", 9, kElements, 1).status();
  EXPECT_TRUE(absl::IsNotFound(missing)) << missing;
  // Another job's, another model size, another optimizer.
  EXPECT_TRUE(absl::IsFailedPrecondition(
      LoadRingCheckpoint(&fs, "/ck", "other", 8, kElements, 1).status()));
  EXPECT_TRUE(absl::IsFailedPrecondition(
      LoadRingCheckpoint(&fs, "/ck", "job", 8, kElements + 1, 1).status()));
  EXPECT_TRUE(absl::IsFailedPrecondition(
      LoadRingCheckpoint(&fs, "/ck", "job", 8, kElements, 2).status()));
  // One flipped byte in part 1.
  const std::string path = CheckpointPath("/ck", 1, 8);
  std::string bytes = *fs.ReadFile(path);
  bytes[bytes.size() / 2] ^= 0x40;
  ASSERT_TRUE(fs.WriteFileAtomically(path, bytes).ok());
  absl::Status damaged =
      LoadRingCheckpoint(&fs, "/ck", "job", 8, kElements, 1).status();
  EXPECT_TRUE(absl::IsDataLoss(damaged)) << damaged;
  EXPECT_THAT(std::string(damaged.message()), HasSubstr(path));
  // Part 2 gone.
  WriteAll(fs, 10);
  ASSERT_TRUE(fs.DeleteFile(CheckpointPath("/ck", 2, 10)).ok());
  EXPECT_TRUE(absl::IsNotFound(
      LoadRingCheckpoint(&fs, "/ck", "job", 10, kElements, 1).status()));
}

TEST(RingCheckpointTest, PartsOfAnotherRingSizeDoNotMix) {
  InMemoryFileSystem fs;
  WriteAll(fs, 8);
  // Version 12 by a ring of 2: part 0 says 2 parts, and the stale part 2 of
  // an older checkpoint is not read.
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(
        WriteRingCheckpointPart(&fs, "/ck", Part("job", r, 2, 12)).ok());
  }
  absl::StatusOr<RingCheckpoint> loaded =
      LoadRingCheckpoint(&fs, "/ck", "job", 12, kElements, 1);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->params[kElements - 1], PartValue(0, kElements - 1, 12));
}

TEST(RingCheckpointTest, WritingAVersionDeletesThePartsOfAbandonedOnes) {
  InMemoryFileSystem fs;
  for (int64_t v : {2, 4, 6, 8}) WriteAll(fs, v);
  // Keeps the newest three of each rank.
  EXPECT_FALSE(fs.ReadFile(CheckpointPath("/ck", 0, 2)).ok());
  EXPECT_TRUE(fs.ReadFile(CheckpointPath("/ck", 0, 4)).ok());
  // The job went back to 4 and checkpoints 6 again: 8 describes a state it
  // abandoned, so it goes, and 4 stays among the kept.
  ASSERT_TRUE(
      WriteRingCheckpointPart(&fs, "/ck", Part("job", 0, kRingParts, 6)).ok());
  EXPECT_FALSE(fs.ReadFile(CheckpointPath("/ck", 0, 8)).ok());
  EXPECT_TRUE(fs.ReadFile(CheckpointPath("/ck", 0, 4)).ok());
}

// A ring that shrank from 3 members to 2: nobody writes part 2 any more.
// Part 0's writer deletes the parts of versions older than its own oldest
// kept one, and only those: the checkpoints it keeps stay complete.
TEST(RingCheckpointTest, PartZerosWriterPrunesPartsNoCheckpointUsesAnyMore) {
  InMemoryFileSystem fs;
  for (int64_t v : {2, 4}) WriteAll(fs, v);  // 3 parts
  const auto write_two = [&fs](int64_t v) {
    for (int r = 0; r < 2; ++r) {
      ASSERT_TRUE(
          WriteRingCheckpointPart(&fs, "/ck", Part("job", r, 2, v)).ok());
    }
  };
  write_two(6);
  // Part 0 keeps 2, 4 and 6: version 4's part 2 is still needed.
  EXPECT_TRUE(fs.ReadFile(CheckpointPath("/ck", 2, 2)).ok());
  EXPECT_TRUE(LoadRingCheckpoint(&fs, "/ck", "job", 2, kElements, 1).ok());
  write_two(8);  // part 0 keeps 4, 6, 8
  EXPECT_FALSE(fs.ReadFile(CheckpointPath("/ck", 2, 2)).ok());
  EXPECT_TRUE(fs.ReadFile(CheckpointPath("/ck", 2, 4)).ok());
  EXPECT_TRUE(LoadRingCheckpoint(&fs, "/ck", "job", 4, kElements, 1).ok());
  write_two(10);  // 6, 8, 10: no part 2 is left
  EXPECT_FALSE(fs.ReadFile(CheckpointPath("/ck", 2, 4)).ok());
  for (int64_t v : {6, 8, 10}) {
    EXPECT_TRUE(LoadRingCheckpoint(&fs, "/ck", "job", v, kElements, 1).ok())
        << v;
  }
}

TEST(RingCheckpointTest, AFullDiskFailsTheWriteAndLeavesNoPart) {
  InMemoryFileSystem fs;
  fs.FailWrites(absl::ResourceExhaustedError("disk full"));
  absl::Status written =
      WriteRingCheckpointPart(&fs, "/ck", Part("job", 0, kRingParts, 2))
          .status();
  EXPECT_TRUE(absl::IsResourceExhausted(written)) << written;
  EXPECT_FALSE(fs.ReadFile(CheckpointPath("/ck", 0, 2)).ok());
}

TEST(RingCheckpointTest, PipelinePartsSplitEachStageAmongItsHolders) {
  // Stage 0 [0, 4) held by ranks 0 and 2, stage 1 [4, 10) by 1 and 2 (rank
  // 2 trains alone): 4 parts, numbered stage by stage.
  const std::vector<FlatRange> stages = {{0, 4}, {4, 10}};
  const std::vector<std::vector<int>> holders = {{0, 2}, {1, 2}};
  std::vector<RingCheckpointPart> all;
  for (int rank = 0; rank < 3; ++rank) {
    absl::StatusOr<std::vector<RingCheckpointPart>> own =
        RingCheckpointPartsOf(stages, holders, rank);
    ASSERT_TRUE(own.ok()) << own.status();
    all.insert(all.end(), own->begin(), own->end());
  }
  ASSERT_EQ(all.size(), 4u);
  // Rank 0: part 0; rank 1: part 2; rank 2: parts 1 and 3.
  EXPECT_EQ(all[0].index, 0);
  EXPECT_EQ(all[0].range, (FlatRange{0, 2}));
  EXPECT_EQ(all[1].index, 2);
  EXPECT_EQ(all[1].range, (FlatRange{4, 7}));
  EXPECT_EQ(all[2].index, 1);
  EXPECT_EQ(all[2].range, (FlatRange{2, 4}));
  EXPECT_EQ(all[3].index, 3);
  EXPECT_EQ(all[3].range, (FlatRange{7, 10}));
  for (const RingCheckpointPart& p : all) EXPECT_EQ(p.parts, 4);
  InMemoryFileSystem fs;
  for (const RingCheckpointPart& p : all) {
    ASSERT_TRUE(WriteRingCheckpointPart(&fs, "/ck", PartOf("job", p, 6)).ok());
  }
  absl::StatusOr<RingCheckpoint> loaded =
      LoadRingCheckpoint(&fs, "/ck", "job", 6, kElements, 1);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  for (int64_t i = 0; i < kElements; ++i) {
    EXPECT_EQ(loaded->params[i], PartValue(0, i, 6)) << i;
    EXPECT_EQ(loaded->state[0][i], PartValue(1, i, 6)) << i;
  }
  // A plain ring is one range every member holds: ShardRange's parts.
  absl::StatusOr<std::vector<RingCheckpointPart>> plain =
      RingCheckpointPartsOf({{0, kElements}}, {{0, 1, 2}}, 1);
  ASSERT_TRUE(plain.ok());
  ASSERT_EQ(plain->size(), 1u);
  EXPECT_EQ(plain->front().range, ShardRange(kElements, 3, 1));
  // Ranges that leave a gap, or one nobody holds, are refused.
  EXPECT_TRUE(absl::IsInvalidArgument(
      RingCheckpointPartsOf({{0, 4}, {5, 10}}, holders, 0).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      RingCheckpointPartsOf(stages, {{0}, {}}, 0).status()));
}

TEST(RingCheckpointTest, PartsThatDoNotTileTheStateAreDataLoss) {
  InMemoryFileSystem fs;
  ASSERT_TRUE(
      WriteRingCheckpointPart(&fs, "/ck", PartOf("job", {0, 2, {0, 5}}, 4))
          .ok());
  ASSERT_TRUE(
      WriteRingCheckpointPart(&fs, "/ck", PartOf("job", {1, 2, {6, 10}}, 4))
          .ok());
  absl::Status gap =
      LoadRingCheckpoint(&fs, "/ck", "job", 4, kElements, 1).status();
  EXPECT_TRUE(absl::IsDataLoss(gap)) << gap;
  EXPECT_THAT(std::string(gap.message()), HasSubstr("do not tile"));
}

// --init-from of a ring job's checkpoint directory: no coordinator says
// which version is complete, so the newest whose parts are all there and
// sound is taken, whichever job wrote it.
TEST(RingCheckpointTest, TheNewestCompleteCheckpointIsFoundWithoutItsJob) {
  InMemoryFileSystem fs;
  EXPECT_FALSE(HasRingCheckpoint(&fs, "/ck"));
  EXPECT_TRUE(absl::IsNotFound(
      LoadNewestRingCheckpoint(&fs, "/ck", kElements).status()));
  WriteAll(fs, 8);
  WriteAll(fs, 10);
  // Version 12 was cut short: its part 2 was never written.
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(
        WriteRingCheckpointPart(&fs, "/ck", Part("job", r, kRingParts, 12))
            .ok());
  }
  EXPECT_TRUE(HasRingCheckpoint(&fs, "/ck"));
  absl::StatusOr<RingCheckpoint> newest =
      LoadNewestRingCheckpoint(&fs, "/ck", kElements);
  ASSERT_TRUE(newest.ok()) << newest.status();
  EXPECT_EQ(newest->version, 10);
  for (int64_t i = 0; i < kElements; ++i) {
    EXPECT_EQ(newest->params[i], PartValue(0, i, 10)) << i;
  }
  ASSERT_EQ(newest->state.size(), 1u);
  // A model of another size is refused, not passed over.
  const absl::Status other_size =
      LoadNewestRingCheckpoint(&fs, "/ck", kElements + 1).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(other_size)) << other_size;
  // With every complete version damaged, none is found: NOT_FOUND saying
  // why the newest was not taken.
  for (int64_t v : {8, 10}) {
    ASSERT_TRUE(fs.DeleteFile(CheckpointPath("/ck", 1, v)).ok());
  }
  const absl::Status none =
      LoadNewestRingCheckpoint(&fs, "/ck", kElements).status();
  EXPECT_TRUE(absl::IsNotFound(none)) << none;
  EXPECT_THAT(std::string(none.message()),
              HasSubstr("no complete ring checkpoint in /ck"));
}

TEST(RingCheckpointTest, TablesRideInPartZeroAlone) {
  InMemoryFileSystem fs;
  TableCheckpoint table;
  table.table = 0;
  table.row_floats = 2;
  table.ids = {3, 7};
  table.last_seen = {1, 2};
  table.values = {0.5f, 1.5f, 2.5f, 3.5f};
  table.counters = TableCounters{2, 2, 0, 0, 0};
  ShardCheckpoint first = Part("job", 0, kRingParts, 8);
  first.tables = {table};
  ASSERT_TRUE(WriteRingCheckpointPart(&fs, "/ck", first).ok());
  for (int r = 1; r < kRingParts; ++r) {
    ASSERT_TRUE(
        WriteRingCheckpointPart(&fs, "/ck", Part("job", r, kRingParts, 8))
            .ok());
  }
  absl::StatusOr<RingCheckpoint> loaded =
      LoadRingCheckpoint(&fs, "/ck", "job", 8, kElements, 1);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  ASSERT_EQ(loaded->tables.size(), 1u);
  EXPECT_THAT(loaded->tables[0].ids, ElementsAreArray(table.ids));
  EXPECT_THAT(loaded->tables[0].values, ElementsAreArray(table.values));
  EXPECT_EQ(loaded->tables[0].counters, table.counters);
  // Tables in another part: the parts were not written by ferry's members.
  ShardCheckpoint stray = Part("job", 2, kRingParts, 8);
  stray.tables = {table};
  ASSERT_TRUE(WriteRingCheckpointPart(&fs, "/ck", stray).ok());
  const absl::Status refused =
      LoadRingCheckpoint(&fs, "/ck", "job", 8, kElements, 1).status();
  EXPECT_TRUE(absl::IsDataLoss(refused)) << refused;
  EXPECT_THAT(std::string(refused.message()), HasSubstr("only part 0"));
}

}  // namespace
}  // namespace ferry
