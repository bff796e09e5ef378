#include "model/embedding_bag.h"

#include <cmath>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace ferry {
namespace {

// A batch from per-bag id lists, bags in (sample, field) order.
SparseBatch MakeBatch(int batch, int fields,
                      const std::vector<std::vector<uint64_t>>& bags) {
  SparseBatch b;
  b.batch = batch;
  b.num_fields = fields;
  b.offsets.push_back(0);
  for (const std::vector<uint64_t>& bag : bags) {
    b.ids.insert(b.ids.end(), bag.begin(), bag.end());
    b.offsets.push_back(static_cast<int32_t>(b.ids.size()));
  }
  return b;
}

// Random batch: bags of 0..max_bag ids from a vocabulary of `vocab` ids (so
// duplicates within a bag, across samples and across fields are common).
SparseBatch RandomBatch(int batch, int fields, int max_bag, uint64_t vocab,
                        uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<uint64_t>> bags(static_cast<size_t>(batch) * fields);
  for (auto& bag : bags) {
    const int n = static_cast<int>(rng() % (max_bag + 1));
    for (int i = 0; i < n; ++i) {
      // Large 64-bit ids: the low bits alone do not identify them.
      bag.push_back((rng() % vocab) * 0x9E3779B97F4A7C15ull);
    }
  }
  return MakeBatch(batch, fields, bags);
}

// The value of element e of table t's row for `id`: a fixed function, so a
// brute-force reference needs no table.
float RowValue(size_t t, uint64_t id, int e) {
  const uint64_t h = (id ^ (t * 0x100000001B3ull)) * 31 + e * 7919;
  return static_cast<float>(static_cast<int64_t>(h % 2001) - 1000) / 256.0f;
}

struct Rows {
  std::vector<std::vector<float>> values;  // per table [unique x dim]
  std::vector<absl::Span<const float>> spans() const {
    std::vector<absl::Span<const float>> s;
    for (const auto& v : values) s.emplace_back(v);
    return s;
  }
};

Rows RowsFor(const UniqueRows& u, int dim) {
  Rows r;
  for (size_t t = 0; t < u.ids.size(); ++t) {
    std::vector<float> v;
    for (uint64_t id : u.ids[t]) {
      for (int e = 0; e < dim; ++e) v.push_back(RowValue(t, id, e));
    }
    r.values.push_back(std::move(v));
  }
  return r;
}

// Brute force, straight from the definition (double sums).
std::vector<double> ReferencePooled(const SparseBatch& b, int dim,
                                    Pooling pooling) {
  std::vector<double> out(static_cast<size_t>(b.batch) * b.num_fields * dim);
  for (int s = 0; s < b.batch; ++s) {
    for (int f = 0; f < b.num_fields; ++f) {
      const size_t bag = static_cast<size_t>(s) * b.num_fields + f;
      const int n = b.offsets[bag + 1] - b.offsets[bag];
      for (int e = 0; e < dim; ++e) {
        double sum = 0;
        for (int k = b.offsets[bag]; k < b.offsets[bag + 1]; ++k) {
          sum += RowValue(f, b.ids[k], e);
        }
        if (pooling == Pooling::kMean && n > 0) sum /= n;
        out[bag * dim + e] = sum;
      }
    }
  }
  return out;
}

// Brute force: per (table, id), the sum of its bags' gradients.
std::map<std::pair<size_t, uint64_t>, std::vector<double>> ReferenceGrads(
    const SparseBatch& b, const std::vector<float>& d_pooled, int dim,
    Pooling pooling) {
  std::map<std::pair<size_t, uint64_t>, std::vector<double>> g;
  for (size_t bag = 0; bag < static_cast<size_t>(b.batch) * b.num_fields;
       ++bag) {
    const size_t t = bag % b.num_fields;
    const int n = b.offsets[bag + 1] - b.offsets[bag];
    for (int k = b.offsets[bag]; k < b.offsets[bag + 1]; ++k) {
      auto& row = g[{t, b.ids[k]}];
      row.resize(dim, 0.0);
      for (int e = 0; e < dim; ++e) {
        double v = d_pooled[bag * dim + e];
        if (pooling == Pooling::kMean) v /= n;
        row[e] += v;
      }
    }
  }
  return g;
}

void CheckDedup(const SparseBatch& b, const UniqueRows& u) {
  ASSERT_EQ(u.ids.size(), static_cast<size_t>(b.num_fields));
  ASSERT_EQ(u.row_of.size(), b.ids.size());
  std::vector<std::vector<uint64_t>> first_seen(b.num_fields);
  std::vector<std::set<uint64_t>> seen(b.num_fields);
  for (size_t bag = 0; bag < static_cast<size_t>(b.batch) * b.num_fields;
       ++bag) {
    const size_t t = bag % b.num_fields;
    for (int k = b.offsets[bag]; k < b.offsets[bag + 1]; ++k) {
      ASSERT_GE(u.row_of[k], 0);
      ASSERT_LT(static_cast<size_t>(u.row_of[k]), u.ids[t].size());
      EXPECT_EQ(u.ids[t][u.row_of[k]], b.ids[k]) << "id " << k;
      if (seen[t].insert(b.ids[k]).second) first_seen[t].push_back(b.ids[k]);
    }
  }
  for (int t = 0; t < b.num_fields; ++t) {
    EXPECT_EQ(u.ids[t], first_seen[t]) << "table " << t;
  }
}

TEST(EmbeddingBagTest, DeduplicatesPerTableInFirstSeenOrder) {
  // 2 samples x 2 fields; id 7 twice in a bag, in both samples, and in both
  // fields (two tables: two rows).
  const SparseBatch b = MakeBatch(2, 2, {{7, 7, 3}, {7}, {}, {9, 7}});
  auto u = DeduplicateIds(b);
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->ids[0], (std::vector<uint64_t>{7, 3}));
  EXPECT_EQ(u->ids[1], (std::vector<uint64_t>{7, 9}));
  EXPECT_EQ(u->row_of, (std::vector<int32_t>{0, 0, 1, 0, 1, 0}));
}

