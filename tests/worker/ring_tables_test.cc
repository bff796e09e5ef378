#include "worker/ring_tables.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "common/file_system.h"
#include "common/ring_checkpoint.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ring/in_memory_ring.h"
#include "ring/ring_bytes.h"
#include "tests/ring/ring_test_fixture.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kPiece = 64;  // bytes: several pieces per payload
const std::vector<int32_t> kDims = {2, 3};

EmbeddingOptions Options() {
  EmbeddingOptions o;
  o.optimizer.kind = RowOptimizerKind::kAdagrad;
  o.optimizer.lr = 0.1f;
  o.admit_count = 2;  // so that counters are exchanged and undone too
  return o;
}

std::unique_ptr<RingTables> Make() {
  auto t = RingTables::Create(kDims, Options(), /*seed=*/9);
  EXPECT_TRUE(t.ok()) << t.status();
  return *std::move(t);
}

absl::Time Soon() { return absl::Now() + absl::Seconds(10); }

// Rank r's rows of step s: ids shared between ranks and ids of its own.
std::vector<SparseRows> RowsOf(int r, int s) {
  SparseRows t0{0, {1, 2, uint64_t(100 + r)}, {}};
  for (size_t i = 0; i < t0.ids.size() * 2; ++i) {
    t0.grads.push_back(0.5f * (r + 1) + 0.25f * s - 0.1f * i);
  }
  SparseRows t1{1, {7, uint64_t(200 + s)}, std::vector<float>(6, 1.0f + r)};
  return {t0, t1};
}

// Applies step `s` on every member of `tables` over `hub`, each rank's
// RowsOf(r, s), `samples` samples in all; returns the statuses by rank.
std::vector<absl::Status> Step(InMemoryRingHub& hub,
                               std::vector<std::unique_ptr<RingTables>>& tables,
                               int64_t op, int s, int64_t samples = 8) {
  return testing::RunOnAllRanks(hub.size(), [&](int r) {
    if (absl::Status set = tables[r]->SetStepRows(RowsOf(r, s)); !set.ok()) {
      return set;
    }
    return tables[r]->ApplyStep(*hub.transport(r), op, s, samples, kPiece,
                                Soon());
  });
}

// The same rows, optimizer state, counters; values equal bitwise, or
// within `tolerance` when it is > 0.
void ExpectSameTables(const SparseStore& a, const SparseStore& b,
                      float tolerance = 0) {
  const std::vector<TableCheckpoint> x = a.Export(), y = b.Export();
  ASSERT_EQ(x.size(), y.size());
  for (size_t t = 0; t < x.size(); ++t) {
    // Compared as id -> row maps: the storage order may differ.
    std::map<uint64_t, std::vector<float>> rx, ry;
    for (size_t i = 0; i < x[t].ids.size(); ++i) {
      rx[x[t].ids[i]].assign(x[t].values.begin() + i * x[t].row_floats,
                             x[t].values.begin() + (i + 1) * x[t].row_floats);
    }
    for (size_t i = 0; i < y[t].ids.size(); ++i) {
      ry[y[t].ids[i]].assign(y[t].values.begin() + i * y[t].row_floats,
                             y[t].values.begin() + (i + 1) * y[t].row_floats);
    }
    if (tolerance == 0) {
      EXPECT_EQ(rx, ry) << "table " << t;
    } else {
      ASSERT_EQ(rx.size(), ry.size()) << "table " << t;
      for (const auto& [id, row] : rx) {
        ASSERT_TRUE(ry.contains(id)) << "table " << t << " id " << id;
        for (size_t k = 0; k < row.size(); ++k) {
          EXPECT_NEAR(row[k], ry[id][k], tolerance)
              << t << " " << id << " " << k;
        }
      }
    }
    EXPECT_EQ(x[t].pending_ids.size(), y[t].pending_ids.size()) << t;
    EXPECT_EQ(x[t].counters, y[t].counters) << t;
  }
}

