// MergedTableSources (ps/merged_tables.h): shards' table parts read in
// place and written as one table section.
#include "ps/merged_tables.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/byte_sink.h"
#include "common/status_macros.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

// Table `table` with `rows` rows of `floats` floats and `pending` admission
// counters, its ids starting at `first_id`.
TableCheckpoint Part(int32_t table, uint32_t floats, size_t rows,
                     size_t pending, uint64_t first_id,
                     std::optional<TableCounters> counters) {
  TableCheckpoint t;
  t.table = table;
  t.row_floats = floats;
  for (size_t i = 0; i < rows; ++i) {
    t.ids.push_back(first_id + i);
    t.last_seen.push_back(static_cast<int64_t>(i % 97));
    for (uint32_t f = 0; f < floats; ++f) {
      t.values.push_back(static_cast<float>(first_id + i) + 0.25f * f);
    }
  }
  for (size_t i = 0; i < pending; ++i) {
    t.pending_ids.push_back(first_id + rows + i);
    t.pending_counts.push_back(static_cast<int32_t>(1 + i % 3));
    t.pending_last_seen.push_back(static_cast<int64_t>(i));
  }
  t.counters = counters;
  return t;
}

template <typename T>
void Append(std::vector<T>& to, const std::vector<T>& from) {
  to.insert(to.end(), from.begin(), from.end());
}

absl::StatusOr<std::vector<TableCheckpoint>> WriteAndRead(
    const MergedTableSources& merged) {
  std::string section;
  StringByteSink sink(&section);
  RETURN_IF_ERROR(WriteTables(merged.pointers(), true, sink));
  return DecodeTables(section, /*with_counters=*/true);
}

// Three shards, one with more rows than a run copies at once (4096) and
// one with none: the section is the parts concatenated per table, the
// counters summed, and every row byte of every part was released.
TEST(MergedTableSources, WriteTheShardsPartsOneAfterTheOther) {
  const std::vector<std::vector<TableCheckpoint>> shards = {
      {Part(0, 3, 9000, 5, 1000, TableCounters{1, 2, 3, 4, 5}),
       Part(7, 2, 10, 0, 50, TableCounters{1, 1, 1, 1, 1})},
      {Part(0, 3, 0, 2, 900000, TableCounters{10, 20, 30, 40, 50}),
       Part(7, 2, 4097, 1, 70000, TableCounters{2, 2, 2, 2, 2})},
      {Part(0, 3, 17, 0, 800000, TableCounters{100, 0, 0, 0, 0}),
       Part(7, 2, 1, 0, 90000, TableCounters{0, 0, 0, 0, 3})}};
  std::vector<std::vector<TableCheckpointView>> views;
  std::vector<size_t> row_bytes(shards.size(), 0), released(shards.size(), 0);
  std::vector<BytesDone> release;
  for (size_t s = 0; s < shards.size(); ++s) {
    views.push_back(ViewsOf(shards[s]));
    for (const TableCheckpoint& t : shards[s]) {
      row_bytes[s] += t.ids.size() * (8 + 8) + t.values.size() * 4;
    }
    // Each shard's releaser is told only of that shard's bytes.
    release.push_back([&, s](absl::string_view part) {
      bool inside = false;
      for (const TableCheckpoint& t : shards[s]) {
        for (const absl::string_view column :
             {TableCheckpointView::Of(t).ids.bytes(0, t.ids.size()),
              TableCheckpointView::Of(t).last_seen.bytes(0, t.ids.size()),
              TableCheckpointView::Of(t).values.bytes(0, t.values.size())}) {
          inside = inside ||
                   (part.data() >= column.data() &&
                    part.data() + part.size() <= column.data() + column.size());
        }
      }
      EXPECT_TRUE(inside) << "shard " << s;
      released[s] += part.size();
    });
  }
  auto merged = MergedTableSources::Create(std::move(views), release);
  ASSERT_TRUE(merged.ok()) << merged.status();
  auto back = WriteAndRead(**merged);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), 2u);
  for (size_t t = 0; t < 2; ++t) {
    TableCheckpoint want = shards[0][t];
    TableCounters sum = *want.counters;
    for (size_t s = 1; s < shards.size(); ++s) {
      const TableCheckpoint& part = shards[s][t];
      Append(want.ids, part.ids);
      Append(want.last_seen, part.last_seen);
      Append(want.values, part.values);
      Append(want.pending_ids, part.pending_ids);
      Append(want.pending_counts, part.pending_counts);
      Append(want.pending_last_seen, part.pending_last_seen);
      sum.rows_created += part.counters->rows_created;
      sum.ids_admitted += part.counters->ids_admitted;
      sum.updates_dropped += part.counters->updates_dropped;
      sum.evicted_ttl += part.counters->evicted_ttl;
      sum.evicted_memory += part.counters->evicted_memory;
    }
    const TableCheckpoint& got = (*back)[t];
    EXPECT_EQ(got.table, want.table);
    EXPECT_EQ(got.row_floats, want.row_floats);
    EXPECT_EQ(got.ids, want.ids) << t;
    EXPECT_EQ(got.last_seen, want.last_seen) << t;
    EXPECT_EQ(got.values, want.values) << t;
    EXPECT_EQ(got.pending_ids, want.pending_ids) << t;
    EXPECT_EQ(got.pending_counts, want.pending_counts) << t;
    EXPECT_EQ(got.pending_last_seen, want.pending_last_seen) << t;
    ASSERT_TRUE(got.counters.has_value());
    EXPECT_EQ(*got.counters, sum) << t;
  }
  // The writer passes over the rows once per column; each pass releases
  // what it read.
  for (size_t s = 0; s < shards.size(); ++s) {
    EXPECT_GE(released[s], row_bytes[s]) << s;
  }
  EXPECT_GT(released[0], 0u);
  // One releaser per shard, or none.
  release.pop_back();
  std::vector<std::vector<TableCheckpointView>> again;
  for (const auto& shard : shards) again.push_back(ViewsOf(shard));
  EXPECT_TRUE(absl::IsInvalidArgument(
      MergedTableSources::Create(std::move(again), release).status()));
}

