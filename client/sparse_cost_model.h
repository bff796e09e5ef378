// Cost model of one synchronous step of a sparse (DLRM) model in four
// modes: embedding tables on the PS shards, ring with an all-gather of the
// touched rows, ring with every table's full gradient all-reduced (DDP
// with dense embedding gradients), and hybrid (the tables on the shards,
// the dense layers all-reduced in the ring). Expected unique ids per batch from
// the ids' distribution, bytes per step per worker and a step time.
//
// Pure functions, no IO; thread-compatible. docs/comparison.md, "Sparse
// models", derives every term.
//
// Ids: table t draws, per sample, its empty value (one id of its own) with
// probability empty_rate, else rank k in [1, vocab] with probability
// proportional to k^-s: `ferry data ctr`'s fields (data/ctr_generator.h).
// With n draws, E[unique] = sum over ids of 1 - (1 - p)^n.
//
// Bytes, per worker and step, in ferry's wire format (protobuf framing
// included, gRPC/HTTP2/TCP not), u_t the worker's unique ids in table t, d
// the embedding dim, W workers, S shards:
// - PS: the dense parameters as client/cost_model.h's PS (push + pull of
//   chunks), plus rows: per unique id 8 B pulled-for + 4d B pulled + 8 B +
//   4d B pushed (PullRowsRequest / PullRowsResponse / PushRequest.rows,
//   proto/ferry/v1/ps.proto), one SparseRowsPart per (table, shard) holding
//   ids, one PullRows call per shard holding ids.
// - All-gather: the dense ring all-reduce, plus every worker's (ids, row
//   gradients) passed around the ring: W - 1 sets of (8 + 4d) u B each way
//   (its own and W - 2 forwarded out, W - 1 in), each set one
//   RingRowGradients in a header message and pieces of at most 1 MiB
//   (worker/ring_tables.h, ring/ring_bytes.h).
// - All-reduce: the dense ring all-reduce plus every table's full gradient
//   (rows R = sum of vocab (+ 1 for the empty id) times d floats), as
//   client/cost_model.h's ring: 2(W - 1)/W x 4 R d B each way.
// - Hybrid: the dense ring all-reduce plus PS's rows (pull and push).
//
// Time: step = compute + dense exchange (client/cost_model.h's prediction
// with no overlap: a DLRM worker declares its dense gradient after
// backward) + the sparse exchange + the row updates, each phase at the
// slower of the worker's link and the shards' (PS: a shard's link carries
// W/S of every worker's rows) plus a latency per round trip or ring stage.
// Hybrid's row push is sent while the dense all-reduce runs (worker/
// hybrid_exchange.h): only the part of it longer than the all-reduce adds.
#ifndef FERRY_CLIENT_SPARSE_COST_MODEL_H_
#define FERRY_CLIENT_SPARSE_COST_MODEL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace ferry {

// One embedding table's id distribution (see the top of this file).
struct ZipfTable {
  int64_t vocab = 1;      // Zipf ranks 1..vocab
  double empty_rate = 0;  // probability of the empty value's id, in [0, 1)
};

// sum_{k=1}^{vocab} k^-exponent: exact over the first 1,024 terms,
// Euler-Maclaurin beyond (relative error < 1e-12). REQUIRES: vocab >= 1,
// exponent > 0.
double ZipfNormalizer(int64_t vocab, double exponent);

// Expected distinct ids among `draws` independent draws of `table` (draws
// may be fractional; <= 0 gives 0). Exact sum over every id: O(vocab).
double ExpectedUniqueIdsExact(const ZipfTable& table, double exponent,
                              double draws);
// The same, O(1) in vocab: exact over the first 1,024 ranks, beyond them
// Euler-Maclaurin with the integral taken by Simpson's rule in log x
// (relative error < 1e-6 of the exact sum; tested up to vocab 1e7).
double ExpectedUniqueIds(const ZipfTable& table, double exponent, double draws);

// The empty rate of each of `fields` fields in `ferry data ctr --seed
// seed` (mirrors data/ctr_generator.cc: every third field 20-50 %, the
// others up to 5 %; checked against the generator's rows in the tests).
std::vector<double> CtrGeneratorEmptyRates(uint64_t seed, int fields);

// One worker's embedding-row traffic with the shards per step, in bytes
// (expected values: fractional), for unique_per_table[t] ids of table t.
struct PsRowTraffic {
  double pull_request = 0;   // PullRowsRequests: ids (worker -> shards)
  double pull_response = 0;  // PullRowsResponses: rows (shards -> worker)
  double push = 0;           // PushRequest.rows messages: ids + gradients
  double sent() const { return pull_request + push; }
  double received() const { return pull_response; }
  int64_t calls = 0;  // PullRows calls (shards holding some id)
};
PsRowTraffic PsRowBytes(const std::vector<double>& unique_per_table, int dim,
                        int shards);

// One worker's set in the ring all-gather: its ids and row gradients of
// every table (one RingMessage per table, split at piece_bytes).
double AllGatherSetBytes(const std::vector<double>& unique_per_table, int dim,
                         int64_t piece_bytes);

enum class SparseMode { kPs, kAllGather, kAllReduce, kHybrid };
inline constexpr SparseMode kSparseModes[] = {
    SparseMode::kPs, SparseMode::kAllGather, SparseMode::kAllReduce,
    SparseMode::kHybrid};
// "ps", "all-gather", "all-reduce", "hybrid".
const char* SparseModeName(SparseMode mode);