TEST(RingTables, EveryMemberAppliesTheSameStepAsOneStoreWould) {
  constexpr int kRanks = 3;
  InMemoryRingHub hub(kRanks);
  std::vector<std::unique_ptr<RingTables>> tables;
  for (int r = 0; r < kRanks; ++r) tables.push_back(Make());
  // One store applying the ranks' contributions in rank order: the
  // reference every member must equal bitwise.
  auto reference =
      SparseStore::Create(MakeSparseStoreConfig(Options(), kDims, 9));
  ASSERT_TRUE(reference.ok());
  for (int s = 0; s < 3; ++s) {
    const auto statuses = Step(hub, tables, /*op=*/s, s);
    for (int r = 0; r < kRanks; ++r)
      ASSERT_TRUE(statuses[r].ok()) << statuses[r];
    std::vector<std::vector<SparseRows>> rows;
    for (int r = 0; r < kRanks; ++r) rows.push_back(RowsOf(r, s));
    std::vector<const std::vector<SparseRows>*> order;
    for (const auto& c : rows) order.push_back(&c);
    ASSERT_TRUE((*reference)->ApplyStep(order, 8, s).ok());
  }
  // Ids 1 and 2 reached the admission count at the first step (three
  // sightings), own ids were seen once per step.
  EXPECT_GT(tables[0]->store().Stats().total.rows, 0);
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(tables[r]->Digest(), tables[0]->Digest()) << "rank " << r;
    ExpectSameTables(tables[r]->store(), **reference);
  }
}

TEST(RingTables, RollBackUndoesTheNewestStepsAndNoMore) {
  InMemoryRingHub hub(2);
  std::vector<std::unique_ptr<RingTables>> tables;
  for (int r = 0; r < 2; ++r) tables.push_back(Make());
  std::vector<uint64_t> digests;
  for (int s = 0; s < 5; ++s) {
    digests.push_back(tables[0]->Digest());
    const auto statuses = Step(hub, tables, s, s);
    ASSERT_TRUE(statuses[0].ok() && statuses[1].ok());
  }
  // Undo is kept for the last kKeptSteps (3) steps: 2, 3 and 4.
  EXPECT_EQ(tables[0]->RollBackTo(5, 1).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(tables[0]->RollBackTo(4, 3).code(),
            absl::StatusCode::kFailedPrecondition);  // it has 5 steps, not 4
  const uint64_t now = tables[0]->Digest();
  EXPECT_TRUE(tables[0]->RollBackTo(5, 5).ok());
  EXPECT_EQ(tables[0]->Digest(), now);
  ASSERT_TRUE(tables[0]->RollBackTo(5, 3).ok());
  EXPECT_EQ(tables[0]->Digest(), digests[3]);
  ASSERT_TRUE(tables[0]->RollBackTo(3, 2).ok());
  EXPECT_EQ(tables[0]->Digest(), digests[2]);
  // Replaying the undone steps on the rolled-back member alone (a ring of
  // one, its own rows only) is a different history: the other member's
  // rows are missing, so the digests differ.
  InMemoryRingHub one(1);
  ASSERT_TRUE(tables[0]->SetStepRows(RowsOf(0, 2)).ok());
  ASSERT_TRUE(
      tables[0]->ApplyStep(*one.transport(0), 0, 2, 4, kPiece, Soon()).ok());
  EXPECT_NE(tables[0]->Digest(), digests[3]);
}

TEST(RingTables, BroadcastGivesANewMemberRankZerosTables) {
  InMemoryRingHub pair(2);
  std::vector<std::unique_ptr<RingTables>> tables;
  for (int r = 0; r < 2; ++r) tables.push_back(Make());
  for (int s = 0; s < 2; ++s) {
    const auto statuses = Step(pair, tables, s, s);
    ASSERT_TRUE(statuses[0].ok() && statuses[1].ok());
  }
  // A new ring: rank 0 of the old one, a member that just joined.
  InMemoryRingHub ring(2);
  std::vector<std::unique_ptr<RingTables>> members;
  members.push_back(std::move(tables[0]));
  members.push_back(Make());
  ASSERT_NE(members[0]->Digest(), members[1]->Digest());
  std::vector<bool> sent(2);
  const auto statuses = testing::RunOnAllRanks(2, [&](int r) {
    auto s = members[r]->Broadcast(*ring.transport(r), 0, 0, kPiece, Soon());
    if (s.ok()) sent[r] = *s;
    return s.status();
  });
  ASSERT_TRUE(statuses[0].ok()) << statuses[0];
  ASSERT_TRUE(statuses[1].ok()) << statuses[1];
  EXPECT_TRUE(sent[0] && sent[1]);
  EXPECT_EQ(members[1]->Digest(), members[0]->Digest());
  ExpectSameTables(members[1]->store(), members[0]->store());
  // The receiver's history is gone: it cannot roll back past the ring's
  // start.
  EXPECT_EQ(members[1]->RollBackTo(2, 1).code(),
            absl::StatusCode::kFailedPrecondition);
  // Both go on in step.
  const auto next = Step(ring, members, 1, 2);
  ASSERT_TRUE(next[0].ok() && next[1].ok());
  EXPECT_EQ(members[1]->Digest(), members[0]->Digest());

  // The ring re-formed with the same two members (say a step was aborted):
  // their digests agree, so only the digests travel, not the tables.
  InMemoryRingHub again(2);
  const auto same = testing::RunOnAllRanks(2, [&](int r) {
    auto s = members[r]->Broadcast(*again.transport(r), 0, 0, kPiece, Soon());
    if (s.ok()) sent[r] = *s;
    return s.status();
  });
  ASSERT_TRUE(same[0].ok() && same[1].ok());
  EXPECT_FALSE(sent[0] || sent[1]);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(again.bytes_sent(r), 8 + 8) << r;  // a header and a digest
  }
  // The receiver kept its history: it can still roll back the last step.
  EXPECT_TRUE(members[1]->RollBackTo(3, 2).ok());
}

