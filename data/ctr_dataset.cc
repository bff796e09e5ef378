#include "data/ctr_dataset.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <memory>
#include <system_error>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace ferry {

float CtrDenseTransform(int64_t x) {
  return static_cast<float>(
      std::log1p(static_cast<double>(std::max<int64_t>(x, 0))));
}

void CtrDataset::Append(const CriteoExample& example) {
  if (chunks_.empty() ||
      chunks_.back().labels.size() == static_cast<size_t>(kCtrChunkExamples)) {
    // The full chunk stays exactly sized; the next one grows as it fills.
    if (!chunks_.empty()) {
      Chunk& full = chunks_.back();
      full.dense.shrink_to_fit();
      full.ids.shrink_to_fit();
      full.masks.shrink_to_fit();
      full.labels.shrink_to_fit();
    }
    chunks_.emplace_back();
  }
  Chunk& c = chunks_.back();
  for (int j = 0; j < kCriteoDense; ++j) {
    c.dense.push_back(CtrDenseTransform(example.dense[j]));
  }
  uint32_t mask = 0;
  for (int f = 0; f < kCriteoCategorical; ++f) {
    const uint64_t id = example.ids[f];
    if (id == kCriteoMissingId) {
      mask |= uint32_t{1} << f;
      c.ids.push_back(0);
    } else {
      c.ids.push_back(static_cast<uint32_t>(id));
    }
  }
  c.masks.push_back(mask);
  c.labels.push_back(static_cast<uint8_t>(example.label != 0));
  ++num_samples_;
}

void CtrDataset::ShrinkToFit() {
  for (Chunk& c : chunks_) {
    c.dense.shrink_to_fit();
    c.ids.shrink_to_fit();
    c.masks.shrink_to_fit();
    c.labels.shrink_to_fit();
  }
}

int CtrDataset::label(int64_t i) const { return ChunkOf(i).labels[Row(i)]; }

absl::Span<const float> CtrDataset::dense(int64_t i) const {
  return absl::MakeConstSpan(ChunkOf(i).dense)
      .subspan(Row(i) * kCriteoDense, kCriteoDense);
}

bool CtrDataset::missing(int64_t i, int field) const {
  return (ChunkOf(i).masks[Row(i)] >> field) & 1u;
}

uint64_t CtrDataset::id(int64_t i, int field) const {
  if (missing(i, field)) return kCriteoMissingId;
  return ChunkOf(i).ids[Row(i) * kCriteoCategorical + field];
}

absl::Status CtrDataset::GatherBatch(absl::Span<const int64_t> indices,
                                     CtrBatch& batch) const {
  constexpr size_t kMaxBatch =
      (static_cast<size_t>(std::numeric_limits<int32_t>::max()) - 1) /
      kCriteoCategorical;
  if (indices.size() > kMaxBatch) {
    return absl::InvalidArgumentError(
        absl::StrCat("a batch of ", indices.size(), " samples has more than ",
                     kMaxBatch, " (its ", kCriteoCategorical,
                     " bags per sample overflow int32 offsets)"));
  }
  for (size_t k = 0; k < indices.size(); ++k) {
    if (indices[k] < 0 || indices[k] >= num_samples_) {
      return absl::OutOfRangeError(
          absl::StrCat("sample index ", indices[k], " (batch position ", k,
                       ") is outside [0, ", num_samples_, ")",
                       path_.empty() ? "" : absl::StrCat(" of ", path_)));
    }
  }
  const size_t n = indices.size();
  batch.batch = static_cast<int>(n);
  batch.num_fields = kCriteoCategorical;
  batch.dense.resize(n * kCriteoDense);
  batch.labels.resize(n);
  batch.offsets.resize(n * kCriteoCategorical + 1);
  batch.ids.resize(n * kCriteoCategorical);
  for (size_t k = 0; k < n; ++k) {
    const int64_t i = indices[k];
    const Chunk& c = ChunkOf(i);
    const size_t row = Row(i);
    std::copy_n(c.dense.begin() + static_cast<ptrdiff_t>(row * kCriteoDense),
                kCriteoDense, batch.dense.begin() + k * kCriteoDense);
    batch.labels[k] = static_cast<float>(c.labels[row]);
    const uint32_t mask = c.masks[row];
    const uint32_t* ids = c.ids.data() + row * kCriteoCategorical;
    uint64_t* out = batch.ids.data() + k * kCriteoCategorical;
    for (int f = 0; f < kCriteoCategorical; ++f) {
      out[f] = ((mask >> f) & 1u) ? kCriteoMissingId : uint64_t{ids[f]};
    }
  }
  for (size_t b = 0; b < batch.offsets.size(); ++b) {
    batch.offsets[b] = static_cast<int32_t>(b);
  }
  return absl::OkStatus();
}

int64_t CtrDataset::MemoryBytes() const {
  int64_t bytes = 0;
  for (const Chunk& c : chunks_) {
    bytes += static_cast<int64_t>(c.dense.capacity() * sizeof(float) +
                                  c.ids.capacity() * sizeof(uint32_t) +
                                  c.masks.capacity() * sizeof(uint32_t) +
                                  c.labels.capacity() * sizeof(uint8_t));
  }
  return bytes;
}