TEST(MergedTableSources, DropTheCountersUnlessEveryShardHasThem) {
  const std::vector<TableCheckpoint> a = {
      Part(0, 1, 3, 0, 1, TableCounters{1, 1, 1, 1, 1})};
  const std::vector<TableCheckpoint> b = {Part(0, 1, 2, 0, 9, std::nullopt)};
  auto merged = MergedTableSources::Create({ViewsOf(a), ViewsOf(b)});
  ASSERT_TRUE(merged.ok()) << merged.status();
  ASSERT_EQ((*merged)->pointers().size(), 1u);
  EXPECT_FALSE((*merged)->pointers()[0]->counters().has_value());
  EXPECT_EQ((*merged)->pointers()[0]->rows(), 5u);
}

TEST(MergedTableSources, RefuseShardsWithOtherTables) {
  const std::vector<TableCheckpoint> a = {Part(0, 2, 3, 0, 1, std::nullopt),
                                          Part(1, 2, 3, 0, 1, std::nullopt)};
  std::vector<TableCheckpoint> other = a;
  other[1].table = 99;
  auto renamed = MergedTableSources::Create({ViewsOf(a), ViewsOf(other)});
  ASSERT_TRUE(absl::IsInvalidArgument(renamed.status()));
  EXPECT_NE(renamed.status().message().find("table 99"), std::string::npos)
      << renamed.status();
  other = a;
  other[0] = Part(0, 3, 3, 0, 1, std::nullopt);
  EXPECT_TRUE(absl::IsInvalidArgument(
      MergedTableSources::Create({ViewsOf(a), ViewsOf(other)}).status()));
  other = a;
  other.pop_back();
  auto fewer = MergedTableSources::Create({ViewsOf(a), ViewsOf(other)});
  ASSERT_TRUE(absl::IsInvalidArgument(fewer.status()));
  EXPECT_NE(fewer.status().message().find("shard 1 holds 1 tables"),
            std::string::npos)
      << fewer.status();
}

}  // namespace
}  // namespace ferry