TEST(RingTables, ARingCheckpointsPartZeroRestoresTheTablesExactly) {
  InMemoryRingHub pair(2);
  std::vector<std::unique_ptr<RingTables>> tables;
  for (int r = 0; r < 2; ++r) tables.push_back(Make());
  for (int s = 0; s < 3; ++s) {
    const auto statuses = Step(pair, tables, s, s);
    ASSERT_TRUE(statuses[0].ok() && statuses[1].ok());
  }
  // Part 0 of a 2-part checkpoint of a 4-element dense state carries the
  // tables; part 1 only its dense range.
  InMemoryFileSystem fs;
  for (int part = 0; part < 2; ++part) {
    ShardCheckpoint p;
    p.identity = RingCheckpointPartIdentity("job", part, 2, 4);
    p.version = p.steps_applied = 3;
    p.params.assign(2, 1.0f);
    if (part == 0) p.tables = tables[0]->store().Export();
    ASSERT_TRUE(WriteRingCheckpointPart(&fs, "/ck", p).ok());
  }
  absl::StatusOr<RingCheckpoint> loaded =
      LoadRingCheckpoint(&fs, "/ck", "job", 3, 4, 0);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  // A member of another table configuration refuses them, unchanged.
  auto other = RingTables::Create({2}, Options(), 9);
  ASSERT_TRUE(other.ok());
  const uint64_t other_before = (*other)->Digest();
  EXPECT_EQ((*other)->RestoreCheckpoint(loaded->tables).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*other)->Digest(), other_before);
  // A new member restored from it holds rank 0's tables bitwise (rows,
  // optimizer state, admission counters) and no history to roll back.
  std::vector<std::unique_ptr<RingTables>> resumed;
  resumed.push_back(Make());
  resumed.push_back(Make());
  for (auto& member : resumed) {
    ASSERT_TRUE(member->RestoreCheckpoint(loaded->tables).ok());
    EXPECT_EQ(member->Digest(), tables[0]->Digest());
    ExpectSameTables(member->store(), tables[0]->store());
    EXPECT_EQ(member->RollBackTo(3, 2).code(),
              absl::StatusCode::kFailedPrecondition);
  }
  // The resumed ring and the old one apply the same next step alike.
  InMemoryRingHub next(2);
  const auto old_step = Step(pair, tables, 3, 3);
  const auto new_step = Step(next, resumed, 0, 3);
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(old_step[r].ok() && new_step[r].ok()) << r;
    EXPECT_EQ(resumed[r]->Digest(), tables[0]->Digest()) << r;
  }
}