TEST(EmbeddingBagTest, SumAndMeanByHand) {
  // One sample, 2 fields, dim 2: bag 0 = rows {a, a, b}, bag 1 empty.
  const SparseBatch b = MakeBatch(1, 2, {{5, 5, 6}, {}});
  auto u = DeduplicateIds(b);
  ASSERT_TRUE(u.ok());
  const std::vector<float> t0 = {1, 2, 10, 20};  // row of 5, row of 6
  const std::vector<absl::Span<const float>> rows = {t0, {}};
  std::vector<float> pooled(4, -1.0f);
  ASSERT_TRUE(
      GatherPooled(b, *u, rows, 2, Pooling::kSum, absl::Span<float>(pooled))
          .ok());
  EXPECT_EQ(pooled, (std::vector<float>{12, 24, 0, 0}));
  ASSERT_TRUE(
      GatherPooled(b, *u, rows, 2, Pooling::kMean, absl::Span<float>(pooled))
          .ok());
  EXPECT_EQ(pooled, (std::vector<float>{4, 8, 0, 0}));

  const std::vector<float> d_pooled = {3, 6, 100, 100};
  std::vector<float> g0(4, -1.0f);
  std::vector<absl::Span<float>> grads = {absl::Span<float>(g0), {}};
  ASSERT_TRUE(
      ScatterRowGradients(b, *u, d_pooled, 2, Pooling::kSum, grads).ok());
  EXPECT_EQ(g0, (std::vector<float>{6, 12, 3, 6}));  // id 5 twice
  ASSERT_TRUE(
      ScatterRowGradients(b, *u, d_pooled, 2, Pooling::kMean, grads).ok());
  EXPECT_EQ(g0, (std::vector<float>{2, 4, 1, 2}));  // / bag size 3
}

