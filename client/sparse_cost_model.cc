#include "client/sparse_cost_model.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "client/cost_model.h"
#include "common/status_macros.h"
#include "data/zipf_sampler.h"

namespace ferry {
namespace {

// A mode's dense part: client/cost_model.h's prediction for it.
void SetDense(SparseModeCost& m, const CostPrediction& dense) {
  m.dense_sent = static_cast<double>(dense.worker.sent);
  m.dense_received = static_cast<double>(dense.worker.received);
  m.dense_seconds = dense.comm_seconds;
}

// Ranks summed term by term before the asymptotic tail.
constexpr int64_t kExactHead = 1024;
// Simpson's step in log x for the tail's integral.
constexpr double kLogStep = 0.02;

// Protobuf wire sizes (field numbers < 16: one tag byte), as
// client/cost_model.cc counts them; lengths may be expectations.
double VarintLength(double v) {
  double n = 1;
  for (double x = std::ceil(v); x >= 128; x = std::floor(x / 128)) ++n;
  return n;
}
double IntFieldLength(double v) { return v == 0 ? 0 : 1 + VarintLength(v); }
double BytesFieldLength(double len) { return 1 + VarintLength(len) + len; }
constexpr double kIdLength = 12;        // job and worker ids
constexpr double kCounterValue = 1000;  // versions, op ids

// sum_{k=a}^{b} f(k) by Euler-Maclaurin, f' and f''' at the ends given.
double EulerMaclaurin(double integral, double fa, double fb, double d1a,
                      double d1b, double d3a, double d3b) {
  return integral + 0.5 * (fa + fb) + (d1b - d1a) / 12.0 - (d3b - d3a) / 720.0;
}

// 1 - (1 - q)^n, accurate for tiny q.
double HitProbability(double q, double n) {
  if (q >= 1) return 1;
  return -std::expm1(n * std::log1p(-q));
}

absl::Status ValidateSparse(const SparseCostInput& in) {
  if (in.workers < 1 || in.shards < 1) {
    return absl::InvalidArgumentError("workers and shards must be >= 1");
  }
  if (in.dense_tensor_sizes.empty()) {
    return absl::InvalidArgumentError("the model has no dense tensors");
  }
  for (int64_t s : in.dense_tensor_sizes) {
    if (s < 0) return absl::InvalidArgumentError("a tensor size is negative");
  }
  if (in.embedding_dim < 1) {
    return absl::InvalidArgumentError("embedding dim must be >= 1");
  }
  if (in.tables.empty()) {
    return absl::InvalidArgumentError("the model has no embedding tables");
  }
  for (size_t t = 0; t < in.tables.size(); ++t) {
    const ZipfTable& table = in.tables[t];
    if (table.vocab < 1 || !(table.empty_rate >= 0 && table.empty_rate < 1)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "table ", t, ": vocabulary ", table.vocab,
          " must be >= 1 and the empty rate ", table.empty_rate, " in [0, 1)"));
    }
  }
  if (!(in.zipf_exponent > 0) || !std::isfinite(in.zipf_exponent)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Zipf exponent ", in.zipf_exponent, " must be finite and > 0"));
  }
  if (in.global_batch < 1) {
    return absl::InvalidArgumentError("batch must be >= 1");
  }
  if (in.bandwidth_bytes_per_second < 0 || in.latency_seconds < 0 ||
      in.compute_seconds < 0 || in.overhead_seconds < 0 ||
      in.update_seconds_per_element < 0) {
    return absl::InvalidArgumentError(
        "bandwidth, latency, compute, overhead and update time must be >= 0");
  }
  if (in.max_chunk_elements < 1 || in.bucket_elements < 1 ||
      in.piece_elements < 1) {
    return absl::InvalidArgumentError(
        "chunk, bucket and piece sizes must be >= 1");
  }
  return absl::OkStatus();
}

double TransferSeconds(double bytes, double rate) {
  return rate > 0 ? bytes / rate : 0.0;
}

double Sum(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s;
}

}  // namespace

