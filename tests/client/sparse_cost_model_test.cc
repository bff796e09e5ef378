#include "client/sparse_cost_model.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "client/cost_model.h"
#include "data/ctr_generator.h"
#include "data/zipf_sampler.h"
#include "ferry/v1/ps.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/dlrm_spec.h"
#include "ps/sparse_rows_wire.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;

// Within `rel` of `expected`; streams a message like EXPECT_NEAR.
#define EXPECT_REL(actual, expected, rel) \
  EXPECT_NEAR(actual, expected, std::abs(expected) * (rel))

TEST(SparseCostModelTest, ZipfNormalizerMatchesTheSum) {
  for (int64_t v : {1, 5, 1024, 1025, 1100, 100000, 3000000}) {
    for (double s : {0.3, 0.99, 1.0, 1.1, 2.0}) {
      double exact = 0;
      for (int64_t k = v; k >= 1; --k) exact += std::pow(double(k), -s);
      EXPECT_REL(ZipfNormalizer(v, s), exact, 1e-11);
    }
  }
}

TEST(SparseCostModelTest, FastExpectationMatchesTheExactSum) {
  for (int64_t v : {1, 3, 1000, 1025, 5000, 100000}) {
    for (double s : {0.5, 1.1, 1.6}) {
      for (double empty : {0.0, 0.3}) {
        for (double n : {1.0, 32.0, 1000.0, 100000.0}) {
          const ZipfTable t{v, empty};
          const double exact = ExpectedUniqueIdsExact(t, s, n);
          EXPECT_REL(ExpectedUniqueIds(t, s, n), exact, 1e-6)
              << " v " << v << " s " << s << " n " << n;
          EXPECT_LE(exact, std::min(n, double(v) + (empty > 0)) + 1e-9);
        }
      }
    }
  }
  // Large vocabularies: Criteo-like 2.2M at three exponents, the largest
  // (10.1M) once.
  for (const auto& [s, n] : std::vector<std::pair<double, double>>{
           {0.5, 1000}, {1.1, 100000}, {1.6, 1000}}) {
    const ZipfTable t{2202608, 0.02};
    EXPECT_REL(ExpectedUniqueIds(t, s, n), ExpectedUniqueIdsExact(t, s, n),
               1e-6)
        << " s " << s << " n " << n;
  }
  const ZipfTable big{10131227, 0.1};
  EXPECT_REL(ExpectedUniqueIds(big, 1.1, 65536),
             ExpectedUniqueIdsExact(big, 1.1, 65536), 1e-6);
  EXPECT_EQ(ExpectedUniqueIds(big, 1.1, 0), 0);
  EXPECT_EQ(ExpectedUniqueIdsExact(big, 1.1, 0), 0);
  // One draw is one id; one id is one id.
  EXPECT_NEAR(ExpectedUniqueIds(big, 1.1, 1), 1, 1e-9);
  EXPECT_NEAR(ExpectedUniqueIds({1, 0}, 1.1, 500), 1, 1e-12);
}

// Seeded Monte-Carlo with the generator's own sampler.
TEST(SparseCostModelTest, ExpectationMatchesMonteCarloWithin2Percent) {
  struct Case {
    int64_t vocab;
    double s;
    int n;
  };
  for (const Case& c : std::vector<Case>{{10, 1.1, 64},
                                         {1000, 0.8, 64},
                                         {1000, 1.1, 4096},
                                         {100000, 1.1, 512},
                                         {100000, 1.5, 4096},
                                         {10131227, 1.1, 2048},
                                         {10131227, 0.6, 256}}) {
    auto zipf = ZipfSampler::Create(c.vocab, c.s);
    ASSERT_TRUE(zipf.ok());
    const int trials = 200;
    double mean = 0;
    for (int trial = 0; trial < trials; ++trial) {
      CounterRng rng(7, trial);
      absl::flat_hash_set<int64_t> seen;
      for (int i = 0; i < c.n; ++i) seen.insert(zipf->Sample(rng));
      mean += double(seen.size()) / trials;
    }
    EXPECT_REL(ExpectedUniqueIds({c.vocab, 0}, c.s, c.n), mean, 0.02)
        << " vocab " << c.vocab << " s " << c.s << " n " << c.n;
  }
}