struct SparseCostInput {
  std::vector<int64_t> dense_tensor_sizes;  // DlrmParameterLayout's
  int embedding_dim = 16;
  std::vector<ZipfTable> tables;  // one per field; one id per sample each
  double zipf_exponent = 1.1;
  int64_t global_batch = 128;  // split over the workers as the coordinator
                               // does: b/W, the first b%W one more
  int workers = 2;
  int shards = 2;                         // PS
  double bandwidth_bytes_per_second = 0;  // per process, each way; 0: none
  double latency_seconds = 0;             // per message
  double compute_seconds = 0;             // forward + backward, one worker
  double overhead_seconds = 0;            // the dense exchange's (cost_model)
  double update_seconds_per_element = 1e-9;  // optimizer, per float updated
  int64_t max_chunk_elements = 256 * 1024;   // PS chunks
  int64_t bucket_elements = 25 * 1024 * 1024 / 4;  // ring buckets
  int64_t piece_elements = 256 * 1024;             // ring messages
  // Measured unique ids per step, summed over tables and workers (`ferry
  // local`'s summary `unique_ids_per_step`); >= 0 replaces the expectation
  // (spread over the tables in the model's proportions). < 0: the model's.
  double measured_unique_ids = -1;
};

struct SparseModeCost {
  SparseMode mode = SparseMode::kPs;
  // Per worker per step (mean over the workers), dense and sparse parts.
  double dense_sent = 0, dense_received = 0;
  double sparse_sent = 0, sparse_received = 0;
  double rows_moved = 0;      // embedding rows sent or received by a worker
  double dense_seconds = 0;   // the dense exchange
  double sparse_seconds = 0;  // rows' (or tables') exchange
  double update_seconds = 0;  // applying the rows (PS: on the shards)
  double step_seconds = 0;    // compute + the three above
  double sent() const { return dense_sent + sparse_sent; }
  double received() const { return dense_received + sparse_received; }
  double bytes() const { return sent() + received(); }
};

struct SparsePrediction {
  int64_t dense_params = 0;
  int64_t table_rows = 0;          // sum of vocab (+1 per table with empties)
  int64_t lookups_per_worker = 0;  // the largest share x tables
  // Expected (or measured) unique ids per step, summed over tables.
  double unique_ids_per_worker = 0;      // mean over the workers
  double unique_ids_all_workers = 0;     // sum over workers (= summary's)
  double unique_ids_union = 0;           // distinct over the global batch
  std::vector<double> unique_per_table;  // per worker (mean), per table
  SparseModeCost modes[4];               // in kSparseModes order
  const SparseModeCost& mode(SparseMode m) const {
    return modes[static_cast<int>(m)];
  }
};

// Errors: INVALID_ARGUMENT for workers or shards < 1, no dense tensors or a
// negative one, dim < 1, no tables, a vocab < 1, an empty rate outside [0,
// 1), an exponent <= 0 or not finite, batch < 1, negative times or rates,
// chunk/bucket/piece < 1.
absl::StatusOr<SparsePrediction> PredictSparseStep(const SparseCostInput& in);

// The winner: by step time when the input has a link (bandwidth or
// latency), else by bytes per worker.
SparseMode FastestSparseMode(const SparsePrediction& p, bool by_time);

// One quantity varied, everything else held.
enum class SparseSweepAxis {
  kBatch,  // the global batch (compute scaled with the per-worker batch)
  kTable,  // every vocabulary x a factor (value: the factor)
  kZipf,   // the exponent
};
// "batch", "table", "zipf"; parse: INVALID_ARGUMENT naming the three.
const char* SparseSweepAxisName(SparseSweepAxis axis);
absl::StatusOr<SparseSweepAxis> ParseSparseSweepAxis(const std::string& name);
// batch: 2^4 .. 2^20 (at least W); table: 2^-24 .. 2^2; zipf: 0.2 .. 2.0.
std::vector<double> DefaultSparseSweepValues(SparseSweepAxis axis,
                                             const SparseCostInput& in);
// `in` with the axis set to `value`.
SparseCostInput SparseInputAt(const SparseCostInput& in, SparseSweepAxis axis,
                              double value);

struct SparseSweepPoint {
  double value = 0;
  SparsePrediction prediction;
  SparseMode fastest = SparseMode::kPs;
};
// Between two points where two modes swap places: `value` where they tie
// (bisected: the batch to 1, the table factor to 0.5 %, the exponent to
// 0.002); `below` is faster under it, `above` from it on.
struct SparseCrossoverPoint {
  SparseMode below = SparseMode::kPs;
  SparseMode above = SparseMode::kPs;
  double value = 0;
  int64_t table_rows = 0;  // the tables' rows at `value`
};
struct SparseSweep {
  SparseSweepAxis axis = SparseSweepAxis::kBatch;
  bool by_time = true;  // false: by bytes (no link given)
  std::vector<SparseSweepPoint> points;
  std::vector<SparseCrossoverPoint> crossovers;  // by value
};
// Errors: PredictSparseStep's; INVALID_ARGUMENT for no values or values not
// increasing, a batch < 1, a factor or exponent <= 0.
absl::StatusOr<SparseSweep> SweepSparse(const SparseCostInput& in,
                                        SparseSweepAxis axis,
                                        const std::vector<double>& values);

}  // namespace ferry

#endif  // FERRY_CLIENT_SPARSE_COST_MODEL_H_