double ZipfNormalizer(int64_t vocab, double s) {
  const int64_t head = std::min(vocab, kExactHead);
  double h = 0;
  for (int64_t k = head; k >= 1; --k) h += std::pow(static_cast<double>(k), -s);
  if (vocab <= head) return h;
  const double a = static_cast<double>(head + 1);
  const double b = static_cast<double>(vocab);
  // integral of x^-s over [a, b], stable near s = 1.
  const double log_ratio = std::log(b / a);
  const double e = (1 - s) * log_ratio;
  const double integral = std::abs(e) < 1e-12
                              ? std::pow(a, 1 - s) * log_ratio
                              : std::pow(a, 1 - s) * std::expm1(e) / (1 - s);
  const auto d1 = [s](double x) { return -s * std::pow(x, -s - 1); };
  const auto d3 = [s](double x) {
    return -s * (s + 1) * (s + 2) * std::pow(x, -s - 3);
  };
  return h + EulerMaclaurin(integral, std::pow(a, -s), std::pow(b, -s), d1(a),
                            d1(b), d3(a), d3(b));
}

double ExpectedUniqueIdsExact(const ZipfTable& table, double s, double draws) {
  if (draws <= 0) return 0;
  double h = 0;
  for (int64_t k = table.vocab; k >= 1; --k)
    h += std::pow(static_cast<double>(k), -s);
  const double c = (1 - table.empty_rate) / h;
  double u = 0;
  for (int64_t k = table.vocab; k >= 1; --k)
    u += HitProbability(c * std::pow(static_cast<double>(k), -s), draws);
  if (table.empty_rate > 0) u += HitProbability(table.empty_rate, draws);
  return u;
}

double ExpectedUniqueIds(const ZipfTable& table, double s, double draws) {
  if (draws <= 0) return 0;
  const double c = (1 - table.empty_rate) / ZipfNormalizer(table.vocab, s);
  const auto g = [&](double x) {
    return HitProbability(c * std::pow(x, -s), draws);
  };
  const int64_t head = std::min(table.vocab, kExactHead);
  double u = table.empty_rate > 0 ? HitProbability(table.empty_rate, draws) : 0;
  for (int64_t k = head; k >= 1; --k) u += g(static_cast<double>(k));
  if (table.vocab <= head) return u;
  // The tail, ranks head+1 .. vocab: g is smooth and decreasing there.
  const double a = static_cast<double>(head + 1);
  const double b = static_cast<double>(table.vocab);
  // integral of g(x) dx = integral of g(e^t) e^t dt over [ln a, ln b].
  const double ta = std::log(a), tb = std::log(b);
  const int64_t steps =
      2 * std::max<int64_t>(
              4, static_cast<int64_t>(std::ceil((tb - ta) / kLogStep / 2)));
  const double dt = (tb - ta) / static_cast<double>(steps);
  const auto f = [&](double t) {
    const double x = std::exp(t);
    return g(x) * x;
  };
  double simpson = f(ta) + f(tb);
  for (int64_t i = 1; i < steps; ++i) {
    simpson += (i % 2 == 1 ? 4 : 2) * f(ta + dt * static_cast<double>(i));
  }
  const double integral = simpson * dt / 3;
  // g'(x) = -n s q / x (1 - q)^(n - 1), q = c x^-s.
  const auto d1 = [&](double x) {
    const double q = c * std::pow(x, -s);
    return -draws * s * q / x * std::exp((draws - 1) * std::log1p(-q));
  };
  return u + EulerMaclaurin(integral, g(a), g(b), d1(a), d1(b), 0, 0);
}

std::vector<double> CtrGeneratorEmptyRates(uint64_t seed, int fields) {
  // data/ctr_generator.cc, CtrGenerator::Create: one uniform per field from
  // the shape stream, in field order.
  CounterRng shape(seed, uint64_t{3} << 48);
  std::vector<double> rates;
  for (int f = 0; f < fields; ++f) {
    rates.push_back(f % 3 == 2 ? 0.2 + 0.3 * shape.Uniform()
                               : 0.05 * shape.Uniform());
  }
  return rates;
}

