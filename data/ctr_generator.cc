#include "data/ctr_generator.h"

#include <zlib.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <memory>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_system.h"
#include "common/status_macros.h"
#include "compute/kernel_math.h"
#include "data/ctr_metrics.h"
#include "data/zipf_sampler.h"
#include "nlohmann/json.hpp"

namespace ferry {
namespace {

// The teacher's scales: a per-id weight N(0, kWeightScale^2) per field, FM
// factors N(0, kFactorScale^2), dense weights N(0, kDenseScale^2).
constexpr double kWeightScale = 0.35;
constexpr double kFactorScale = 0.15;
constexpr double kDenseScale = 0.15;
constexpr int64_t kPilotRows = 4096;
constexpr int kPilotSplit = 2;
constexpr uint64_t kTeacherSalt = 0x7eac4e5d1f00d5eeull;
constexpr uint64_t kIdSalt = 0x1d5a17c0ffee1234ull;
constexpr int64_t kMaxDenseValue = int64_t{1} << 40;
constexpr size_t kFlushBytes = 1 << 20;

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// Writes lines to a plain or gzip file under a temporary name; Commit()
// renames it into place.
class LineSink {
 public:
  static absl::StatusOr<std::unique_ptr<LineSink>> Open(std::string path,
                                                        bool gzip) {
    auto sink = std::unique_ptr<LineSink>(new LineSink(std::move(path), gzip));
    const std::string tmp = sink->path_ + ".tmp";
    if (gzip) {
      sink->gz_ = gzopen(tmp.c_str(), "wb6");
      if (sink->gz_ == nullptr) return sink->Error("cannot create");
    } else {
      sink->file_ = std::fopen(tmp.c_str(), "wb");
      if (sink->file_ == nullptr) return sink->Error("cannot create");
    }
    return sink;
  }
  ~LineSink() {
    if (gz_ != nullptr) gzclose(gz_);
    if (file_ != nullptr) std::fclose(file_);
  }
  std::string& buffer() { return buffer_; }
  absl::Status MaybeFlush() {
    return buffer_.size() >= kFlushBytes ? Flush() : absl::OkStatus();
  }
  absl::Status Commit() {
    RETURN_IF_ERROR(Flush());
    const int closed = gz_ != nullptr ? gzclose(gz_) : std::fclose(file_);
    gz_ = nullptr;
    file_ = nullptr;
    if (closed != 0) return Error("cannot close");
    const std::string tmp = path_ + ".tmp";
    if (std::rename(tmp.c_str(), path_.c_str()) != 0)
      return Error("cannot rename");
    return absl::OkStatus();
  }

 private:
  LineSink(std::string path, bool gzip) : path_(std::move(path)), gzip_(gzip) {
    buffer_.reserve(kFlushBytes + 4096);
  }
  absl::Status Error(const std::string& what) const {
    return absl::InternalError(
        absl::StrCat(path_, gzip_ ? " (gzip)" : "", ": ", what, ": ",
                     std::generic_category().message(errno)));
  }
  absl::Status Flush() {
    if (buffer_.empty()) return absl::OkStatus();
    const bool ok = gz_ != nullptr
                        ? gzwrite(gz_, buffer_.data(),
                                  static_cast<unsigned>(buffer_.size())) ==
                              static_cast<int>(buffer_.size())
                        : std::fwrite(buffer_.data(), 1, buffer_.size(),
                                      file_) == buffer_.size();
    if (!ok) return Error("write failed");
    buffer_.clear();
    return absl::OkStatus();
  }

  const std::string path_;
  const bool gzip_;
  gzFile gz_ = nullptr;
  std::FILE* file_ = nullptr;
  std::string buffer_;
};

}  // namespace

std::vector<int64_t> CriteoLikeVocabSizes() {
  return {1460,  583,  10131227, 2202608, 305, 24,     12517,   633,   3,
          93145, 5683, 8351593,  3194,    27,  14992,  5461306, 10,    5652,
          2173,  4,    7046547,  18,      15,  286181, 105,     142572};
}

absl::Status CheckCtrGeneratorOptions(const CtrGeneratorOptions& o) {
  if (o.rows < 1 || o.test_rows < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "rows (%d) and test rows (%d) must be >= 1", o.rows, o.test_rows));
  }
  if (!o.vocab_sizes.empty()) {
    if (o.vocab_sizes.size() != kCriteoCategorical) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%d vocabulary sizes given, the format has %d "
                          "categorical fields",
                          o.vocab_sizes.size(), kCriteoCategorical));
    }
    for (size_t f = 0; f < o.vocab_sizes.size(); ++f) {
      if (o.vocab_sizes[f] < 1 || o.vocab_sizes[f] >= (int64_t{1} << 32)) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "vocabulary size of C%d is %d, must be in [1, 2^32)", f + 1,
            o.vocab_sizes[f]));
      }
    }
  }
  if (!(o.zipf_exponent > 0.0) || !std::isfinite(o.zipf_exponent)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "Zipf exponent %g must be finite and > 0", o.zipf_exponent));
  }
  if (o.teacher_factors < 0 || o.teacher_factors > 64) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "teacher factors %d outside [0, 64]", o.teacher_factors));
  }
  if (!(o.target_ctr > 0.0 && o.target_ctr < 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("target CTR %g outside (0, 1)", o.target_ctr));
  }
  return absl::OkStatus();
}

