// Checkpoints with embedding tables (format version 2).
#include "common/checkpoint_tables.h"

#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "common/checkpoint_io.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/checkpoint_crc.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;

std::vector<TableCheckpoint> Tables() {
  TableCheckpoint a;
  a.table = 0;
  a.row_floats = 3;
  a.ids = {7, uint64_t{1} << 40};
  a.last_seen = {4, 9};
  a.values = {1, 2, 3, 4, 5, 6};
  a.pending_ids = {11};
  a.pending_counts = {2};
  a.pending_last_seen = {8};
  TableCheckpoint b;  // no rows, no counters
  b.table = 5;
  b.row_floats = 1;
  return {a, b};
}

ShardCheckpoint WithTables() {
  ShardCheckpoint c;
  c.identity = CheckpointIdentity{"job", 0, 2, 0, 2};
  c.version = 3;
  c.steps_applied = 3;
  c.params = {0.5f, -0.5f};
  c.tables = Tables();
  return c;
}

bool SameTables(const std::vector<TableCheckpoint>& x,
                const std::vector<TableCheckpoint>& y) {
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i) {
    const TableCheckpoint &a = x[i], &b = y[i];
    if (a.table != b.table || a.row_floats != b.row_floats || a.ids != b.ids ||
        a.last_seen != b.last_seen || a.values != b.values ||
        a.pending_ids != b.pending_ids ||
        a.pending_counts != b.pending_counts ||
        a.pending_last_seen != b.pending_last_seen) {
      return false;
    }
  }
  return true;
}

void FixCrc(std::string& bytes) { testing::FixCheckpointCrc(bytes); }

TEST(CheckpointTables, RoundTripAsFormatVersion2) {
  const ShardCheckpoint c = WithTables();
  const std::string bytes = EncodeCheckpoint(c);
  uint32_t format = 0;
  std::memcpy(&format, bytes.data() + 8, 4);
  EXPECT_EQ(format, kCheckpointFormatWithTables);
  auto back = DecodeCheckpoint(bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->params, c.params);
  EXPECT_TRUE(SameTables(back->tables, c.tables));
  // Without tables a shard still writes version 1.
  ShardCheckpoint dense = c;
  dense.tables.clear();
  const std::string v1 = EncodeCheckpoint(dense);
  std::memcpy(&format, v1.data() + 8, 4);
  EXPECT_EQ(format, kCheckpointFormatVersion);
}

TEST(CheckpointTables, EveryTruncationOrExtraByteIsDataLoss) {
  const std::string bytes = EncodeCheckpoint(WithTables());
  // Cut the section short but keep a valid CRC: the section's own checks
  // must catch it.
  for (size_t cut = 1; cut < 120; ++cut) {
    std::string shorter = bytes.substr(0, bytes.size() - 4 - cut) + "crc!";
    FixCrc(shorter);
    const absl::Status status = DecodeCheckpoint(shorter).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << cut << status;
  }
  std::string longer = bytes.substr(0, bytes.size() - 4) + "xyz" + "crc!";
  FixCrc(longer);
  EXPECT_THAT(DecodeCheckpoint(longer).status().message(),
              HasSubstr("bytes after the last table"));
}

TEST(CheckpointTables, Version2WithoutTablesIsRefused) {
  // Found by tests/fuzz/checkpoint_reader_fuzz (a decoded file must
  // re-encode to its bytes): version 2 with a table count of 0 would read
  // as a checkpoint that writes itself as version 1.
  ShardCheckpoint c = WithTables();
  c.tables.clear();
  std::string bytes = EncodeCheckpoint(c);
  bytes[8] = 2;
  bytes.insert(bytes.size() - 4, std::string(4, '\0'));  // 0 tables
  FixCrc(bytes);
  EXPECT_THAT(DecodeCheckpoint(bytes).status().message(),
              HasSubstr("version 2 without embedding tables"));
}

TEST(CheckpointTables, HugeClaimedCountsAreRefusedBeforeAllocating) {
  std::string section;
  auto put = [&](auto v) {
    section.append(reinterpret_cast<const char*>(&v), sizeof(v));
  };
  put(uint32_t{1});                               // one table
  put(int32_t{0});                                // table 0
  put(uint32_t{16});                              // 16 floats per row
  put(std::numeric_limits<uint64_t>::max() / 2);  // rows
  auto decoded = DecodeTables(section);
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(decoded.status().message(), HasSubstr("does not hold"));
  section.clear();
  put(uint32_t{kMaxCheckpointTables + 1});
  EXPECT_THAT(DecodeTables(section).status().message(), HasSubstr("at most"));
  section.clear();
  put(uint32_t{1});
  put(int32_t{0});
  put(uint32_t{0});  // zero floats per row
  put(uint64_t{0});
  EXPECT_THAT(DecodeTables(section).status().message(),
              HasSubstr("0 floats per row"));
}

TEST(CheckpointTables, InconsistentTablesAreNotWritten) {
  std::vector<TableCheckpoint> tables = Tables();
  EXPECT_TRUE(ValidateTables(tables).ok());
  tables[0].values.pop_back();
  EXPECT_THAT(ValidateTables(tables).message(), HasSubstr("embedding table 0"));
  tables = Tables();
  tables[0].pending_counts.clear();
  EXPECT_FALSE(ValidateTables(tables).ok());
  tables = Tables();
  tables[1].row_floats = 0;
  EXPECT_FALSE(ValidateTables(tables).ok());
}

}  // namespace
}  // namespace ferry