// Every combination of sizes (0, 1 and primes), both poolings: gather equals
// the brute-force reference, scatter equals the brute-force per-id sums, and
// scatter is gather's adjoint: <d_pooled, G(rows)> == <S(d_pooled), rows>.
TEST(EmbeddingBagTest, MatchesBruteForceOnAllSizes) {
  int cases = 0;
  uint32_t seed = 1;
  for (int batch : {0, 1, 2, 3, 7, 13}) {
    for (int fields : {0, 1, 2, 5}) {
      for (int dim : {0, 1, 3, 16}) {
        for (int max_bag : {0, 1, 4}) {
          for (Pooling pooling : {Pooling::kSum, Pooling::kMean}) {
            ++seed;
            SCOPED_TRACE(::testing::Message()
                         << "batch " << batch << " fields " << fields << " dim "
                         << dim << " max_bag " << max_bag << " "
                         << PoolingName(pooling));
            const SparseBatch b =
                RandomBatch(batch, fields, max_bag, /*vocab=*/5, seed);
            auto u = DeduplicateIds(b);
            ASSERT_TRUE(u.ok()) << u.status();
            CheckDedup(b, *u);
            const Rows rows = RowsFor(*u, dim);
            std::vector<float> pooled(static_cast<size_t>(batch) * fields * dim,
                                      123.0f);
            ASSERT_TRUE(GatherPooled(b, *u, rows.spans(), dim, pooling,
                                     absl::Span<float>(pooled))
                            .ok());
            const std::vector<double> want = ReferencePooled(b, dim, pooling);
            for (size_t i = 0; i < pooled.size(); ++i) {
              ASSERT_NEAR(pooled[i], want[i], 1e-4 * (1 + std::abs(want[i])))
                  << i;
            }

            std::mt19937 rng(seed);
            std::uniform_real_distribution<float> dist(-1, 1);
            std::vector<float> d_pooled(pooled.size());
            for (float& x : d_pooled) x = dist(rng);
            std::vector<std::vector<float>> grads(fields);
            std::vector<absl::Span<float>> spans;
            for (int t = 0; t < fields; ++t) {
              grads[t].assign(u->ids[t].size() * dim, 77.0f);
              spans.emplace_back(grads[t]);
            }
            ASSERT_TRUE(
                ScatterRowGradients(b, *u, d_pooled, dim, pooling, spans).ok());
            const auto ref = ReferenceGrads(b, d_pooled, dim, pooling);
            size_t rows_seen = 0;
            double lhs = 0, rhs = 0;
            for (int t = 0; t < fields; ++t) {
              for (size_t r = 0; r < u->ids[t].size(); ++r) {
                const auto it =
                    ref.find({static_cast<size_t>(t), u->ids[t][r]});
                ASSERT_NE(it, ref.end());
                ++rows_seen;
                for (int e = 0; e < dim; ++e) {
                  const double g = grads[t][r * dim + e];
                  ASSERT_NEAR(g, it->second[e], 1e-4 * (1 + std::abs(g)));
                  rhs += g * rows.values[t][r * dim + e];
                }
              }
            }
            EXPECT_EQ(rows_seen, ref.size());
            for (size_t i = 0; i < pooled.size(); ++i) {
              lhs += static_cast<double>(d_pooled[i]) * pooled[i];
            }
            EXPECT_NEAR(lhs, rhs, 1e-3 * (1 + std::abs(lhs)));
            ++cases;
          }
        }
      }
    }
  }
  EXPECT_EQ(cases, 6 * 4 * 4 * 3 * 2);
}

TEST(EmbeddingBagTest, OneIdPerFieldLikeCriteo) {
  // Criteo: exactly one id per field; sum and mean agree.
  const SparseBatch b = RandomBatch(11, 26, 0, 1, 3);  // all bags empty
  EXPECT_TRUE(b.ids.empty());
  std::vector<std::vector<uint64_t>> bags;
  std::mt19937 rng(4);
  for (int i = 0; i < 11 * 26; ++i) bags.push_back({rng() % 40});
  const SparseBatch c = MakeBatch(11, 26, bags);
  auto u = DeduplicateIds(c);
  ASSERT_TRUE(u.ok());
  const Rows rows = RowsFor(*u, 4);
  std::vector<float> sum(11 * 26 * 4), mean(sum.size());
  ASSERT_TRUE(GatherPooled(c, *u, rows.spans(), 4, Pooling::kSum,
                           absl::Span<float>(sum))
                  .ok());
  ASSERT_TRUE(GatherPooled(c, *u, rows.spans(), 4, Pooling::kMean,
                           absl::Span<float>(mean))
                  .ok());
  EXPECT_EQ(sum, mean);
  size_t unique = 0;
  for (const auto& t : u->ids) unique += t.size();
  EXPECT_LT(unique, c.ids.size());  // 11 samples over 40 ids: duplicates
}