// The model's fields against `ferry data ctr`'s rows: the empty rates and
// the unique ids per batch (hashed 32-bit ids, empty values included).
TEST(SparseCostModelTest, MatchesTheCtrGeneratorsBatches) {
  CtrGeneratorOptions o;
  o.rows = o.test_rows = 1;
  o.seed = 3;
  o.zipf_exponent = 1.1;
  o.vocab_sizes = {1460, 583,  200000, 50000, 305, 24,    12517, 633,  3,
                   9314, 5683, 300000, 3194,  27,  14992, 70000, 10,   5652,
                   2173, 4,    100000, 18,    15,  28618, 105,   14257};
  auto gen = CtrGenerator::Create(o);
  ASSERT_TRUE(gen.ok()) << gen.status();
  const std::vector<double> empty = CtrGeneratorEmptyRates(o.seed, 26);
  const int batch = 64, batches = 300;
  std::vector<double> unique(26, 0), empties(26, 0);
  for (int b = 0; b < batches; ++b) {
    std::vector<absl::flat_hash_set<uint64_t>> seen(26);
    for (int r = 0; r < batch; ++r) {
      const CriteoExample x = gen->Row(0, int64_t{b} * batch + r, nullptr);
      for (int f = 0; f < 26; ++f) {
        seen[f].insert(x.ids[f]);
        empties[f] += x.ids[f] == kCriteoMissingId;
      }
    }
    for (int f = 0; f < 26; ++f) unique[f] += double(seen[f].size()) / batches;
  }
  double model_total = 0, measured_total = 0;
  for (int f = 0; f < 26; ++f) {
    EXPECT_NEAR(empties[f] / (batch * batches), empty[f], 0.01) << "C" << f + 1;
    const double model =
        ExpectedUniqueIds({o.vocab_sizes[f], empty[f]}, o.zipf_exponent, batch);
    EXPECT_REL(model, unique[f], 0.03) << "C" << f + 1;
    model_total += model;
    measured_total += unique[f];
  }
  EXPECT_REL(model_total, measured_total, 0.01);
}

std::string Id12(const std::string& prefix) {
  return prefix + std::string(12 - prefix.size(), 'x');
}

// Exact bytes for one shard against the real messages.
TEST(SparseCostModelTest, PsRowBytesAreTheMessagesSizes) {
  // By hand: 10 ids of table 0, dim 16, one shard.
  PsRowTraffic one = PsRowBytes({10}, 16, 1);
  EXPECT_DOUBLE_EQ(one.pull_request, 31 + 84);  // ids + header
  EXPECT_DOUBLE_EQ(one.pull_response, 3 + 646);
  EXPECT_DOUBLE_EQ(one.push, 728);
  EXPECT_EQ(one.calls, 1);

  const std::vector<int> counts = {10, 200, 1, 0, 5000, 3};
  const int dim = 16;
  v1::PullRowsRequest request;
  request.set_job_id(Id12("job-"));
  request.set_worker_id(Id12("worker-"));
  request.set_min_version(1000);
  v1::PullRowsResponse response;
  response.set_version(1000);
  double push = 0;
  std::vector<double> unique;
  for (size_t t = 0; t < counts.size(); ++t) {
    unique.push_back(counts[t]);
    if (counts[t] == 0) continue;
    std::vector<uint64_t> ids(counts[t]);
    for (int i = 0; i < counts[t]; ++i) ids[i] = (uint64_t{1} << 40) + i;
    std::vector<float> values(size_t(counts[t]) * dim, 0.5f);
    ToSparseRowsPart(int32_t(t), ids, {}, request.add_tables());
    ToSparseRowsPart(int32_t(t), {}, values, response.add_tables());
    v1::PushRequest message;
    ToSparseRowsPart(int32_t(t), ids, values, message.mutable_rows());
    push += double(message.ByteSizeLong());
  }
  const PsRowTraffic r = PsRowBytes(unique, dim, 1);
  EXPECT_DOUBLE_EQ(r.pull_request, double(request.ByteSizeLong()));
  EXPECT_DOUBLE_EQ(r.pull_response, double(response.ByteSizeLong()));
  EXPECT_DOUBLE_EQ(r.push, push);
  // Per unique id: 8 + 4d pulled-for and pulled, 8 + 4d pushed.
  const double ids = 10 + 200 + 1 + 5000 + 3;
  EXPECT_REL(r.sent() + r.received(), ids * (16 + 8 * dim), 0.01);
}