TEST(RingTables, AMalformedContributionChangesNothing) {
  InMemoryRingHub hub(2);
  auto tables = Make();
  const uint64_t before = tables->Digest();
  const auto statuses = testing::RunOnAllRanks(2, [&](int r) {
    if (r == 1) {  // not RingRowGradients
      return AllGatherBytes(*hub.transport(1), 0, "\xff\xff garbage", kPiece,
                            Soon())
          .status();
    }
    EXPECT_TRUE(tables->SetStepRows(RowsOf(0, 0)).ok());
    return tables->ApplyStep(*hub.transport(0), 0, 0, 4, kPiece, Soon());
  });
  EXPECT_EQ(statuses[0].code(), absl::StatusCode::kDataLoss) << statuses[0];
  EXPECT_THAT(statuses[0].message(), HasSubstr("rank 1"));
  EXPECT_EQ(tables->Digest(), before);
}

TEST(RingTables, FullTablesAllReduceTheWholeGradientOfRowsIdModN) {
  // Tables of 50 rows: ids 1 and 51 share row 1, 100 + r lands on row r.
  constexpr int kRanks = 3;
  constexpr int64_t kRows = 50;
  InMemoryRingHub hub(kRanks);
  std::vector<std::unique_ptr<RingTables>> tables;
  for (int r = 0; r < kRanks; ++r) {
    auto t = RingTables::Create(kDims, Options(), 9, kRows);
    ASSERT_TRUE(t.ok()) << t.status();
    tables.push_back(*std::move(t));
  }
  // The same steps as one store fed every rank's rows at id mod 50, summed
  // (in another order than the ring's: equal up to float rounding).
  auto reference =
      SparseStore::Create(MakeSparseStoreConfig(Options(), kDims, 9));
  ASSERT_TRUE(reference.ok());
  for (int s = 0; s < 3; ++s) {
    const auto statuses = Step(hub, tables, s, s);
    for (int r = 0; r < kRanks; ++r) {
      ASSERT_TRUE(statuses[r].ok()) << statuses[r];
    }
    std::map<std::pair<int32_t, uint64_t>, std::vector<float>> sums;
    for (int r = 0; r < kRanks; ++r) {
      for (const SparseRows& part : RowsOf(r, s)) {
        const size_t dim = kDims[part.table];
        for (size_t i = 0; i < part.ids.size(); ++i) {
          std::vector<float>& sum = sums[{part.table, part.ids[i] % kRows}];
          sum.resize(dim, 0.0f);
          for (size_t k = 0; k < dim; ++k) {
            sum[k] += part.grads[i * dim + k];
          }
        }
      }
    }
    std::vector<SparseRows> one;
    for (const auto& [key, sum] : sums) {
      if (one.empty() || one.back().table != key.first) {
        one.push_back({key.first, {}, {}});
      }
      one.back().ids.push_back(key.second);
      one.back().grads.insert(one.back().grads.end(), sum.begin(), sum.end());
    }
    ASSERT_TRUE((*reference)->ApplyStep({&one}, 8, s).ok());
  }
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(tables[r]->Digest(), tables[0]->Digest()) << "rank " << r;
    ExpectSameTables(tables[r]->store(), **reference, 1e-6f);
  }
  // Row 1 serves ids 1 and 51 alike.
  std::vector<std::vector<float>> a, b;
  const uint64_t one_id = 1, other = 51;
  ASSERT_TRUE(tables[0]->rows()->Read({{0, {&one_id, 1}}}, a).ok());
  ASSERT_TRUE(tables[0]->rows()->Read({{0, {&other, 1}}}, b).ok());
  EXPECT_EQ(a, b);
  // Each member sent 2(n-1)/n of the tables' gradient, (2 + 3) x 50 floats,
  // per step (up to the rounding of the ring's segments: 83, 83, 84).
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_NEAR(hub.bytes_sent(r), 3 * 4 * (2.0 * (kRanks - 1) * 250 / kRanks),
                3 * 4 * 1)
        << r;
  }
}

TEST(RingTables, RefusesLimitsThatEvictRowsAndBadRows) {
  EmbeddingOptions o = Options();
  o.ttl_steps = 10;
  EXPECT_THAT(RingTables::Create(kDims, o, 1).status().message(),
              HasSubstr("--embedding-ttl-steps"));
  o = Options();
  o.max_mb = 1;
  EXPECT_THAT(RingTables::Create(kDims, o, 1).status().message(),
              HasSubstr("--embedding-max-mb"));
  auto tables = Make();
  EXPECT_EQ(tables->SetStepRows({{5, {1}, {1, 1}}}).code(),
            absl::StatusCode::kInvalidArgument);  // no table 5
}

}  // namespace
}  // namespace ferry