PsRowTraffic PsRowBytes(const std::vector<double>& unique_per_table, int dim,
                        int shards) {
  PsRowTraffic r;
  // Ids spread evenly over the shards (ShardOfRow is a hash): a shard
  // holds some of u ids with probability 1 - (1 - 1/S)^u.
  const double miss = 1.0 - 1.0 / shards;
  const auto holding = [&](double u) {
    return u <= 0 ? 0.0 : shards * (1.0 - std::pow(miss, u));
  };
  for (size_t t = 0; t < unique_per_table.size(); ++t) {
    const double u = unique_per_table[t];
    const double parts = holding(u);
    if (parts <= 0) continue;
    const double per_part = u / parts;
    const double table = IntFieldLength(static_cast<double>(t));
    const double ids = BytesFieldLength(8 * per_part);
    const double values = BytesFieldLength(4.0 * dim * per_part);
    // PullRowsRequest.tables / PullRowsResponse.tables (field 4 / 2) and a
    // PushRequest holding rows (field 5) per (table, shard).
    r.pull_request += parts * BytesFieldLength(table + ids);
    r.pull_response += parts * BytesFieldLength(table + values);
    r.push += parts * BytesFieldLength(table + ids + values);
  }
  const double calls = holding(Sum(unique_per_table));
  r.pull_request +=
      calls * (2 * BytesFieldLength(kIdLength) + IntFieldLength(kCounterValue));
  r.pull_response += calls * IntFieldLength(kCounterValue);
  r.calls = static_cast<int64_t>(std::ceil(calls - 1e-9));
  return r;
}

double AllGatherSetBytes(const std::vector<double>& unique_per_table, int dim,
                         int64_t piece_bytes) {
  // One worker's set is one RingRowGradients (worker/ring_tables.h): its
  // step, then a SparseRowsPart {table, ids, values} per table it touched.
  double payload = IntFieldLength(kCounterValue);
  for (size_t t = 0; t < unique_per_table.size(); ++t) {
    const double u = unique_per_table[t];
    if (u <= 0) continue;
    payload += BytesFieldLength(IntFieldLength(static_cast<double>(t)) +
                                BytesFieldLength(8 * u) +
                                BytesFieldLength(4.0 * dim * u));
  }
  // ring/ring_bytes.h: a header piece (the size, 8 bytes), then pieces of
  // at most piece_bytes, each a RingMessage {op_id, stage, piece, data,
  // encoded}.
  const auto message = [](double data) {
    return IntFieldLength(kCounterValue) + 2 + 2 + 2 + BytesFieldLength(data);
  };
  const double pieces = std::ceil(payload / static_cast<double>(piece_bytes));
  return message(8) + pieces * message(payload / pieces);
}

const char* SparseModeName(SparseMode mode) {
  switch (mode) {
    case SparseMode::kPs:
      return "ps";
    case SparseMode::kAllGather:
      return "all-gather";
    case SparseMode::kHybrid:
      return "hybrid";
    case SparseMode::kAllReduce:
      return "all-reduce";
  }
  return "?";
}