TEST(SparseCostModelTest, PsRowsSpreadOverShards) {
  for (int shards : {2, 3, 7}) {
    // Many ids: every shard holds some of every table.
    const PsRowTraffic r = PsRowBytes({4000, 4000}, 8, shards);
    EXPECT_EQ(r.calls, shards);
    EXPECT_REL(r.sent() + r.received(), 8000.0 * (16 + 8 * 8), 0.01);
    // One id: one shard asked, one part.
    const PsRowTraffic one = PsRowBytes({1}, 8, shards);
    EXPECT_EQ(one.calls, 1);
    EXPECT_DOUBLE_EQ(one.push, PsRowBytes({1}, 8, 1).push);
  }
}

TEST(SparseCostModelTest, AllGatherSetByHand) {
  // RingRowGradients {step 1000: 3 B, part {table 0: 0 B, ids 1 + 1 + 80 B,
  // values 1 + 2 + 640 B}: 1 + 2 + 725 B} = 731 B. On the wire: a header
  // RingMessage {op_id 1000: 3 B, stage 2, piece 2, encoded 2, data
  // 1 + 1 + 8} = 19 B, then one piece {9 B, data 1 + 2 + 731}.
  EXPECT_DOUBLE_EQ(AllGatherSetBytes({10}, 16, 1 << 20), 19 + 9 + 734);
  // Table 2's part names its table (2 B more).
  EXPECT_DOUBLE_EQ(AllGatherSetBytes({10, 0, 10}, 16, 1 << 20),
                   19 + 9 + 3 + (3 + 728 + 730));
  // Split into pieces of at most 400 B: two of 365.5 B (the mean).
  EXPECT_DOUBLE_EQ(AllGatherSetBytes({10}, 16, 400), 19 + 2 * (9 + 3 + 365.5));
}

SparseCostInput Dlrm(int workers, int shards, int64_t batch) {
  SparseCostInput in;
  auto spec = DlrmPreset("dlrm");
  EXPECT_TRUE(spec.ok());
  auto layout = DlrmParameterLayout(*spec);
  EXPECT_TRUE(layout.ok());
  in.dense_tensor_sizes = layout->TensorSizes();
  in.embedding_dim = spec->embedding_dim;
  const std::vector<double> empty = CtrGeneratorEmptyRates(1, 26);
  const std::vector<int64_t> vocab = CriteoLikeVocabSizes();
  for (int f = 0; f < 26; ++f) in.tables.push_back({vocab[f], empty[f]});
  in.workers = workers;
  in.shards = shards;
  in.global_batch = batch;
  in.bandwidth_bytes_per_second = 1.25e9;  // 10 Gbit
  in.latency_seconds = 50e-6;
  return in;
}