CtrGenerator::CtrGenerator(CtrGeneratorOptions options)
    : options_(std::move(options)) {}

absl::StatusOr<CtrGenerator> CtrGenerator::Create(
    const CtrGeneratorOptions& options) {
  RETURN_IF_ERROR(CheckCtrGeneratorOptions(options));
  CtrGenerator g(options);
  if (g.options_.vocab_sizes.empty())
    g.options_.vocab_sizes = CriteoLikeVocabSizes();
  // Per-field and per-feature shapes from their own stream.
  CounterRng shape(options.seed, uint64_t{3} << 48);
  for (int f = 0; f < kCriteoCategorical; ++f) {
    ASSIGN_OR_RETURN(
        ZipfSampler zipf,
        ZipfSampler::Create(g.options_.vocab_sizes[f], options.zipf_exponent));
    // A third of the fields are often empty (as Criteo's C19-C26).
    const double missing =
        f % 3 == 2 ? 0.2 + 0.3 * shape.Uniform() : 0.05 * shape.Uniform();
    g.fields_.push_back(Field{
        zipf, missing, Mix64(options.seed ^ kIdSalt ^ (uint64_t(f) << 40))});
  }
  for (int j = 0; j < kCriteoDense; ++j) {
    Dense d;
    d.mu = 4.0 * shape.Uniform();
    d.sigma = 0.5 + shape.Uniform();
    d.missing = 0.4 * shape.Uniform();
    d.weight = kDenseScale * shape.Normal();
    g.dense_.push_back(d);
  }
  g.CalibrateBias();
  return g;
}

double CtrGenerator::TeacherLogit(const CriteoExample& x) const {
  const int k = options_.teacher_factors;
  double logit = bias_;
  double sum[64] = {0};
  double squares = 0;
  for (int f = 0; f < kCriteoCategorical; ++f) {
    const uint64_t stream = (uint64_t(f) << 56) ^ x.ids[f];
    CounterRng rng(options_.seed ^ kTeacherSalt, stream);
    logit += kWeightScale * rng.Normal();
    for (int c = 0; c < k; ++c) {
      const double u = kFactorScale * rng.Normal();
      sum[c] += u;
      squares += u * u;
    }
  }
  double fm = -squares;
  for (int c = 0; c < k; ++c) fm += sum[c] * sum[c];
  logit += 0.5 * fm;
  for (int j = 0; j < kCriteoDense; ++j) {
    if (x.dense_missing & (1u << j)) continue;
    const double v = static_cast<double>(std::max<int64_t>(x.dense[j], 0));
    logit += dense_[j].weight * std::log1p(v) / (dense_[j].mu + 1.0);
  }
  return logit;
}

CriteoExample CtrGenerator::Row(int split, int64_t row,
                                double* probability) const {
  CriteoExample x;
  CounterRng rng(options_.seed,
                 (uint64_t(split) << 48) | static_cast<uint64_t>(row));
  for (int f = 0; f < kCriteoCategorical; ++f) {
    const Field& field = fields_[f];
    if (rng.Uniform() < field.missing) {
      x.ids[f] = kCriteoMissingId;
    } else {
      const int64_t rank = field.zipf.Sample(rng);
      x.ids[f] = Mix64(field.salt ^ static_cast<uint64_t>(rank)) & 0xffffffffu;
    }
  }
  for (int j = 0; j < kCriteoDense; ++j) {
    const Dense& d = dense_[j];
    if (rng.Uniform() < d.missing) {
      x.dense_missing |= 1u << j;
      x.dense[j] = 0;
    } else {
      const double v = std::floor(std::exp(d.mu + d.sigma * rng.Normal())) - 1;
      x.dense[j] = static_cast<int64_t>(
          std::min(v, static_cast<double>(kMaxDenseValue)));
    }
  }
  const double p = Sigmoid(TeacherLogit(x));
  x.label = rng.Uniform() < p ? 1 : 0;
  if (probability != nullptr) *probability = p;
  return x;
}

