// CTR training data in memory: the examples of a Criteo TSV file
// (data/criteo_format.h) streamed through CriteoReader into a compact form
// with random access by sample index, and the assembly of a batch of sample
// indices into dense features, labels and one-id-per-field bags.
//
// One example costs kCtrBytesPerExample = 161 bytes:
//   13 dense values  as float, already transformed (CtrDenseTransform)  52
//   26 ids           as uint32 (the 8-hex-digit value; 0 when empty)   104
//   missing mask     uint32, bit f: field C(f+1) was empty                4
//   label            one byte                                             1
// Storing the 64-bit ids (the empty value is 2^32, so 32 bits do not hold
// it) would cost 52 + 208 + 1 = 261 bytes: the uint32 + mask form halves the
// ids and saves 38 % per example (Criteo Kaggle's 45.8M rows: 7.4 GB instead
// of 12 GB). Whether an integer feature was empty is not kept: the transform
// maps it to 0, as it maps a 0.
//
// Examples live in chunks of kCtrChunkExamples, each sized exactly once full
// and the last one trimmed after loading: memory is the bytes above plus at
// most two chunks (10.5 MB each) while loading, never a doubled vector.
//
// A CtrDataset is a value (movable and copyable); const access from many
// threads at once is safe.
#ifndef FERRY_DATA_CTR_DATASET_H_
#define FERRY_DATA_CTR_DATASET_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "data/criteo_format.h"
#include "data/criteo_reader.h"
#include "model/embedding_bag.h"

namespace ferry {

inline constexpr int kCtrChunkExamples = 1 << 16;
inline constexpr int64_t kCtrBytesPerExample =
    kCriteoDense * sizeof(float) + kCriteoCategorical * sizeof(uint32_t) +
    sizeof(uint32_t) + sizeof(uint8_t);
static_assert(kCtrBytesPerExample == 161);
static_assert(kCriteoCategorical <= 32, "the missing mask is 32 bits");

// The standard DLRM transform of a Criteo integer: log(1 + max(x, 0)),
// computed in double and rounded to float. An empty integer reads as 0 and
// so becomes 0.
float CtrDenseTransform(int64_t x);

struct CtrDatasetOptions {
  // > 0: load at most this many examples of each file (a slice for tests and
  // quick runs); 0: all of them.
  int64_t max_rows = 0;
  CriteoReaderOptions reader;
};

class CtrDataset {
 public:
  CtrDataset() = default;

  // Streams the Criteo TSV file `path` (plain or gzip) into memory, up to
  // options.max_rows examples. Malformed lines are skipped and counted as the
  // reader does; read_stats() and load_summary() report them. With max_rows
  // the file is judged on the lines read before the stop (more than
  // reader.max_malformed_fraction malformed refuses it as the reader does).
  //
  // Errors (messages name the file): INVALID_ARGUMENT (options out of
  // range), NOT_FOUND, FAILED_PRECONDITION (not a regular file), DATA_LOSS
  // (empty, no example, mostly malformed with its first bad lines and their
  // numbers, corrupt or truncated gzip), INTERNAL (I/O); as CriteoReader.
  static absl::StatusOr<CtrDataset> LoadFile(
      const std::string& path, const CtrDatasetOptions& options = {});

  // Adds one example at index num_samples(). REQUIRES: every id < 2^32 or
  // == kCriteoMissingId (as ParseCriteoLine returns them).
  void Append(const CriteoExample& example);
  // Gives back the unused room of the last chunk (LoadFile calls it).
  void ShrinkToFit();

  int64_t num_samples() const { return num_samples_; }

  // Sample `i`. REQUIRES: 0 <= i < num_samples(), 0 <= field < 26.
  int label(int64_t i) const;
  absl::Span<const float> dense(int64_t i) const;  // kCriteoDense values
  uint64_t id(int64_t i, int field) const;  // kCriteoMissingId when empty
  bool missing(int64_t i, int field) const;