absl::StatusOr<CtrDataset> CtrDataset::LoadFile(
    const std::string& path, const CtrDatasetOptions& options) {
  if (options.max_rows < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": max_rows ", options.max_rows, " is negative (0: all rows)"));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<CriteoReader> reader,
                   CriteoReader::Open(path, options.reader));
  CtrDataset data;
  data.path_ = path;
  CriteoExample example;
  bool stopped = false;
  while (true) {
    if (options.max_rows > 0 && data.num_samples_ == options.max_rows) {
      stopped = true;
      break;
    }
    ASSIGN_OR_RETURN(const bool more, reader->Next(example));
    if (!more) break;
    data.Append(example);
  }
  const CriteoReadStats& stats = reader->stats();
  if (stopped && static_cast<double>(stats.malformed) >
                     options.reader.max_malformed_fraction *
                         static_cast<double>(stats.lines)) {
    // The reader's own rule, applied where the slice ends.
    return absl::DataLossError(absl::StrFormat(
        "%s: %d of the first %d lines malformed (over %g%%), not a Criteo TSV "
        "file? First: %s",
        path, stats.malformed, stats.lines,
        100.0 * options.reader.max_malformed_fraction,
        absl::StrJoin(stats.first_errors, "; ")));
  }
  data.ShrinkToFit();
  data.read_stats_ = stats;
  data.load_summary_ = reader->Summary();
  if (stopped) {
    absl::StrAppend(&data.load_summary_, "; stopped at max_rows ",
                    options.max_rows);
  }
  return data;
}

absl::StatusOr<std::string> FindCtrFile(const std::string& dir,
                                        const std::string& name) {
  std::error_code error;
  const std::filesystem::file_status dir_status =
      std::filesystem::status(dir, error);
  if (!std::filesystem::exists(dir_status)) {
    return absl::NotFoundError(absl::StrCat(
        "Criteo data directory ", dir,
        " not found (write one with `ferry data ctr --out ", dir, "`)"));
  }
  if (!std::filesystem::is_directory(dir_status)) {
    return absl::FailedPreconditionError(absl::StrCat(
        dir,
        " is not a directory (criteo:DIR names a directory holding "
        "train.tsv and test.tsv)"));
  }
  const std::string plain =
      (std::filesystem::path(dir) / (name + ".tsv")).string();
  const std::string gzip = plain + ".gz";
  const bool has_plain = std::filesystem::exists(plain, error);
  const bool has_gzip = std::filesystem::exists(gzip, error);
  if (has_plain && has_gzip) {
    return absl::FailedPreconditionError(
        absl::StrCat("both ", plain, " and ", gzip,
                     " exist: remove the one that should not be read"));
  }
  if (!has_plain && !has_gzip) {
    return absl::NotFoundError(absl::StrCat(
        plain, " not found (nor ", gzip, "); a Criteo data directory holds ",
        "train.tsv and test.tsv (.gz accepted): `ferry data ctr --out ", dir,
        "` writes them"));
  }
  return has_plain ? plain : gzip;
}

absl::StatusOr<int64_t> CountCtrExamples(const std::string& path,
                                         const CtrDatasetOptions& options) {
  if (options.max_rows < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": max_rows ", options.max_rows, " is negative (0: all rows)"));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<CriteoReader> reader,
                   CriteoReader::Open(path, options.reader));
  CriteoExample example;
  int64_t count = 0;
  while (options.max_rows == 0 || count < options.max_rows) {
    ASSIGN_OR_RETURN(const bool more, reader->Next(example));
    if (!more) break;
    ++count;
  }
  return count;
}

absl::StatusOr<CtrTrainTest> LoadCtrTrainTest(
    const std::string& dir, const CtrDatasetOptions& options) {
  ASSIGN_OR_RETURN(const std::string train_path, FindCtrFile(dir, "train"));
  ASSIGN_OR_RETURN(const std::string test_path, FindCtrFile(dir, "test"));
  CtrTrainTest data;
  ASSIGN_OR_RETURN(data.train, CtrDataset::LoadFile(train_path, options));
  ASSIGN_OR_RETURN(data.test, CtrDataset::LoadFile(test_path, options));
  return data;
}

bool IsCtrDatasetSpec(const std::string& spec) {
  return absl::StartsWith(spec, "criteo:");
}

absl::StatusOr<std::string> ParseCtrDatasetSpec(const std::string& spec) {
  if (!IsCtrDatasetSpec(spec)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dataset '", spec, "' is not a CTR dataset: expected criteo:DIR"));
  }
  std::string dir = spec.substr(7);
  if (dir.empty()) {
    return absl::InvalidArgumentError(
        "dataset 'criteo:' names no directory: expected criteo:DIR (DIR "
        "holding train.tsv and test.tsv)");
  }
  return dir;
}

}  // namespace ferry