void CtrGenerator::CalibrateBias() {
  bias_ = 0;
  std::vector<double> logits;
  for (int64_t r = 0; r < kPilotRows; ++r)
    logits.push_back(TeacherLogit(Row(kPilotSplit, r, nullptr)));
  double lo = -30, hi = 30;
  for (int i = 0; i < 60; ++i) {
    const double mid = 0.5 * (lo + hi);
    double mean = 0;
    for (double l : logits) mean += Sigmoid(l + mid);
    mean /= static_cast<double>(logits.size());
    (mean < options_.target_ctr ? lo : hi) = mid;
  }
  bias_ = 0.5 * (lo + hi);
}

absl::StatusOr<CtrGeneratedMeta> WriteCtrDataset(
    const std::string& dir, const CtrGeneratorOptions& options,
    const std::function<void(int64_t, int64_t)>& progress) {
  ASSIGN_OR_RETURN(const CtrGenerator generator, CtrGenerator::Create(options));
  FileSystem* fs = PosixFileSystem();
  RETURN_IF_ERROR(fs->CreateDirectories(dir));
  const int64_t total = options.rows + options.test_rows;
  const int64_t every = std::max<int64_t>(1, total / 100);
  int64_t done = 0;
  CtrGeneratedMeta meta;
  meta.rows = options.rows;
  meta.test_rows = options.test_rows;
  meta.teacher_bias = generator.bias();
  std::vector<float> test_p;
  std::vector<int32_t> test_labels;
  test_p.reserve(static_cast<size_t>(options.test_rows));
  test_labels.reserve(static_cast<size_t>(options.test_rows));
  const std::string suffix = options.gzip ? ".tsv.gz" : ".tsv";
  for (int split = 0; split < 2; ++split) {
    const int64_t rows = split == 0 ? options.rows : options.test_rows;
    ASSIGN_OR_RETURN(
        std::unique_ptr<LineSink> sink,
        LineSink::Open(
            absl::StrCat(dir, "/", split == 0 ? "train" : "test", suffix),
            options.gzip));
    int64_t positives = 0;
    for (int64_t r = 0; r < rows; ++r) {
      double p = 0;
      const CriteoExample x = generator.Row(split, r, &p);
      positives += x.label;
      if (split == 1) {
        test_p.push_back(static_cast<float>(p));
        test_labels.push_back(x.label);
      }
      AppendCriteoLine(x, sink->buffer());
      sink->buffer() += '\n';
      RETURN_IF_ERROR(sink->MaybeFlush());
      if (progress && ++done % every == 0) progress(done, total);
    }
    RETURN_IF_ERROR(sink->Commit());
    (split == 0 ? meta.train_positive_rate : meta.test_positive_rate) =
        static_cast<double>(positives) / static_cast<double>(rows);
  }
  absl::StatusOr<double> auc = BinaryAuc(test_p, test_labels);
  meta.teacher_test_auc = auc.ok() ? *auc : std::nan("");
  ASSIGN_OR_RETURN(meta.teacher_test_logloss, LogLoss(test_p, test_labels));

  nlohmann::json j;
  j["format"] = "criteo-tsv";
  j["generator"] = "ferry data ctr";
  j["rows"] = meta.rows;
  j["test_rows"] = meta.test_rows;
  j["seed"] = options.seed;
  j["zipf_exponent"] = options.zipf_exponent;
  j["vocab_sizes"] = options.vocab_sizes.empty() ? CriteoLikeVocabSizes()
                                                 : options.vocab_sizes;
  j["teacher_factors"] = options.teacher_factors;
  j["target_ctr"] = options.target_ctr;
  j["gzip"] = options.gzip;
  j["train_positive_rate"] = meta.train_positive_rate;
  j["test_positive_rate"] = meta.test_positive_rate;
  if (auc.ok()) {
    j["teacher_test_auc"] = meta.teacher_test_auc;
  } else {
    j["teacher_test_auc"] = nullptr;  // one class only: undefined
  }
  j["teacher_test_logloss"] = meta.teacher_test_logloss;
  RETURN_IF_ERROR(
      fs->WriteFileAtomically(dir + "/meta.json", j.dump(2) + "\n"));
  return meta;
}

}  // namespace ferry
