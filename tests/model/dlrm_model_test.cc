#include "model/dlrm_model.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "compute/cpu_backend.h"
#include "compute/ctr_math.h"
#include "gtest/gtest.h"
#include "model/embedding_bag.h"

namespace ferry {
namespace {

std::vector<float> Random(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

DlrmSpec TinySpec() {
  DlrmSpec s;
  s.dense_features = 3;
  s.num_fields = 3;
  s.embedding_dim = 4;
  s.bottom = {5};
  s.top = {6};
  return s;
}

struct Batch {
  int n = 0;
  std::vector<float> dense, pooled, labels;
};

Batch RandomBatch(const DlrmModel& m, int n, uint32_t seed) {
  Batch b;
  b.n = n;
  b.dense = Random(static_cast<size_t>(n) * m.dense_dim(), seed);
  b.pooled = Random(static_cast<size_t>(n) * m.pooled_dim(), seed + 1);
  for (int i = 0; i < n; ++i) b.labels.push_back(static_cast<float>(i % 2));
  return b;
}

// Loss at `params` / `pooled` (no gradient wanted; the model computes them
// anyway, into scratch).
double Loss(DlrmModel& m, const std::vector<float>& params, const Batch& b) {
  std::vector<float> g(params.size());
  auto loss = m.ForwardBackward(params.data(), b.dense.data(), b.pooled.data(),
                                b.labels.data(), b.n, 1.0f, g.data(), nullptr);
  EXPECT_TRUE(loss.ok()) << loss.status();
  return *loss;
}

// Analytic gradients against central differences, for every parameter and
// every pooled input of a tiny model.
TEST(DlrmModelTest, GradientsMatchFiniteDifferences) {
  auto backend = MakeCpuBackend(1);
  {
    auto m = DlrmModel::Create(TinySpec(), backend.get());
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ(m->interaction_features(), 4 + 6);
    std::vector<float> params = m->InitialParameters(3);
    // Non-zero biases so that every path carries gradient.
    for (float& p : params) p += 0.05f;
    Batch b = RandomBatch(*m, 4, 10);
    std::vector<float> grads(params.size()), d_pooled(b.pooled.size());
    auto loss = m->ForwardBackward(params.data(), b.dense.data(),
                                   b.pooled.data(), b.labels.data(), b.n, 1.0f,
                                   grads.data(), d_pooled.data());
    ASSERT_TRUE(loss.ok()) << loss.status();
    EXPECT_GT(*loss, 0.0);
    const float h = 1e-3f;
    auto check = [&](std::vector<float>& x, const std::vector<float>& analytic,
                     const char* what) {
      int nonzero = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        const float saved = x[i];
        x[i] = saved + h;
        const double up = Loss(*m, params, b);
        x[i] = saved - h;
        const double down = Loss(*m, params, b);
        x[i] = saved;
        const double fd = (up - down) / (2.0 * h);
        EXPECT_NEAR(analytic[i], fd, 5e-4 + 1e-2 * std::abs(fd))
            << what << " " << i;
        if (std::abs(analytic[i]) > 1e-4) ++nonzero;
      }
      EXPECT_GT(nonzero, static_cast<int>(x.size()) / 2) << what;
    };
    check(params, grads, "param");
    check(b.pooled, d_pooled, "pooled");
  }
}

TEST(DlrmModelTest, GradScaleScalesEveryGradient) {
  auto backend = MakeCpuBackend(1);
  auto m = DlrmModel::Create(TinySpec(), backend.get());
  ASSERT_TRUE(m.ok());
  const std::vector<float> params = m->InitialParameters(1);
  const Batch b = RandomBatch(*m, 5, 20);
  std::vector<float> g1(params.size()), g2(params.size()), g3(params.size());
  std::vector<float> p1(b.pooled.size()), p2(b.pooled.size());
  auto l1 =
      m->ForwardBackward(params.data(), b.dense.data(), b.pooled.data(),
                         b.labels.data(), b.n, 1.0f, g1.data(), p1.data());
  auto l2 =
      m->ForwardBackward(params.data(), b.dense.data(), b.pooled.data(),
                         b.labels.data(), b.n, 0.5f, g2.data(), p2.data());
  auto l3 = m->ForwardBackward(params.data(), b.dense.data(), b.pooled.data(),
                               b.labels.data(), b.n, 1.0f, g3.data(), nullptr);
  ASSERT_TRUE(l1.ok() && l2.ok() && l3.ok());
  EXPECT_EQ(*l1, *l2);  // the loss is not scaled
  for (size_t i = 0; i < g1.size(); ++i) EXPECT_EQ(g2[i], 0.5f * g1[i]) << i;
  for (size_t i = 0; i < p1.size(); ++i) EXPECT_EQ(p2[i], 0.5f * p1[i]) << i;
  EXPECT_EQ(g3, g1);  // no d_pooled wanted: same parameter gradients
}

// The interaction by hand: identity bottom layer, then the top layer reads
// one interaction feature at a time.
TEST(DlrmModelTest, InteractionShapeAndValuesByHand) {
  DlrmSpec spec;
  spec.dense_features = 2;
  spec.num_fields = 2;
  spec.embedding_dim = 2;
  spec.bottom = {};
  spec.top = {};
  auto backend = MakeCpuBackend(1);
  auto m = DlrmModel::Create(spec, backend.get());
  ASSERT_TRUE(m.ok());
  ASSERT_EQ(m->interaction_features(), 2 + 3);  // b, then (1,0) (2,0) (2,1)
  ASSERT_EQ(m->layout().total_elements(), 4 + 2 + 5 + 1);
  // Two samples: bottom output b = dense (identity + ReLU on positives).
  const std::vector<float> dense = {1.5f, 2.0f, 0.5f, 1.0f};
  const std::vector<float> pooled = {3, -1, 0.5f, 4,   // sample 0: p0, p1
                                     1, 1,  -2,   2};  // sample 1
  const std::vector<std::vector<float>> want = {
      {1.5f, 2.0f, 2.5f, 8.75f, -2.5f},  // b, b.p0, b.p1, p0.p1
      {0.5f, 1.0f, 1.5f, 1.0f, 0.0f}};
  for (int k = 0; k < 5; ++k) {
    std::vector<float> params = {1, 0, 0, 1, 0, 0,  // bot_l.0 = identity
                                 0, 0, 0, 0, 0, 0};
    params[6 + k] = 1.0f;  // top_l.0.weight = e_k
    std::vector<float> logits(2);
    ASSERT_TRUE(
        m->Logits(params.data(), dense.data(), pooled.data(), 2, logits.data())
            .ok());
    EXPECT_FLOAT_EQ(logits[0], want[0][k]) << k;
    EXPECT_FLOAT_EQ(logits[1], want[1][k]) << k;
    std::vector<float> p(2);
    ASSERT_TRUE(
        m->Predict(params.data(), dense.data(), pooled.data(), 2, p.data())
            .ok());
    EXPECT_FLOAT_EQ(p[0], StableSigmoid(want[0][k]));
  }
}

TEST(DlrmModelTest, LargeLogitsGiveFiniteLossAndGradients) {
  auto backend = MakeCpuBackend(1);
  DlrmSpec spec = TinySpec();
  auto m = DlrmModel::Create(spec, backend.get());
  ASSERT_TRUE(m.ok());
  const Batch b = RandomBatch(*m, 6, 30);  // labels 0, 1, 0, 1, ...
  for (float bias : {1e4f, -1e4f}) {
    std::vector<float> params(m->layout().total_elements(), 0.0f);
    params.back() = bias;  // top's last bias: every logit is `bias`
    std::vector<float> grads(params.size()), d_pooled(b.pooled.size());
    auto loss = m->ForwardBackward(params.data(), b.dense.data(),
                                   b.pooled.data(), b.labels.data(), b.n, 1.0f,
                                   grads.data(), d_pooled.data());
    ASSERT_TRUE(loss.ok());
    // Half the samples are confidently wrong by 1e4 each; the others cost 0.
    EXPECT_DOUBLE_EQ(*loss, 3 * 1e4);
    for (float g : grads) ASSERT_TRUE(std::isfinite(g));
    // d loss / d bias = sum(sigmoid - y) = +-3.
    EXPECT_FLOAT_EQ(grads.back(), bias > 0 ? 3.0f : -3.0f);
    std::vector<float> p(b.n);
    ASSERT_TRUE(m->Predict(params.data(), b.dense.data(), b.pooled.data(), b.n,
                           p.data())
                    .ok());
    for (float x : p) EXPECT_EQ(x, bias > 0 ? 1.0f : 0.0f);
  }
}

TEST(DlrmModelTest, RejectsBadArgumentsWithoutWriting) {
  auto backend = MakeCpuBackend(1);
  DlrmSpec bad = TinySpec();
  bad.num_fields = 0;
  EXPECT_EQ(DlrmModel::Create(bad, backend.get()).status().code(),
            absl::StatusCode::kInvalidArgument);
  bad = TinySpec();
  bad.top = {4, 0};
  EXPECT_EQ(DlrmModel::Create(bad, backend.get()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DlrmModel::Create(TinySpec(), nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);

  auto m = DlrmModel::Create(TinySpec(), backend.get());
  ASSERT_TRUE(m.ok());
  const std::vector<float> params = m->InitialParameters(1);
  Batch b = RandomBatch(*m, 3, 40);
  std::vector<float> grads(params.size(), 9.0f), dp(b.pooled.size(), 9.0f);
  auto run = [&](const float* p, const float* labels, int n) {
    return m
        ->ForwardBackward(p, b.dense.data(), b.pooled.data(), labels, n, 1.0f,
                          grads.data(), dp.data())
        .status()
        .code();
  };
  const auto kBad = absl::StatusCode::kInvalidArgument;
  EXPECT_EQ(run(params.data(), b.labels.data(), 0), kBad);
  EXPECT_EQ(run(params.data(), b.labels.data(), -2), kBad);
  EXPECT_EQ(run(nullptr, b.labels.data(), 3), kBad);
  EXPECT_EQ(run(params.data(), nullptr, 3), kBad);
  for (float label : {2.0f, -0.5f, std::numeric_limits<float>::quiet_NaN()}) {
    b.labels[1] = label;
    EXPECT_EQ(run(params.data(), b.labels.data(), 3), kBad) << label;
  }
  EXPECT_EQ(grads, std::vector<float>(params.size(), 9.0f));
  EXPECT_EQ(dp, std::vector<float>(b.pooled.size(), 9.0f));
  std::vector<float> out(3, 9.0f);
  EXPECT_EQ(
      m->Predict(params.data(), b.dense.data(), nullptr, 3, out.data()).code(),
      kBad);
  EXPECT_EQ(
      m->Predict(params.data(), b.dense.data(), b.pooled.data(), 0, out.data())
          .code(),
      kBad);
  EXPECT_EQ(
      m->Predict(params.data(), b.dense.data(), b.pooled.data(), 3, nullptr)
          .code(),
      kBad);
  EXPECT_EQ(out, std::vector<float>(3, 9.0f));
}

// Same inputs, same bits: twice on one model, and on a fresh model after the
// first one's workspaces grew for a larger batch.
TEST(DlrmModelTest, Deterministic) {
  auto backend = MakeCpuBackend(1);
  auto m1 = DlrmModel::Create(TinySpec(), backend.get());
  auto m2 = DlrmModel::Create(TinySpec(), backend.get());
  ASSERT_TRUE(m1.ok() && m2.ok());
  const std::vector<float> params = m1->InitialParameters(5);
  EXPECT_EQ(params, m2->InitialParameters(5));
  const Batch big = RandomBatch(*m1, 17, 50);
  const Batch b = RandomBatch(*m1, 7, 60);
  std::vector<float> g(params.size()), dp(big.pooled.size());
  ASSERT_TRUE(m1->ForwardBackward(params.data(), big.dense.data(),
                                  big.pooled.data(), big.labels.data(), big.n,
                                  1.0f, g.data(), dp.data())
                  .ok());
  std::vector<std::vector<float>> grads;
  std::vector<std::vector<float>> d_pooled;
  std::vector<double> losses;
  for (DlrmModel* m : {&*m1, &*m1, &*m2}) {
    std::vector<float> gi(params.size()), di(b.pooled.size());
    auto loss =
        m->ForwardBackward(params.data(), b.dense.data(), b.pooled.data(),
                           b.labels.data(), b.n, 1.0f, gi.data(), di.data());
    ASSERT_TRUE(loss.ok());
    losses.push_back(*loss);
    grads.push_back(gi);
    d_pooled.push_back(di);
  }
  for (int i = 1; i < 3; ++i) {
    EXPECT_EQ(losses[i], losses[0]);
    EXPECT_EQ(std::memcmp(grads[i].data(), grads[0].data(),
                          grads[0].size() * sizeof(float)),
              0);
    EXPECT_EQ(std::memcmp(d_pooled[i].data(), d_pooled[0].data(),
                          d_pooled[0].size() * sizeof(float)),
              0);
  }
}

// The whole sparse path, as a trainer will run it: ids -> DeduplicateIds ->
// GatherPooled -> DlrmModel -> ScatterRowGradients -> host SGD on the dense
// parameters and the touched rows. The label is a function of field 0's id
// only (the dense features are noise), so only learning the embeddings
// separates the classes.
TEST(DlrmModelTest, SgdLearnsASeparableSparseProblem) {
  DlrmSpec spec;
  spec.dense_features = 2;
  spec.num_fields = 2;
  spec.embedding_dim = 4;
  spec.bottom = {8};
  spec.top = {8};
  auto backend = MakeCpuBackend(1);
  auto m = DlrmModel::Create(spec, backend.get());
  ASSERT_TRUE(m.ok());
  std::vector<float> params = m->InitialParameters(9);
  const int vocab = 10;
  const int dim = spec.embedding_dim;
  std::vector<std::vector<float>> tables = {Random(vocab * dim, 1, 0.5f),
                                            Random(vocab * dim, 2, 0.5f)};
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> noise(-1, 1);
  const int n = 16;
  const float lr = 0.2f;
  std::vector<float> grads(params.size()), d_pooled(n * m->pooled_dim());
  double first = 0, last = 0;
  const int steps = 400;
  for (int step = 0; step < steps; ++step) {
    SparseBatch sb;
    sb.batch = n;
    sb.num_fields = 2;
    sb.offsets.push_back(0);
    std::vector<float> dense, labels;
    for (int i = 0; i < n; ++i) {
      for (int f = 0; f < 2; ++f) {
        sb.ids.push_back(rng() % vocab);
        sb.offsets.push_back(static_cast<int32_t>(sb.ids.size()));
      }
      labels.push_back(sb.ids[2 * i] % 2 == 0 ? 1.0f : 0.0f);
      dense.push_back(noise(rng));
      dense.push_back(noise(rng));
    }
    auto unique = DeduplicateIds(sb);
    ASSERT_TRUE(unique.ok());
    std::vector<std::vector<float>> rows(2);
    for (int t = 0; t < 2; ++t) {
      for (uint64_t id : unique->ids[t]) {
        rows[t].insert(rows[t].end(), tables[t].begin() + id * dim,
                       tables[t].begin() + (id + 1) * dim);
      }
    }
    std::vector<float> pooled(n * m->pooled_dim());
    ASSERT_TRUE(GatherPooled(sb, *unique, {rows[0], rows[1]}, dim, spec.pooling,
                             absl::Span<float>(pooled))
                    .ok());
    auto loss = m->ForwardBackward(params.data(), dense.data(), pooled.data(),
                                   labels.data(), n, 1.0f / n, grads.data(),
                                   d_pooled.data());
    ASSERT_TRUE(loss.ok());
    if (step < 20) first += *loss / n / 20;
    if (step >= steps - 20) last += *loss / n / 20;
    std::vector<std::vector<float>> row_grads(2);
    std::vector<absl::Span<float>> spans;
    for (int t = 0; t < 2; ++t) {
      row_grads[t].resize(rows[t].size());
      spans.emplace_back(row_grads[t]);
    }
    ASSERT_TRUE(
        ScatterRowGradients(sb, *unique, d_pooled, dim, spec.pooling, spans)
            .ok());
    for (size_t i = 0; i < params.size(); ++i) params[i] -= lr * grads[i];
    for (int t = 0; t < 2; ++t) {
      for (size_t r = 0; r < unique->ids[t].size(); ++r) {
        for (int e = 0; e < dim; ++e) {
          tables[t][unique->ids[t][r] * dim + e] -=
              lr * row_grads[t][r * dim + e];
        }
      }
    }
  }
  EXPECT_GT(first, 0.5);
  EXPECT_LT(last, 0.1) << "first " << first;
  // Every (id0, id1) pair is now classified right.
  int right = 0;
  for (int a = 0; a < vocab; ++a) {
    for (int c = 0; c < vocab; ++c) {
      std::vector<float> pooled(tables[0].begin() + a * dim,
                                tables[0].begin() + (a + 1) * dim);
      pooled.insert(pooled.end(), tables[1].begin() + c * dim,
                    tables[1].begin() + (c + 1) * dim);
      const std::vector<float> dense = {0.0f, 0.0f};
      float p = 0;
      ASSERT_TRUE(
          m->Predict(params.data(), dense.data(), pooled.data(), 1, &p).ok());
      right += (p > 0.5f) == (a % 2 == 0);
    }
  }
  EXPECT_EQ(right, vocab * vocab);
}

}  // namespace
}  // namespace ferry