absl::StatusOr<SparsePrediction> PredictSparseStep(const SparseCostInput& in) {
  RETURN_IF_ERROR(ValidateSparse(in));
  const int w = in.workers, d = in.embedding_dim;
  const int64_t b = in.global_batch;
  const int num_tables = static_cast<int>(in.tables.size());
  SparsePrediction p;
  for (int64_t s : in.dense_tensor_sizes) p.dense_params += s;
  for (const ZipfTable& t : in.tables)
    p.table_rows += t.vocab + (t.empty_rate > 0 ? 1 : 0);

  // Per-worker shares: b/W, the first b%W workers one more (the
  // coordinator's FormStep). At most two distinct shares.
  const int64_t small = b / w, large = small + (b % w > 0 ? 1 : 0);
  const int64_t n_large = b % w, n_small = w - n_large;
  std::vector<double> u_small(num_tables), u_large(num_tables);
  p.unique_per_table.assign(num_tables, 0);
  for (int t = 0; t < num_tables; ++t) {
    u_small[t] = ExpectedUniqueIds(in.tables[t], in.zipf_exponent,
                                   static_cast<double>(small));
    u_large[t] = large == small
                     ? u_small[t]
                     : ExpectedUniqueIds(in.tables[t], in.zipf_exponent,
                                         static_cast<double>(large));
    p.unique_per_table[t] =
        (n_small * u_small[t] + n_large * u_large[t]) / static_cast<double>(w);
    p.unique_ids_union += ExpectedUniqueIds(in.tables[t], in.zipf_exponent,
                                            static_cast<double>(b));
  }
  if (in.measured_unique_ids >= 0) {
    const double modelled = Sum(p.unique_per_table);
    const double scale =
        modelled > 0 ? in.measured_unique_ids / w / modelled : 0.0;
    for (int t = 0; t < num_tables; ++t) {
      p.unique_per_table[t] *= scale;
      u_small[t] *= scale;
      u_large[t] *= scale;
    }
    p.unique_ids_union = std::min(p.unique_ids_union, in.measured_unique_ids);
  }
  p.unique_ids_per_worker = Sum(p.unique_per_table);
  p.unique_ids_all_workers = p.unique_ids_per_worker * w;
  p.lookups_per_worker = large * num_tables;
  // The busiest worker (the step waits for it): the larger share.
  const std::vector<double>& u_max = large > small ? u_large : u_small;

  // The dense parameters, as client/cost_model.h predicts them, with no
  // overlap (a DLRM worker declares its dense gradient after backward).
  CostInput dense;
  dense.workers = w;
  dense.shards = in.shards;
  dense.tensor_sizes = in.dense_tensor_sizes;
  dense.bandwidth_bytes_per_second = in.bandwidth_bytes_per_second;
  dense.latency_seconds = in.latency_seconds;
  dense.overhead_seconds = in.overhead_seconds;
  dense.backward_fraction = 0;
  dense.update_seconds_per_element = in.update_seconds_per_element;
  dense.max_chunk_elements = in.max_chunk_elements;
  dense.bucket_elements = in.bucket_elements;
  dense.piece_elements = in.piece_elements;
  dense.mode = CostMode::kPs;
  ASSIGN_OR_RETURN(const CostPrediction dense_ps, PredictStep(dense));
  dense.mode = CostMode::kRing;
  ASSIGN_OR_RETURN(const CostPrediction dense_ring, PredictStep(dense));

  const double rate = in.bandwidth_bytes_per_second;
  const double lat = in.latency_seconds;
  const double upd = in.update_seconds_per_element;
  const double rows_union = p.unique_ids_union;

  // Rows with the shards (PS and hybrid): pulled before forward (a round
  // trip), pushed after backward; each phase at the slower of the busiest
  // worker's link and a shard's, which carries W/S of every worker's rows.
  const PsRowTraffic rows = PsRowBytes(p.unique_per_table, d, in.shards);
  const PsRowTraffic busiest = PsRowBytes(u_max, d, in.shards);
  const double fan_in = static_cast<double>(w) / in.shards;
  const auto phase = [&](double worker_bytes, double mean_bytes) {
    return std::max(TransferSeconds(worker_bytes, rate),
                    TransferSeconds(fan_in * mean_bytes, rate));
  };
  const double rows_pull_seconds =
      lat + phase(busiest.pull_request, rows.pull_request) +
      phase(busiest.pull_response, rows.pull_response);
  const double rows_push_seconds = lat + phase(busiest.push, rows.push);
  // Each shard updates its share of the step's distinct rows.
  const double rows_update_seconds = upd * d * rows_union / in.shards;

  // PS: the rows pushed with the dense chunks; a shard applies both.
  {
    SparseModeCost& m = p.modes[0];
    m.mode = SparseMode::kPs;
    SetDense(m, dense_ps);
    m.sparse_sent = rows.sent();
    m.sparse_received = rows.received();
    m.rows_moved = 2 * p.unique_ids_per_worker;
    m.sparse_seconds = rows_pull_seconds + rows_push_seconds;
    m.update_seconds = rows_update_seconds;
  }
  // All-gather: W - 1 ring stages after backward, each moving one set over
  // every link; then every worker applies every set's rows.
  {
    SparseModeCost& m = p.modes[1];
    m.mode = SparseMode::kAllGather;
    const int64_t piece_bytes = 4 * in.piece_elements;
    const double set_mean =
        AllGatherSetBytes(p.unique_per_table, d, piece_bytes);
    const double set_max = AllGatherSetBytes(u_max, d, piece_bytes);
    SetDense(m, dense_ring);
    m.sparse_sent = m.sparse_received = (w - 1) * set_mean;
    m.rows_moved = 2.0 * (w - 1) * p.unique_ids_per_worker;
    m.sparse_seconds = (w - 1) * (TransferSeconds(set_max, rate) + lat);
    m.update_seconds = upd * d * rows_union;
  }
  // Full all-reduce: every table's gradient, R x d floats, in the ring's
  // buckets after backward; every worker updates every row.
  {
    SparseModeCost& m = p.modes[2];
    m.mode = SparseMode::kAllReduce;
    CostInput tables = dense;
    tables.overhead_seconds = 0;
    tables.tensor_sizes.clear();
    for (const ZipfTable& t : in.tables) {
      tables.tensor_sizes.push_back((t.vocab + (t.empty_rate > 0 ? 1 : 0)) *
                                    static_cast<int64_t>(d));
    }
    ASSIGN_OR_RETURN(const CostPrediction table_ring, PredictStep(tables));
    SetDense(m, dense_ring);
    m.sparse_sent = static_cast<double>(table_ring.worker.sent);
    m.sparse_received = static_cast<double>(table_ring.worker.received);
    m.rows_moved = w > 1 ? 2.0 * 2 * (w - 1) / w * p.table_rows : 0;
    m.sparse_seconds = table_ring.comm_seconds;
    m.update_seconds = upd * d * static_cast<double>(p.table_rows);
  }
  // Hybrid: the dense layers as the ring's, the rows as PS's; the rows'
  // push travels during the dense all-reduce (sent at ReadyRows).
  {
    SparseModeCost& m = p.modes[3];
    m.mode = SparseMode::kHybrid;
    SetDense(m, dense_ring);
    m.sparse_sent = rows.sent();
    m.sparse_received = rows.received();
    m.rows_moved = 2 * p.unique_ids_per_worker;
    m.sparse_seconds =
        rows_pull_seconds + std::max(0.0, rows_push_seconds - m.dense_seconds);
    m.update_seconds = rows_update_seconds;
  }
  for (SparseModeCost& m : p.modes) {
    m.step_seconds = in.compute_seconds + m.dense_seconds + m.sparse_seconds +
                     m.update_seconds;
  }
  return p;
}

