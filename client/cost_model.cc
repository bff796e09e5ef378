#include "client/cost_model.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/peer_limits.h"
#include "common/sharding.h"
#include "common/status_macros.h"
#include "ring/bucket_plan.h"

namespace ferry {
namespace {

// Protobuf wire sizes (field numbers < 16: one tag byte).
int64_t VarintSize(uint64_t v) {
  int64_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}
int64_t IntField(int64_t v) {
  return v == 0 ? 0 : 1 + VarintSize(static_cast<uint64_t>(v));
}
int64_t BytesField(int64_t len) {
  return 1 + VarintSize(static_cast<uint64_t>(len)) + len;
}

// Typical values of the fields that vary per job (ids, versions, steps);
// they make a few bytes per stream, far below 0.1% of any real gradient.
constexpr int64_t kIdBytes = 12;           // "job-1a2b3c4d", "worker-3"...
constexpr int64_t kTypicalCounter = 1000;  // version / step / op id
// PushRequest{header: PushHeader{job_id, worker_id, generation, step,
// num_samples, base_version, step_contributors: one Contributor{worker_id,
// num_samples} per worker (sync, finalize on push)}}.
int64_t PushHeaderMessage(int workers) {
  const int64_t contributor =
      BytesField(BytesField(kIdBytes) + IntField(kTypicalCounter));
  const int64_t header = 2 * BytesField(kIdBytes) +
                         4 * IntField(kTypicalCounter) + workers * contributor;
  return BytesField(header);
}
int64_t PullRequestMessage() {
  return 2 * BytesField(kIdBytes) + IntField(kTypicalCounter);
}
int64_t PushResponseMessage() { return IntField(kTypicalCounter); }
// PushRequest.encoding (absent for fp32).
int64_t EncodingField(const GradientCompression& c) {
  return c.compressed() ? 2 : 0;
}
int64_t Payload(const GradientCompression& c, int64_t n) {
  return EncodedBytes(c.encoding, n, c.topk_ratio);
}

struct PsBytes {
  RoleBytes worker;
  std::vector<RoleBytes> shards;
  std::vector<int64_t> push_per_shard;  // one worker's push bytes to shard s
  std::vector<int64_t> pull_per_shard;  // one worker's pull bytes from shard s
};

// The chunks a job of `in` places on `logical` shards (its cuts as the
// coordinator's --pack-chunks makes them; the model has no BatchNorm state
// here).
absl::StatusOr<std::vector<Chunk>> PlaceCostChunks(const CostInput& in,
                                                   int logical) {
  return PlaceChunks(in.tensor_sizes, logical, in.max_chunk_elements,
                     in.pack_chunks ? PackedChunkCuts() : ChunkCuts());
}

// Per logical shard (shards x partitions of them, each its own streams).
absl::StatusOr<PsBytes> PsStepBytes(const CostInput& in, int logical) {
  ASSIGN_OR_RETURN(std::vector<Chunk> chunks, PlaceCostChunks(in, logical));
  PsBytes b;
  b.push_per_shard.assign(logical, PushHeaderMessage(in.workers));
  b.pull_per_shard.assign(logical, 0);
  for (const Chunk& c : chunks) {
    b.push_per_shard[c.shard] += IntField(c.id) +
                                 EncodingField(in.compression) +
                                 BytesField(Payload(in.compression, c.length));
    b.pull_per_shard[c.shard] +=
        IntField(kTypicalCounter) + IntField(c.id) + BytesField(c.length * 4);
  }
  b.shards.resize(logical);
  for (int s = 0; s < logical; ++s) {
    const int64_t push = b.push_per_shard[s], pull = b.pull_per_shard[s];
    b.worker.sent += push + PullRequestMessage();
    b.worker.received += PushResponseMessage() + pull;
    b.shards[s].received = in.workers * (push + PullRequestMessage());
    b.shards[s].sent = in.workers * (PushResponseMessage() + pull);
  }
  b.worker.messages_sent = static_cast<int64_t>(chunks.size()) + 2 * logical;
  for (int s = 0; s < logical; ++s) {
    int64_t n = 0;
    for (const Chunk& c : chunks) n += c.shard == s ? 1 : 0;
    b.shards[s].messages_sent = in.workers * (n + 1);
  }
  return b;
}

// Bytes and messages of one ring segment of `n` elements, sent as pieces
// of at most piece_elements: RingMessage{op_id, stage, piece, data}.
RoleBytes SegmentBytes(const CostInput& in, int64_t n) {
  RoleBytes out;
  for (int64_t done = 0, piece = 0; done < n;
       done += in.piece_elements, ++piece) {
    const int64_t len = std::min(in.piece_elements, n - done);
    out.sent += IntField(kTypicalCounter) + /*stage*/ 2 + IntField(piece) +
                BytesField(Payload(in.compression, len));
    ++out.messages_sent;
  }
  return out;
}

// Per rank, the bytes and messages it sends in one all-reduce of `count`
// elements (ring_collective.h: segment s = [s*count/W, (s+1)*count/W);
// rank r sends segment (r - j) mod W at stages j = 0 .. 2W-3, i.e. every
// segment twice except segments r+1 and r+2, once).
std::vector<RoleBytes> RingAllReduceBytes(const CostInput& in, int64_t count) {
  const int w = in.workers;
  std::vector<RoleBytes> ranks(w);
  if (w == 1 || count == 0) return ranks;
  if (in.compression.encoding == GradientEncoding::kTopK) {
    // Sparse all-gather: every rank's top-k of every piece of the whole
    // bucket travels W-1 hops; each rank sends W-1 sets.
    const RoleBytes sets = SegmentBytes(in, count);
    for (RoleBytes& r : ranks) {
      r.sent = (w - 1) * sets.sent;
      r.messages_sent = (w - 1) * sets.messages_sent;
      r.received = r.sent;
    }
    return ranks;
  }
  std::vector<RoleBytes> segments(w);
  RoleBytes twice;
  for (int s = 0; s < w; ++s) {
    segments[s] = SegmentBytes(in, (s + 1) * count / w - s * count / w);
    twice.sent += 2 * segments[s].sent;
    twice.messages_sent += 2 * segments[s].messages_sent;
  }
  for (int r = 0; r < w; ++r) {
    const RoleBytes& a = segments[(r + 1) % w];
    const RoleBytes& b = segments[(r + 2) % w];
    ranks[r].sent = twice.sent - a.sent - b.sent;
    ranks[r].messages_sent =
        twice.messages_sent - a.messages_sent - b.messages_sent;
    ranks[r].received = ranks[r].sent;
  }
  return ranks;
}

double Transfer(int64_t bytes, double rate) {
  return rate > 0 ? bytes / rate : 0.0;
}

// Offset at which the backward pass has produced the gradient of every
// element >= offset, as a time from the start of backward: the pass runs
// from the last element to the first at a uniform rate.
double ReadyTime(int64_t offset, int64_t total, double backward_seconds) {
  return total == 0
             ? 0
             : backward_seconds * static_cast<double>(total - offset) / total;
}

absl::Status Validate(const CostInput& in) {
  if (in.workers < 1) return absl::InvalidArgumentError("workers must be >= 1");
  if (in.mode == CostMode::kPs && in.shards < 1) {
    return absl::InvalidArgumentError("PS mode needs shards >= 1");
  }
  if (in.mode == CostMode::kPs && in.partitions < 1) {
    return absl::InvalidArgumentError("PS mode needs partitions >= 1");
  }
  if (in.tensor_sizes.empty())
    return absl::InvalidArgumentError("the model has no tensors");
  for (int64_t s : in.tensor_sizes) {
    if (s < 0) return absl::InvalidArgumentError("a tensor size is negative");
  }
  if (in.bandwidth_bytes_per_second < 0 || in.latency_seconds < 0 ||
      in.same_host_link_bytes_per_second < 0 || in.compute_seconds < 0 ||
      in.overhead_seconds < 0 || in.backward_fraction < 0 ||
      in.backward_fraction > 1) {
    return absl::InvalidArgumentError(
        "bandwidth, latency and compute must be >= 0, backward_fraction in [0, "
        "1]");
  }
  if (in.update_seconds_per_element < 0) {
    return absl::InvalidArgumentError("update time per element must be >= 0");
  }
  if (in.max_chunk_elements < 1 || in.bucket_elements < 1 ||
      in.piece_elements < 1) {
    return absl::InvalidArgumentError(
        "chunk, bucket and piece sizes must be >= 1");
  }
  if (in.colocated && in.mode == CostMode::kPs && in.shards != in.workers) {
    return absl::InvalidArgumentError(
        "colocated PS needs as many shards as workers");
  }
  RETURN_IF_ERROR(ValidateCompression(in.compression));
  return absl::OkStatus();
}

absl::StatusOr<CostPrediction> PredictPs(const CostInput& in, int64_t total) {
  // Logical shard j is partition j / S of shard process j % S
  // (common/shard_partitions.h); a process's partitions share its link.
  const int processes = in.shards;
  const int logical = in.shards * in.partitions;
  const auto process_of = [&](int shard) { return shard % processes; };
  ASSIGN_OR_RETURN(PsBytes bytes, PsStepBytes(in, logical));
  CostPrediction p;
  p.worker = bytes.worker;
  p.shards.assign(processes, RoleBytes{});
  for (int s = 0; s < logical; ++s) {
    RoleBytes& process = p.shards[process_of(s)];
    process.sent += bytes.shards[s].sent;
    process.received += bytes.shards[s].received;
    process.messages_sent += bytes.shards[s].messages_sent;
  }
  const double rate = in.bandwidth_bytes_per_second, lat = in.latency_seconds;
  int64_t push_worker = 0, pull_worker = 0;
  std::vector<int64_t> push_process(processes, 0), pull_process(processes, 0);
  for (int s = 0; s < logical; ++s) {
    push_worker += bytes.push_per_shard[s];
    pull_worker += bytes.pull_per_shard[s];
    push_process[process_of(s)] += in.workers * bytes.push_per_shard[s];
    pull_process[process_of(s)] += in.workers * bytes.pull_per_shard[s];
  }
  int64_t push_shard =
      *std::max_element(push_process.begin(), push_process.end());
  int64_t pull_shard =
      *std::max_element(pull_process.begin(), pull_process.end());
  const int64_t push_worker_all = push_worker, pull_worker_all = pull_worker;
  if (in.colocated) {
    // Host h = worker h + shard h on one link: its own shard's share stays
    // local; its shard serves the other W-1 workers.
    const int64_t own_push = push_worker / processes,
                  own_pull = pull_worker / processes;
    push_worker -= own_push;
    pull_worker -= own_pull;
    push_shard = push_shard * (in.workers - 1) / in.workers;
    pull_shard = pull_shard * (in.workers - 1) / in.workers;
    p.worker.sent -= own_push;
    p.worker.received -= own_pull;
    for (RoleBytes& shard : p.shards) {
      shard.sent = shard.sent * (in.workers - 1) / in.workers;
      shard.received = shard.received * (in.workers - 1) / in.workers;
    }
  }
  const double push_w = Transfer(push_worker, rate),
               push_s = Transfer(push_shard, rate);
  const double pull_w = Transfer(pull_worker, rate),
               pull_s = Transfer(pull_shard, rate);
  // Each direction of every link is its own budget. Colocated: a host's
  // uplink carries its worker's pushes and then its shard's answers, its
  // downlink the other workers' pushes into its shard and then its
  // worker's pulled slices (the pull timeline below queues each behind
  // the other).
  const double link_rate = rate;
  // Colocated: the own shard's share of the bytes stays on the host, and a
  // shard's link serves the other W - 1 workers.
  const double wire =
      in.colocated ? static_cast<double>(in.workers - 1) / in.workers : 1.0;
  const int64_t shard_streams = in.colocated ? in.workers - 1 : in.workers;
  const auto on_wire = [&](int64_t bytes) {
    return static_cast<int64_t>(wire * static_cast<double>(bytes));
  };
  p.push_seconds =
      std::max(Transfer(on_wire(push_worker_all), link_rate), push_s) + lat;
  p.pull_seconds =
      std::max(Transfer(on_wire(pull_worker_all), link_rate), pull_s) + lat;
  ASSIGN_OR_RETURN(std::vector<Chunk> chunks, PlaceCostChunks(in, logical));
  // The order a worker sends its chunks in: as backward completes them
  // (last tensors first; a packed chunk once its first tensor, the last of
  // its tensors backward produces, is ready), each tensor's chunks in flat
  // order, as the worker's Ready() calls queue them on its uplink.
  std::stable_sort(
      chunks.begin(), chunks.end(), [](const Chunk& a, const Chunk& b) {
        return a.tensor != b.tensor ? a.tensor > b.tensor
                                    : a.flat_offset < b.flat_offset;
      });
  // The step's timeline from the start of backward (time 0) to the last
  // pulled byte, a two-stage pipeline in each direction. Push: each chunk
  // leaves on the worker's uplink once its tensor is ready, then crosses
  // its shard process's link, which takes it from every worker (the
  // workers are symmetric and send at the same time: W copies). A logical
  // shard applies the step once the last copy of its last chunk is in
  // (finalize on push), plus its update time. Pull (asked for ahead, off
  // the path): each logical shard's slice goes out on its process's link
  // to every worker once it applied the step, and reaches the worker's
  // downlink in the order the shards finish; a slice is in when both
  // links carried it. With partitions the early ones' pulls run while the
  // later ones' pushes still stream: each direction is its own budget.
  const auto timeline = [&](double backward) {
    std::vector<double> process_in(processes, 0.0), process_out(processes, 0.0);
    std::vector<double> shard_in(logical, 0.0);
    std::vector<int64_t> slice(logical, 0);
    double up_free = 0;
    for (const Chunk& c : chunks) {
      const int64_t chunk_bytes = IntField(c.id) +
                                  EncodingField(in.compression) +
                                  BytesField(Payload(in.compression, c.length));
      const int64_t tensor_start = c.flat_offset - c.offset_in_tensor;
      const double up = Transfer(on_wire(chunk_bytes), link_rate);
      up_free =
          std::max(up_free, ReadyTime(tensor_start, total, backward)) + up;
      // The copies stream in from when this worker's started leaving.
      double& link_in = process_in[process_of(c.shard)];
      link_in = std::max(link_in, up_free - up + lat) +
                Transfer(shard_streams * chunk_bytes, link_rate);
      shard_in[c.shard] = link_in;
      slice[c.shard] += c.length;
    }
    std::vector<double> applied(logical, 0.0);
    std::vector<int> order(logical);
    for (int s = 0; s < logical; ++s) {
      order[s] = s;
      applied[s] = shard_in[s] + in.update_seconds_per_element * slice[s];
    }
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return applied[a] < applied[b]; });
    // A worker's downlink takes the slices as the shards send them, several
    // at once (each shard's link serves all W workers, r / W each), so a
    // slice is in when its shard's link has sent it to every worker, and
    // the downlink as a whole can take no more than its rate: the pull ends
    // at the later of the two. (Queuing each slice behind the previous
    // one's shard link instead is 25 % pessimistic against the measured
    // 2-shard steps.)
    double down_free = 0, done = 0;
    if (in.colocated) {
      // A host's uplink answers pulls once its worker's pushes left (every
      // worker pushes the same chunks at the same times); a worker's
      // downlink takes slices once its host's shard took the other
      // workers' pushes (the busiest host's, a bound for every worker).
      std::fill(process_out.begin(), process_out.end(), up_free);
      down_free = *std::max_element(process_in.begin(), process_in.end());
    }
    for (int s : order) {
      const int64_t slice_bytes = bytes.pull_per_shard[s];
      double& link_out = process_out[process_of(s)];
      link_out = std::max(link_out, applied[s]) +
                 Transfer(shard_streams * slice_bytes, link_rate);
      down_free = std::max(down_free, applied[s]) +
                  Transfer(on_wire(slice_bytes), link_rate);
      done = std::max({done, link_out, down_free});
    }
    return done + lat;
  };
  // Communication alone (as if the gradient were there at once), then as
  // it overlaps the backward pass.
  // The stack's work (the shard's receive, apply and answer between a
  // push's last chunk and the pulled weights) adds to the link time
  // (measured: docs/comparison.md).
  p.comm_seconds = timeline(0) + in.overhead_seconds;
  const double backward = in.compute_seconds * in.backward_fraction;
  p.exposed_comm_seconds =
      std::max(timeline(backward), backward) - backward + in.overhead_seconds;
  p.bottleneck = push_s > push_w ? "shard link" : "worker link";
  const double link = std::max(push_w, push_s) + std::max(pull_w, pull_s);
  if (2 * 3 * lat > link) p.bottleneck = "latency";
  if (in.overhead_seconds > std::max(link, 3 * lat))
    p.bottleneck = "control/stack";
  if (in.colocated && p.bottleneck != "latency") p.bottleneck = "host link";
  return p;
}