TEST(EmbeddingBagTest, RejectsMalformedBatches) {
  const SparseBatch good = MakeBatch(2, 2, {{1}, {2, 3}, {}, {4}});
  ASSERT_TRUE(ValidateSparseBatch(good).ok());
  auto expect_bad = [](SparseBatch b, const char* why) {
    SCOPED_TRACE(why);
    const absl::Status s = ValidateSparseBatch(b);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_EQ(DeduplicateIds(b).status().code(),
              absl::StatusCode::kInvalidArgument);
  };
  SparseBatch b = good;
  b.offsets.pop_back();
  expect_bad(b, "too few offsets");
  b = good;
  b.offsets.push_back(4);
  expect_bad(b, "too many offsets");
  b = good;
  b.offsets[0] = 1;
  expect_bad(b, "first offset not 0");
  b = good;
  b.offsets[2] = 0;  // 0, 1, 0, 3, 4: decreases
  expect_bad(b, "decreasing");
  b = good;
  b.ids.push_back(9);
  expect_bad(b, "ids beyond the last offset");
  b = good;
  b.batch = -1;
  expect_bad(b, "negative batch");
  b = good;
  b.num_fields = -2;
  expect_bad(b, "negative fields");
  SparseBatch empty;  // no offsets at all
  expect_bad(empty, "empty offsets");
  empty.offsets = {0};
  EXPECT_TRUE(ValidateSparseBatch(empty).ok());
}

TEST(EmbeddingBagTest, GatherAndScatterRejectMismatchedBuffers) {
  const SparseBatch b = MakeBatch(1, 2, {{1, 2}, {1}});
  auto u = DeduplicateIds(b);
  ASSERT_TRUE(u.ok());
  std::vector<float> t0(2 * 3), t1(1 * 3), pooled(2 * 3);
  const std::vector<absl::Span<const float>> rows = {t0, t1};
  EXPECT_TRUE(
      GatherPooled(b, *u, rows, 3, Pooling::kSum, absl::Span<float>(pooled))
          .ok());
  auto bad = [&](const absl::Status& s) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  };
  std::vector<float> short_pooled(5, 42.0f);
  bad(GatherPooled(b, *u, rows, 3, Pooling::kSum,
                   absl::Span<float>(short_pooled)));
  EXPECT_EQ(short_pooled, std::vector<float>(5, 42.0f));  // nothing written
  bad(GatherPooled(b, *u, {t0}, 3, Pooling::kSum,
                   absl::Span<float>(pooled)));  // one table
  bad(GatherPooled(b, *u, {t1, t1}, 3, Pooling::kSum,
                   absl::Span<float>(pooled)));  // rows
  bad(GatherPooled(b, *u, rows, -1, Pooling::kSum, absl::Span<float>(pooled)));
  UniqueRows wrong = *u;
  wrong.row_of[1] = 5;  // out of table 0's range
  bad(GatherPooled(b, wrong, rows, 3, Pooling::kSum,
                   absl::Span<float>(pooled)));
  wrong = *u;
  wrong.row_of.pop_back();
  bad(GatherPooled(b, wrong, rows, 3, Pooling::kSum,
                   absl::Span<float>(pooled)));
  wrong = *u;
  wrong.ids.pop_back();
  bad(GatherPooled(b, wrong, rows, 3, Pooling::kSum,
                   absl::Span<float>(pooled)));

  std::vector<float> g0(6, 42.0f), g1(2);  // table 1 needs 3
  bad(ScatterRowGradients(b, *u, pooled, 3, Pooling::kSum,
                          {absl::Span<float>(g0), absl::Span<float>(g1)}));
  EXPECT_EQ(g0, std::vector<float>(6, 42.0f));  // nothing written
  SparseBatch malformed = b;
  malformed.offsets[1] = 4;  // decreasing (4, then 3)
  bad(GatherPooled(malformed, *u, rows, 3, Pooling::kSum,
                   absl::Span<float>(pooled)));
}

TEST(EmbeddingBagTest, ParsesPooling) {
  EXPECT_EQ(*ParsePooling("sum"), Pooling::kSum);
  EXPECT_EQ(*ParsePooling("mean"), Pooling::kMean);
  EXPECT_EQ(ParsePooling("max").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_STREQ(PoolingName(Pooling::kMean), "mean");
  EXPECT_STREQ(PoolingName(Pooling::kSum), "sum");
}

}  // namespace
}  // namespace ferry