TEST(SparseCostModelTest, BytesPerModeFollowTheFormulas) {
  for (int w : {1, 2, 3, 4}) {
    SparseCostInput in = Dlrm(w, 2, 129);
    auto p = PredictSparseStep(in);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->dense_params, 475985);
    EXPECT_EQ(p->lookups_per_worker, (129 + w - 1) / w * 26);
    EXPECT_NEAR(p->unique_ids_all_workers, p->unique_ids_per_worker * w, 1e-6);
    EXPECT_LE(p->unique_ids_union, p->unique_ids_all_workers + 1e-6);
    EXPECT_GE(p->unique_ids_union, p->unique_ids_per_worker);
    // The dense parts are client/cost_model.h's.
    CostInput dense;
    dense.workers = w;
    dense.shards = 2;
    dense.tensor_sizes = in.dense_tensor_sizes;
    dense.mode = CostMode::kPs;
    auto ps = PredictStep(dense);
    dense.mode = CostMode::kRing;
    auto ring = PredictStep(dense);
    ASSERT_TRUE(ps.ok() && ring.ok());
    const SparseModeCost& m_ps = p->mode(SparseMode::kPs);
    EXPECT_EQ(m_ps.dense_sent, double(ps->worker.sent));
    EXPECT_EQ(m_ps.dense_received, double(ps->worker.received));
    const PsRowTraffic rows = PsRowBytes(p->unique_per_table, 16, 2);
    EXPECT_DOUBLE_EQ(m_ps.sparse_sent, rows.sent());
    EXPECT_DOUBLE_EQ(m_ps.sparse_received, rows.received());
    EXPECT_REL(m_ps.sparse_sent + m_ps.sparse_received,
               p->unique_ids_per_worker * (16 + 8 * 16), 0.03);
    const SparseModeCost& m_ag = p->mode(SparseMode::kAllGather);
    EXPECT_EQ(m_ag.dense_sent, double(ring->worker.sent));
    EXPECT_DOUBLE_EQ(m_ag.sparse_sent,
                     (w - 1) * AllGatherSetBytes(p->unique_per_table, 16,
                                                 4 * in.piece_elements));
    EXPECT_DOUBLE_EQ(m_ag.sparse_received, m_ag.sparse_sent);
    const SparseModeCost& m_ar = p->mode(SparseMode::kAllReduce);
    EXPECT_EQ(m_ar.dense_received, double(ring->worker.received));
    // Every table's rows (and one empty row per table with empties).
    EXPECT_EQ(p->table_rows, 33762577 + 26);
    const double full = 2.0 * (w - 1) / w * 4.0 * p->table_rows * 16;
    if (w == 1) {
      EXPECT_EQ(m_ar.sparse_sent, 0);
      EXPECT_EQ(m_ag.sparse_sent, 0);
    } else {
      EXPECT_REL(m_ar.sparse_sent, full, 1e-3);
      EXPECT_REL(m_ar.sparse_received, full, 1e-3);
    }
    // Hybrid: the ring's dense part, PS's rows.
    const SparseModeCost& m_hy = p->mode(SparseMode::kHybrid);
    EXPECT_EQ(m_hy.dense_sent, double(ring->worker.sent));
    EXPECT_EQ(m_hy.dense_received, double(ring->worker.received));
    EXPECT_DOUBLE_EQ(m_hy.sparse_sent, m_ps.sparse_sent);
    EXPECT_DOUBLE_EQ(m_hy.sparse_received, m_ps.sparse_received);
    for (SparseMode m : kSparseModes) {
      const SparseModeCost& c = p->mode(m);
      EXPECT_NEAR(c.step_seconds,
                  c.dense_seconds + c.sparse_seconds + c.update_seconds, 1e-12);
    }
  }
}

TEST(SparseCostModelTest, HybridPushesRowsDuringTheDenseAllReduce) {
  // 4 workers, 2 shards on a 1 Gbit/s link: the ring moves 2(W-1)/W of the
  // dense gradient each way, PS a whole push and a whole pull, so hybrid
  // beats PS; its row push hides behind the dense all-reduce.
  SparseCostInput in = Dlrm(4, 2, 512);
  in.bandwidth_bytes_per_second = 125e6;
  in.latency_seconds = 50e-6;
  auto p = PredictSparseStep(in);
  ASSERT_TRUE(p.ok()) << p.status();
  const SparseModeCost& ps = p->mode(SparseMode::kPs);
  const SparseModeCost& hybrid = p->mode(SparseMode::kHybrid);
  EXPECT_LT(hybrid.dense_seconds, ps.dense_seconds);
  EXPECT_LT(hybrid.sparse_seconds, ps.sparse_seconds);
  EXPECT_EQ(hybrid.update_seconds, ps.update_seconds);
  EXPECT_LT(hybrid.step_seconds, ps.step_seconds);
  EXPECT_EQ(FastestSparseMode(*p, true), SparseMode::kHybrid);
  EXPECT_STREQ(SparseModeName(SparseMode::kHybrid), "hybrid");
}

