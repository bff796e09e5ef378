// Generates a CTR data set in the Criteo TSV format (data/criteo_format.h)
// that is learnable and whose best attainable AUC is known:
//  - each categorical field f draws a rank from Zipf(vocab_sizes[f],
//    zipf_exponent) (rank 1 the most frequent) and prints it as a hashed
//    8-hex-digit id; a field is empty with its own seeded probability;
//  - each integer feature is floor(exp(mu + sigma * N(0, 1))) - 1 (a heavy
//    tailed count >= -1, as Criteo's), empty with its own probability;
//  - the label is Bernoulli(sigmoid(t(x))) for a hidden "teacher" t: a bias,
//    a weight per (field, id), a linear term in log1p(dense), and a
//    factorization machine over per-(field, id) factor vectors. Its
//    parameters are hashed from (seed, field, id), never stored, so the
//    vocabulary can hold millions of ids at no memory cost. The bias is set
//    so that the positive rate is about `target_ctr`.
// The teacher's AUC and log loss on the test rows are the ceiling a model
// can reach; they go to meta.json.
//
// Every value is a pure function of (seed, split, row): same options, same
// bytes (on one platform: exp/log/pow come from the C library).
#ifndef FERRY_DATA_CTR_GENERATOR_H_
#define FERRY_DATA_CTR_GENERATOR_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "data/criteo_format.h"
#include "data/zipf_sampler.h"

namespace ferry {

// Criteo Kaggle's per-field cardinalities (C1..C26): tens to millions.
std::vector<int64_t> CriteoLikeVocabSizes();

struct CtrGeneratorOptions {
  int64_t rows = 0;       // training rows (train.tsv)
  int64_t test_rows = 0;  // test rows (test.tsv)
  uint64_t seed = 1;
  double zipf_exponent = 1.1;
  std::vector<int64_t> vocab_sizes;  // 26 entries; empty: CriteoLikeVocabSizes
  int teacher_factors = 4;           // FM factor dimension
  double target_ctr = 0.25;
  bool gzip = false;  // write train.tsv.gz and test.tsv.gz
};

struct CtrGeneratedMeta {
  int64_t rows = 0, test_rows = 0;
  double train_positive_rate = 0, test_positive_rate = 0;
  double teacher_test_auc = 0, teacher_test_logloss = 0;
  double teacher_bias = 0;
};

// Checks `options`: INVALID_ARGUMENT naming the bad one (rows or test rows
// < 1, vocab_sizes not 26 sizes in [1, 2^32), exponent <= 0 or not finite,
// factors outside [0, 64], target_ctr outside (0, 1)).
absl::Status CheckCtrGeneratorOptions(const CtrGeneratorOptions& options);

// The teacher and the row generator, for tests and the writer.
class CtrGenerator {
 public:
  static absl::StatusOr<CtrGenerator> Create(
      const CtrGeneratorOptions& options);
  // Row `row` of split 0 (train) or 1 (test), and the teacher's probability.
  CriteoExample Row(int split, int64_t row, double* probability) const;
  // The teacher's logit for the features of `example` (label ignored).
  double TeacherLogit(const CriteoExample& example) const;
  double bias() const { return bias_; }

 private:
  explicit CtrGenerator(CtrGeneratorOptions options);
  void CalibrateBias();

  struct Field {
    ZipfSampler zipf;
    double missing;  // probability of an empty column
    uint64_t salt;   // rank -> printed id
  };
  CtrGeneratorOptions options_;
  std::vector<Field> fields_;
  struct Dense {
    double mu, sigma, missing, weight;  // value, emptiness, teacher weight
  };
  std::vector<Dense> dense_;
  double bias_ = 0;
};

// Writes DIR/train.tsv, DIR/test.tsv (".gz" with options.gzip) and
// DIR/meta.json (the options, the positive rates and the teacher's test AUC
// and log loss as "teacher_test_auc", "teacher_test_logloss"). Each file is
// written under a temporary name and renamed when complete (meta.json via
// FileSystem::WriteFileAtomically); DIR and its parents are created.
// `progress`, when set, is called with (rows written, rows in all) every
// ~1 % of the rows. Errors: INVALID_ARGUMENT (options), INTERNAL naming the
// path for I/O failures.
absl::StatusOr<CtrGeneratedMeta> WriteCtrDataset(
    const std::string& dir, const CtrGeneratorOptions& options,
    const std::function<void(int64_t, int64_t)>& progress = nullptr);

}  // namespace ferry

#endif  // FERRY_DATA_CTR_GENERATOR_H_