absl::StatusOr<CostPrediction> PredictRing(const CostInput& in, int64_t total) {
  ASSIGN_OR_RETURN(std::vector<Bucket> buckets,
                   PlanBuckets(in.tensor_sizes, in.bucket_elements));
  CostPrediction p;
  const bool same_host = in.same_host_link_bytes_per_second > 0;
  const double rate = same_host ? in.same_host_link_bytes_per_second
                                : in.bandwidth_bytes_per_second;
  const double lat = same_host ? 0.0 : in.latency_seconds;
  const double backward = in.compute_seconds * in.backward_fraction;
  double link_free = 0, bandwidth_part = 0;
  // Sharded optimizer state: each collective is one half of the
  // all-reduce's schedule (W-1 stages, half its bytes).
  const int halves = in.shard_optimizer_state ? 1 : 2;
  // Adds one collective over `count` elements (its `halves` of the
  // all-reduce) to the bytes; returns its time.
  const auto collective = [&](int64_t count) {
    RoleBytes mean;
    RoleBytes busiest;
    for (const RoleBytes& b : RingAllReduceBytes(in, count)) {
      mean.sent += b.sent * halves / 2;
      mean.messages_sent += b.messages_sent * halves / 2;
      if (b.sent > busiest.sent) busiest = b;
    }
    busiest.sent = busiest.sent * halves / 2;
    p.worker.sent += mean.sent / in.workers;
    p.worker.messages_sent += mean.messages_sent / in.workers;
    // halves x (W-1) dependent stages; each moves one segment over every
    // link.
    const int stages = in.workers > 1 ? halves * (in.workers - 1) : 0;
    const double t = Transfer(busiest.sent, rate) + stages * lat;
    bandwidth_part += Transfer(busiest.sent, rate);
    p.allreduce_seconds += t;
    return t;
  };
  for (const Bucket& bucket : buckets) {
    const double t = collective(bucket.length);
    link_free =
        std::max(link_free, ReadyTime(bucket.offset, total, backward)) + t;
  }
  // The params' all-gather starts after the last reduce-scatter and the
  // update, when backward is over.
  double gather = 0;
  if (in.shard_optimizer_state) gather = collective(total);
  p.worker.received = p.worker.sent;
  const double exposed = std::max(link_free, backward) - backward + gather;
  // The stack's work (serialization, copies, gRPC, each hop's add before it
  // forwards) sits on the ring's critical path between transfers: measured
  // on emulated links the step's exchange takes the transfer plus the
  // loopback overhead, compressed or not (docs/comparison.md).
  p.comm_seconds = p.allreduce_seconds + in.overhead_seconds;
  p.exposed_comm_seconds = exposed + in.overhead_seconds;
  p.bottleneck = bandwidth_part >= p.allreduce_seconds - bandwidth_part
                     ? (same_host ? "shared-memory link" : "worker link")
                     : "latency";
  if (in.overhead_seconds > p.allreduce_seconds) p.bottleneck = "stack";
  return p;
}

}  // namespace