TEST(SparseCostModelTest, MeasuredUniqueIdsReplaceTheExpectation) {
  SparseCostInput in = Dlrm(2, 2, 256);
  in.measured_unique_ids = 3000;  // summed over both workers
  auto p = PredictSparseStep(in);
  ASSERT_TRUE(p.ok());
  EXPECT_NEAR(p->unique_ids_per_worker, 1500, 1e-9);
  EXPECT_NEAR(p->unique_ids_all_workers, 3000, 1e-9);
  const SparseModeCost& ps = p->mode(SparseMode::kPs);
  EXPECT_REL(ps.sparse_sent + ps.sparse_received, 1500.0 * 144, 0.02);
  in.measured_unique_ids = 0;
  p = PredictSparseStep(in);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->mode(SparseMode::kPs).sparse_sent, 0);
}

TEST(SparseCostModelTest, MoreSkewFewerUniqueIds) {
  double last = 1e18;
  for (double s : {0.4, 0.8, 1.1, 1.5, 2.5}) {
    SparseCostInput in = Dlrm(4, 2, 4096);
    in.zipf_exponent = s;
    auto p = PredictSparseStep(in);
    ASSERT_TRUE(p.ok());
    EXPECT_LT(p->unique_ids_per_worker, last);
    last = p->unique_ids_per_worker;
    // The full all-reduce does not care.
    EXPECT_GT(p->mode(SparseMode::kAllReduce).bytes(), 1e9);
  }
}

// Full all-reduce beats PS only when the tables are tiny (or the batch
// touches most of their rows).
TEST(SparseCostModelTest, FullAllReduceWinsOnlyForTinyTablesOrHugeBatches) {
  SparseCostInput in = Dlrm(4, 4, 128);
  auto p = PredictSparseStep(in);
  ASSERT_TRUE(p.ok());
  EXPECT_NE(FastestSparseMode(*p, true), SparseMode::kAllReduce);
  EXPECT_GT(p->mode(SparseMode::kAllReduce).step_seconds,
            100 * p->mode(SparseMode::kPs).step_seconds);

  auto tables =
      SweepSparse(in, SparseSweepAxis::kTable,
                  DefaultSparseSweepValues(SparseSweepAxis::kTable, in));
  ASSERT_TRUE(tables.ok()) << tables.status();
  // Tables of one row (and the empty one): all-reduce beats PS (the
  // all-gather still beats it: W - 1 ring stages against 2(W - 1)).
  const SparsePrediction& tiny = tables->points.front().prediction;
  EXPECT_EQ(tiny.table_rows, 52);
  EXPECT_LT(tiny.mode(SparseMode::kAllReduce).step_seconds,
            tiny.mode(SparseMode::kPs).step_seconds);
  EXPECT_NE(tables->points.back().fastest, SparseMode::kAllReduce);
  bool ps_crossover = false;
  for (const SparseCrossoverPoint& c : tables->crossovers) {
    if (c.below == SparseMode::kAllReduce && c.above == SparseMode::kPs) {
      ps_crossover = true;
      // At the crossover the tables are small: well under 1M rows.
      EXPECT_LT(c.table_rows, 1000000);
      EXPECT_GT(c.table_rows, 26);
      // The two sides of it.
      auto below = PredictSparseStep(
          SparseInputAt(in, SparseSweepAxis::kTable, c.value / 1.02));
      auto above = PredictSparseStep(
          SparseInputAt(in, SparseSweepAxis::kTable, c.value * 1.02));
      ASSERT_TRUE(below.ok() && above.ok());
      EXPECT_LT(below->mode(SparseMode::kAllReduce).step_seconds,
                below->mode(SparseMode::kPs).step_seconds);
      EXPECT_GT(above->mode(SparseMode::kAllReduce).step_seconds,
                above->mode(SparseMode::kPs).step_seconds);
    }
  }
  EXPECT_TRUE(ps_crossover);

  // Small tables (1,000 rows each): all-reduce wins from some batch on.
  SparseCostInput small = in;
  for (ZipfTable& t : small.tables) t.vocab = 1000;
  auto batches =
      SweepSparse(small, SparseSweepAxis::kBatch,
                  DefaultSparseSweepValues(SparseSweepAxis::kBatch, small));
  ASSERT_TRUE(batches.ok());
  EXPECT_NE(batches->points.front().fastest, SparseMode::kAllReduce);
  // (Hybrid, which all-reduces the dense part too and moves only rows,
  // may beat both there.)
  const SparsePrediction& huge = batches->points.back().prediction;
  EXPECT_LT(huge.mode(SparseMode::kAllReduce).step_seconds,
            huge.mode(SparseMode::kPs).step_seconds);
  EXPECT_NE(batches->points.back().fastest, SparseMode::kPs);
  ASSERT_FALSE(batches->crossovers.empty());
  for (const SparseCrossoverPoint& c : batches->crossovers) {
    EXPECT_EQ(c.value, std::floor(c.value));  // a batch
  }
  // With the real tables, PS never loses to all-reduce on batch.
  auto real =
      SweepSparse(in, SparseSweepAxis::kBatch,
                  DefaultSparseSweepValues(SparseSweepAxis::kBatch, in));
  ASSERT_TRUE(real.ok());
  for (const SparseSweepPoint& point : real->points) {
    EXPECT_LT(point.prediction.mode(SparseMode::kPs).step_seconds,
              point.prediction.mode(SparseMode::kAllReduce).step_seconds)
        << "batch " << point.value;
  }
}