SparseMode FastestSparseMode(const SparsePrediction& p, bool by_time) {
  SparseMode best = SparseMode::kPs;
  double best_cost = 0;
  for (SparseMode m : kSparseModes) {
    const double cost = by_time ? p.mode(m).step_seconds : p.mode(m).bytes();
    if (m == SparseMode::kPs || cost < best_cost) {
      best = m;
      best_cost = cost;
    }
  }
  return best;
}

const char* SparseSweepAxisName(SparseSweepAxis axis) {
  switch (axis) {
    case SparseSweepAxis::kBatch:
      return "batch";
    case SparseSweepAxis::kTable:
      return "table";
    case SparseSweepAxis::kZipf:
      return "zipf";
  }
  return "?";
}

absl::StatusOr<SparseSweepAxis> ParseSparseSweepAxis(const std::string& name) {
  for (SparseSweepAxis a : {SparseSweepAxis::kBatch, SparseSweepAxis::kTable,
                            SparseSweepAxis::kZipf}) {
    if (name == SparseSweepAxisName(a)) return a;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("sweep '", name, "': expected batch, table or zipf"));
}

std::vector<double> DefaultSparseSweepValues(SparseSweepAxis axis,
                                             const SparseCostInput& in) {
  std::vector<double> v;
  switch (axis) {
    case SparseSweepAxis::kBatch:
      for (int k = 4; k <= 20; ++k) {
        const double batch = std::ldexp(1.0, k);
        if (batch >= in.workers) v.push_back(batch);
      }
      if (v.empty()) v.push_back(in.workers);
      break;
    case SparseSweepAxis::kTable:
      for (int k = -24; k <= 2; k += 2) v.push_back(std::ldexp(1.0, k));
      break;
    case SparseSweepAxis::kZipf:
      for (int k = 2; k <= 20; ++k) v.push_back(0.1 * k);
      break;
  }
  return v;
}

