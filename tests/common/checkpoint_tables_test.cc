// Checkpoints with embedding tables (format versions 2 and 3).
#include "common/checkpoint_tables.h"

#include <stdlib.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "common/checkpoint_io.h"
#include "common/file_system.h"
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
        a.pending_last_seen != b.pending_last_seen ||
        a.counters != b.counters) {
      return false;
    }
  }
  return true;
}

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

// The tables with their event counters (what a shard writes now).
ShardCheckpoint WithCounters() {
  ShardCheckpoint c = WithTables();
  c.tables[0].counters = TableCounters{5, 3, 7, 1, 2};
  c.tables[1].counters = TableCounters{};
  c.tables[1].counters->rows_created = int64_t{1} << 40;
  return c;
}

TEST(CheckpointTables, CountersMakeFormatVersion3) {
  const ShardCheckpoint c = WithCounters();
  const std::string bytes = EncodeCheckpoint(c);
  uint32_t format = 0;
  std::memcpy(&format, bytes.data() + 8, 4);
  EXPECT_EQ(format, kCheckpointFormatWithTableCounters);
  // 5 counters of 8 bytes per table more than version 2.
  EXPECT_EQ(bytes.size(), EncodeCheckpoint(WithTables()).size() + 2 * 40);
  auto back = DecodeCheckpoint(bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(SameTables(back->tables, c.tables));
  EXPECT_EQ(back->tables[0].counters, (TableCounters{5, 3, 7, 1, 2}));
  // Canonical both ways: each version re-encodes to its own bytes.
  EXPECT_EQ(EncodeCheckpoint(*back), bytes);
  const std::string v2 = EncodeCheckpoint(WithTables());
  auto old = DecodeCheckpoint(v2);
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_FALSE(old->tables[0].counters.has_value());
  EXPECT_EQ(EncodeCheckpoint(*old), v2);
  // Cut inside the counters (CRC fixed): the section's checks catch it.
  for (size_t cut = 1; cut <= 40; ++cut) {
    std::string shorter = bytes.substr(0, bytes.size() - 4 - cut) + "crc!";
    testing::FixCheckpointCrc(shorter);
    EXPECT_EQ(DecodeCheckpoint(shorter).status().code(),
              absl::StatusCode::kDataLoss)
        << cut;
  }
}

TEST(CheckpointTables, CountersOnSomeTablesOnlyAreRefused) {
  ShardCheckpoint c = WithCounters();
  c.tables[1].counters.reset();
  EXPECT_THAT(ValidateTables(c.tables).message(),
              HasSubstr("event counters absent"));
}

// A table read in place as several runs (a live table's storage blocks),
// with its pending counters in one order on every pass.
class RunsSource final : public TablePartSource {
 public:
  RunsSource(const TableCheckpoint* part, size_t run_rows, bool drift = false)
      : part_(part), run_rows_(run_rows), drift_(drift) {}
  int32_t table() const override { return part_->table; }
  uint32_t row_floats() const override { return part_->row_floats; }
  uint64_t rows() const override { return part_->ids.size(); }
  uint64_t pending() const override { return part_->pending_ids.size(); }
  std::optional<TableCounters> counters() const override {
    return part_->counters;
  }
  void ForEachRun(
      const std::function<void(const TableRowRun&)>& fn) const override {
    const TableCheckpoint& p = *part_;
    // drift_: the third pass sees one row fewer (a table changed while read).
    const size_t rows = p.ids.size() - (drift_ && ++passes_ == 3 ? 1 : 0);
    for (size_t first = 0; first < rows; first += run_rows_) {
      const size_t n = std::min(run_rows_, rows - first);
      fn(TableRowRun{absl::MakeConstSpan(p.ids).subspan(first, n),
                     absl::MakeConstSpan(p.last_seen).subspan(first, n),
                     absl::MakeConstSpan(p.values).subspan(first * p.row_floats,
                                                           n * p.row_floats)});
    }
  }
  void ForEachPending(const std::function<void(uint64_t, int32_t, int64_t)>& fn)
      const override {
    for (size_t i = 0; i < part_->pending_ids.size(); ++i) {
      fn(part_->pending_ids[i], part_->pending_counts[i],
         part_->pending_last_seen[i]);
    }
  }

 private:
  const TableCheckpoint* part_;
  size_t run_rows_;
  bool drift_;
  mutable int passes_ = 0;
};

TEST(CheckpointTables, RunsGiveTheBytesOfTheWholeTables) {
  ShardCheckpoint c = WithCounters();
  // Enough rows and counters for several runs and pending batches (8192).
  TableCheckpoint& t = c.tables[0];
  for (uint64_t i = 0; i < 20000; ++i) {
    t.ids.push_back(1000 + i);
    t.last_seen.push_back(static_cast<int64_t>(i % 7));
    for (int k = 0; k < 3; ++k) t.values.push_back(0.5f * i + k);
    t.pending_ids.push_back(900000 + i);
    t.pending_counts.push_back(1);
    t.pending_last_seen.push_back(static_cast<int64_t>(i));
  }
  ASSERT_TRUE(ValidateTables(c.tables).ok());
  const std::string whole = EncodeCheckpoint(c);
  CheckpointDenseView dense;
  dense.identity = c.identity;
  dense.version = c.version;
  dense.steps_applied = c.steps_applied;
  dense.params = c.params;
  for (size_t run_rows : {size_t{1}, size_t{7}, size_t{16384}}) {
    RunsSource a(&c.tables[0], run_rows), b(&c.tables[1], run_rows);
    const TablePartSource* sources[] = {&a, &b};
    std::string streamed;
    StringByteSink sink(&streamed);
    ASSERT_TRUE(EncodeCheckpointTo(dense, sources, sink).ok());
    EXPECT_TRUE(streamed == whole) << "runs of " << run_rows;
  }
  // A table that changes between passes is refused, not written wrong.
  RunsSource drifting(&c.tables[0], 100, /*drift=*/true), b(&c.tables[1], 1);
  const TablePartSource* sources[] = {&drifting, &b};
  std::string streamed;
  StringByteSink sink(&streamed);
  const absl::Status status = EncodeCheckpointTo(dense, sources, sink);
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal) << status;
  EXPECT_THAT(status.message(), HasSubstr("changed while it was written"));
}