  // Fills `batch` (model/embedding_bag.h) with samples `indices`, in order
  // (duplicates allowed; an empty list gives batch 0 and offsets {0}):
  // kCriteoCategorical fields of one id each, the 8-hex-digit value or
  // kCriteoMissingId (2^32) for an empty column. The vectors are resized to
  // fit, so a CtrBatch reused for batches of one size allocates only once.
  // Nothing is changed unless OK is returned.
  // Errors: OUT_OF_RANGE naming the first index outside [0, num_samples());
  // INVALID_ARGUMENT when indices.size() * 26 does not fit the int32 offsets.
  absl::Status GatherBatch(absl::Span<const int64_t> indices,
                           CtrBatch& batch) const;

  // Bytes held by the example arrays (their capacities): num_samples() *
  // kCtrBytesPerExample after LoadFile or ShrinkToFit.
  int64_t MemoryBytes() const;

  // Where the examples came from ("" for Append) and the reader's counts
  // when the load finished: lines, examples, malformed and the first
  // malformed lines as "line N: reason".
  const std::string& path() const { return path_; }
  const CriteoReadStats& read_stats() const { return read_stats_; }
  // One line for logs (CriteoReader::Summary, plus the max_rows stop).
  const std::string& load_summary() const { return load_summary_; }

 private:
  struct Chunk {
    std::vector<float> dense;     // [n, kCriteoDense]
    std::vector<uint32_t> ids;    // [n, kCriteoCategorical]; 0 when missing
    std::vector<uint32_t> masks;  // [n]; bit f: field f empty
    std::vector<uint8_t> labels;  // [n]
  };
  const Chunk& ChunkOf(int64_t i) const {
    return chunks_[static_cast<size_t>(i / kCtrChunkExamples)];
  }
  static size_t Row(int64_t i) {
    return static_cast<size_t>(i % kCtrChunkExamples);
  }

  std::vector<Chunk> chunks_;
  int64_t num_samples_ = 0;
  std::string path_;
  CriteoReadStats read_stats_;
  std::string load_summary_;
};

// A training job's CTR data: DIR/train.tsv and DIR/test.tsv.
struct CtrTrainTest {
  CtrDataset train;
  CtrDataset test;
};

// The file of split `name` ("train" or "test") in `dir`: DIR/NAME.tsv or
// DIR/NAME.tsv.gz, whichever exists (the content, not the name, says whether
// it is gzip). Errors: NOT_FOUND naming both candidates and how to make
// them (`ferry data ctr --out DIR`); FAILED_PRECONDITION when both exist
// (which one is meant is unclear) or `dir` is not a directory.
absl::StatusOr<std::string> FindCtrFile(const std::string& dir,
                                        const std::string& name);

// The examples CtrDataset::LoadFile(path, options) would hold, counted while
// streaming (nothing kept: constant memory), with its errors for the same
// file (with max_rows > 0: the count stops there, unchecked beyond).
absl::StatusOr<int64_t> CountCtrExamples(const std::string& path,
                                         const CtrDatasetOptions& options = {});

// Loads both splits of `dir` with `options` (max_rows applies to each).
// Errors: NOT_FOUND naming `dir` when it does not exist; as FindCtrFile and
// CtrDataset::LoadFile otherwise.
absl::StatusOr<CtrTrainTest> LoadCtrTrainTest(
    const std::string& dir, const CtrDatasetOptions& options = {});

// The dataset spec of a CTR job, "criteo:DIR" (as --dataset takes it):
// true for any name starting with "criteo:".
bool IsCtrDatasetSpec(const std::string& spec);
// DIR of "criteo:DIR". INVALID_ARGUMENT for another name or an empty DIR.
// The dense trainers' LoadTrainTest (data/data_source.h) refuses these specs;
// the sparse (CTR) trainers read them.
absl::StatusOr<std::string> ParseCtrDatasetSpec(const std::string& spec);

}  // namespace ferry

#endif  // FERRY_DATA_CTR_DATASET_H_