SparseCostInput SparseInputAt(const SparseCostInput& in, SparseSweepAxis axis,
                              double value) {
  SparseCostInput out = in;
  switch (axis) {
    case SparseSweepAxis::kBatch: {
      out.global_batch = std::max<int64_t>(1, std::llround(value));
      // Compute scales with the largest per-worker share.
      const auto share = [&](int64_t b) {
        return static_cast<double>((b + in.workers - 1) / in.workers);
      };
      out.compute_seconds =
          in.compute_seconds * share(out.global_batch) / share(in.global_batch);
      break;
    }
    case SparseSweepAxis::kTable:
      for (ZipfTable& t : out.tables) {
        t.vocab = std::max<int64_t>(
            1, std::llround(static_cast<double>(t.vocab) * value));
      }
      break;
    case SparseSweepAxis::kZipf:
      out.zipf_exponent = value;
      break;
  }
  return out;
}

absl::StatusOr<SparseSweep> SweepSparse(const SparseCostInput& in,
                                        SparseSweepAxis axis,
                                        const std::vector<double>& values) {
  if (values.empty()) {
    return absl::InvalidArgumentError("a sweep needs values");
  }
  for (size_t i = 0; i < values.size(); ++i) {
    if (!(values[i] > 0) ||
        (axis == SparseSweepAxis::kBatch && values[i] < 1) ||
        (i > 0 && !(values[i] > values[i - 1]))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sweep values must increase and be > 0 (a batch >= 1); value ", i,
          " is ", values[i]));
    }
  }
  SparseSweep sweep;
  sweep.axis = axis;
  sweep.by_time = in.bandwidth_bytes_per_second > 0 || in.latency_seconds > 0;
  const auto cost = [&](const SparsePrediction& p, SparseMode m) {
    return sweep.by_time ? p.mode(m).step_seconds : p.mode(m).bytes();
  };
  for (double v : values) {
    SparseSweepPoint point;
    point.value = v;
    ASSIGN_OR_RETURN(point.prediction,
                     PredictSparseStep(SparseInputAt(in, axis, v)));
    point.fastest = FastestSparseMode(point.prediction, sweep.by_time);
    sweep.points.push_back(std::move(point));
  }
  // Where a pair swaps places between two points: bisect to the tie.
  const std::pair<SparseMode, SparseMode> pairs[] = {
      {SparseMode::kPs, SparseMode::kAllGather},
      {SparseMode::kPs, SparseMode::kAllReduce},
      {SparseMode::kAllGather, SparseMode::kAllReduce},
      {SparseMode::kHybrid, SparseMode::kPs},
      {SparseMode::kHybrid, SparseMode::kAllGather},
      {SparseMode::kHybrid, SparseMode::kAllReduce}};
  for (size_t i = 0; i + 1 < sweep.points.size(); ++i) {
    for (const auto& [x, y] : pairs) {
      const SparsePrediction& lo_p = sweep.points[i].prediction;
      const SparsePrediction& hi_p = sweep.points[i + 1].prediction;
      const bool x_lo = cost(lo_p, x) < cost(lo_p, y);
      const bool x_hi = cost(hi_p, x) < cost(hi_p, y);
      if (x_lo == x_hi) continue;
      double lo = sweep.points[i].value, hi = sweep.points[i + 1].value;
      int64_t rows_hi = hi_p.table_rows;
      for (int iter = 0; iter < 60; ++iter) {
        if (axis == SparseSweepAxis::kBatch && hi - lo <= 1) break;
        if (axis == SparseSweepAxis::kTable && hi / lo <= 1.005) break;
        if (axis == SparseSweepAxis::kZipf && hi - lo <= 0.002) break;
        const double mid =
            axis == SparseSweepAxis::kBatch   ? std::floor((lo + hi) / 2)
            : axis == SparseSweepAxis::kTable ? std::sqrt(lo * hi)
                                              : (lo + hi) / 2;
        ASSIGN_OR_RETURN(const SparsePrediction p,
                         PredictSparseStep(SparseInputAt(in, axis, mid)));
        if ((cost(p, x) < cost(p, y)) == x_lo) {
          lo = mid;
        } else {
          hi = mid;
          rows_hi = p.table_rows;
        }
      }
      SparseCrossoverPoint c;
      c.below = x_lo ? x : y;
      c.above = x_lo ? y : x;
      c.value = hi;
      c.table_rows = rows_hi;
      sweep.crossovers.push_back(c);
    }
  }
  return sweep;
}

}  // namespace ferry