absl::StatusOr<CostPrediction> PredictStep(const CostInput& in) {
  RETURN_IF_ERROR(Validate(in));
  int64_t total = 0;
  for (int64_t s : in.tensor_sizes) total += s;
  CostPrediction p;
  if (in.mode == CostMode::kPs) {
    ASSIGN_OR_RETURN(p, PredictPs(in, total));
  } else {
    ASSIGN_OR_RETURN(p, PredictRing(in, total));
  }
  p.mode = in.mode;
  p.params = total;
  p.overhead_seconds = in.overhead_seconds;
  p.step_seconds = in.compute_seconds + p.exposed_comm_seconds;
  return p;
}

absl::StatusOr<Crossover> FindCrossover(const CostInput& input) {
  const auto faster_ps = [](CostInput in) -> absl::StatusOr<bool> {
    in.mode = CostMode::kPs;
    ASSIGN_OR_RETURN(CostPrediction ps, PredictStep(in));
    in.mode = CostMode::kRing;
    ASSIGN_OR_RETURN(CostPrediction ring, PredictStep(in));
    return ps.step_seconds < ring.step_seconds;
  };
  Crossover c;
  CostInput in = input;
  in.colocated = false;
  for (int s = 1; s <= 64; ++s) {
    in.shards = s;
    ASSIGN_OR_RETURN(const bool ps, faster_ps(in));
    if (ps) {
      c.min_shards_ps_beats_ring = s;
      break;
    }
  }
  in = input;
  if (in.mode == CostMode::kRing || in.shards < 1)
    in.shards = std::max(1, input.shards);
  in.colocated = false;
  // Scale every tensor by 2^k, small to large: the first size where the
  // winner changes (PS winning small models for latency, or large ones for
  // bandwidth where the ring's fewer bytes lose to many shards' links).
  std::optional<bool> first_ps;
  for (int k = -20; k <= 10; ++k) {
    CostInput scaled = in;
    int64_t total = 0;
    for (int64_t& s : scaled.tensor_sizes) {
      s = std::max<int64_t>(s > 0 ? 1 : 0, static_cast<int64_t>(std::ldexp(
                                               static_cast<double>(s), k)));
      total += s;
    }
    if (total > kMaxModelElements) break;  // beyond what a job can hold
    ASSIGN_OR_RETURN(const bool ps, faster_ps(scaled));
    ++c.sizes_searched;
    if (ps) ++c.sizes_ps_wins;
    if (!first_ps.has_value()) first_ps = ps;
    if (ps == *first_ps) continue;
    if (ps) {
      c.params_ps_beats_ring_from = total;
    } else {
      c.params_ps_beats_ring_below = total;
    }
    break;
  }
  in = input;
  in.shards = std::max(1, input.shards);
  in.colocated = false;
  // The first run of worker counts where PS wins (more workers load the
  // shards W-fold, so the ring may win again further on).
  for (int w = 2; w <= 256; ++w) {
    in.workers = w;
    ASSIGN_OR_RETURN(const bool ps, faster_ps(in));
    if (ps) {
      if (c.min_workers_ps_beats_ring < 0) c.min_workers_ps_beats_ring = w;
      c.max_workers_ps_beats_ring = w;
    } else if (c.min_workers_ps_beats_ring >= 0) {
      break;
    }
  }
  return c;
}

}  // namespace ferry