TEST(SparseCostModelTest, AllGatherLosesToPsAsWorkersGrow) {
  // Rows per worker: all-gather (W-1) sets each way, PS one set each way
  // (and W/S of them on a shard's link).
  for (int w : {2, 4, 8, 16}) {
    SparseCostInput in = Dlrm(w, w, 8192 * w);
    auto p = PredictSparseStep(in);
    ASSERT_TRUE(p.ok());
    const double ps = p->mode(SparseMode::kPs).sparse_sent;
    const double ag = p->mode(SparseMode::kAllGather).sparse_sent;
    EXPECT_REL(ag / ps, (w - 1) * (8 + 64.0) / (16 + 64.0), 0.03);
  }
}

TEST(SparseCostModelTest, NoLinkComparesBytes) {
  SparseCostInput in = Dlrm(2, 2, 128);
  in.bandwidth_bytes_per_second = 0;
  in.latency_seconds = 0;
  auto sweep = SweepSparse(in, SparseSweepAxis::kZipf, {0.5, 1.0, 1.5});
  ASSERT_TRUE(sweep.ok());
  EXPECT_FALSE(sweep->by_time);
  for (const SparseSweepPoint& point : sweep->points) {
    EXPECT_EQ(point.fastest, FastestSparseMode(point.prediction, false));
  }
}

TEST(SparseCostModelTest, RefusesBadInput) {
  const auto refused = [](SparseCostInput in, const std::string& what) {
    auto p = PredictSparseStep(in);
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(p.status().message(), HasSubstr(what));
  };
  SparseCostInput in = Dlrm(2, 2, 128);
  SparseCostInput bad = in;
  bad.workers = 0;
  refused(bad, "workers");
  bad = in;
  bad.tables[3].vocab = 0;
  refused(bad, "table 3");
  bad = in;
  bad.tables[0].empty_rate = 1;
  refused(bad, "empty rate");
  bad = in;
  bad.zipf_exponent = 0;
  refused(bad, "Zipf");
  bad = in;
  bad.global_batch = 0;
  refused(bad, "batch");
  bad = in;
  bad.embedding_dim = 0;
  refused(bad, "dim");
  bad = in;
  bad.tables.clear();
  refused(bad, "tables");
  EXPECT_FALSE(SweepSparse(in, SparseSweepAxis::kZipf, {}).ok());
  EXPECT_FALSE(SweepSparse(in, SparseSweepAxis::kZipf, {1.0, 0.5}).ok());
  EXPECT_FALSE(SweepSparse(in, SparseSweepAxis::kBatch, {0.5, 2}).ok());
  EXPECT_TRUE(ParseSparseSweepAxis("table").ok());
  EXPECT_THAT(ParseSparseSweepAxis("rows").status().message(),
              HasSubstr("batch, table or zipf"));
}

}  // namespace
}  // namespace ferry