TEST(CheckpointTables, EveryTruncationOrExtraByteIsDataLoss) {
  const std::string bytes = EncodeCheckpoint(WithTables());
  // Cut the section short but keep a valid CRC: the section's own checks
  // must catch it.
  for (size_t cut = 1; cut < 120; ++cut) {
    std::string shorter = bytes.substr(0, bytes.size() - 4 - cut) + "crc!";
    testing::FixCheckpointCrc(shorter);
    const absl::Status status = DecodeCheckpoint(shorter).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << cut << status;
  }
  std::string longer = bytes.substr(0, bytes.size() - 4) + "xyz" + "crc!";
  testing::FixCheckpointCrc(longer);
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
  testing::FixCheckpointCrc(bytes);
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

TEST(CheckpointTables, AViewReadsInPlaceAtAnyAlignment) {
  ShardCheckpoint c = WithCounters();
  // Odd lengths before every column: the file's offsets are not aligned.
  c.identity.job_id = "jobxy";
  const std::string bytes = EncodeCheckpoint(c);
  std::vector<absl::string_view> read;
  absl::StatusOr<CheckpointView> view = DecodeCheckpointView(
      bytes, [&](absl::string_view part) { read.push_back(part); });
  ASSERT_TRUE(view.ok()) << view.status();
  // The checksum pass handed over every byte before the CRC, in order.
  ASSERT_FALSE(read.empty());
  EXPECT_EQ(read.front().data(), bytes.data());
  size_t total = 0;
  for (absl::string_view part : read) {
    EXPECT_EQ(part.data(), bytes.data() + total);
    total += part.size();
  }
  EXPECT_EQ(total, bytes.size() - 4);
  // Columns point into the bytes; their values are the checkpoint's.
  const TableCheckpointView& t = view->tables[0];
  const absl::string_view ids = t.ids.bytes(0, t.ids.size());
  EXPECT_GE(ids.data(), bytes.data());
  EXPECT_LE(ids.data() + ids.size(), bytes.data() + bytes.size());
  EXPECT_NE(reinterpret_cast<uintptr_t>(ids.data()) % alignof(uint64_t), 0u);
  EXPECT_EQ(t.ids[1], c.tables[0].ids[1]);
  EXPECT_EQ(t.values[5], 6.0f);
  const ShardCheckpoint copy = view->Copy();
  EXPECT_EQ(copy.params, c.params);
  EXPECT_EQ(copy.version, c.version);
  EXPECT_TRUE(SameTables(copy.tables, c.tables));
  // A corrupt file is refused as DecodeCheckpoint refuses it.
  std::string bad = bytes;
  bad[bad.size() / 2] ^= 1;
  EXPECT_EQ(DecodeCheckpointView(bad).status().code(),
            absl::StatusCode::kDataLoss);
}

TEST(CheckpointTables, MappedCheckpointsAreWhatLoadReads) {
  std::string root = ::testing::TempDir() + "/ferry-map-XXXXXX";
  ASSERT_NE(mkdtemp(root.data()), nullptr);
  ShardCheckpoint c = WithCounters();
  CheckpointStore store(PosixFileSystem(), root, c.identity);
  ASSERT_TRUE(store.Write(c).ok());
  c.version = 4;
  c.params = {1.0f, 2.0f};
  ASSERT_TRUE(store.Write(c).ok());
  absl::StatusOr<MappedCheckpoint> newest = store.MapNewest();
  ASSERT_TRUE(newest.ok()) << newest.status();
  EXPECT_EQ(newest->path, CheckpointPath(root, 0, 4));
  EXPECT_EQ(newest->view.Copy().params, c.params);
  EXPECT_TRUE(SameTables(newest->view.Copy().tables, c.tables));
  absl::StatusOr<MappedCheckpoint> v3 = store.MapVersion(3);
  ASSERT_TRUE(v3.ok()) << v3.status();
  EXPECT_EQ(v3->view.version, 3);
  EXPECT_EQ(store.MapVersion(9).status().code(), absl::StatusCode::kNotFound);
  // A corrupt newest is skipped, as LoadNewest skips it.
  std::string bytes = *PosixFileSystem()->ReadFile(newest->path);
  bytes[bytes.size() / 2] ^= 1;
  ASSERT_TRUE(PosixFileSystem()->WriteFileAtomically(newest->path, bytes).ok());
  // The mapping already made still reads the old file's bytes.
  EXPECT_EQ(newest->view.Copy().params, c.params);
  absl::StatusOr<MappedCheckpoint> skipped = store.MapNewest();
  ASSERT_TRUE(skipped.ok()) << skipped.status();
  EXPECT_EQ(skipped->view.version, 3);
  EXPECT_EQ(store.MapVersion(4).status().code(), absl::StatusCode::kDataLoss);
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace ferry
