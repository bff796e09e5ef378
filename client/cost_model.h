// Communication cost model of one synchronous training step, PS vs ring
// all-reduce: bytes on the wire per role and a predicted step time from the
// link bandwidth and latency, the message overheads and the compute time.
//
// Pure functions, no IO. The byte counts follow ferry's own wire format
// (proto/ferry/v1/ps.proto, ring.proto) message by message, so they are
// comparable with the payload bytes the processes count (ByteSizeLong() of
// every message: protobuf framing included, gRPC/HTTP2/TCP framing not).
//
// Time model (one worker's step, every process behind its own full-duplex
// link of `bandwidth` bytes/s each way and `latency` per message; see
// docs/comparison.md for the derivation):
// - PS (sync, finalize on push + pull ahead): chunks leave tensor by tensor
//   as backward produces them, one after another on the worker's uplink,
//   and each crosses its shard's link, which takes it from all W workers;
//   a shard applies the step once the last copy is in (plus its update
//   time per element), then sends its slice to all W workers, which take
//   the slices on their downlinks in the order the shards finish. Each
//   link direction is its own budget. One shard: push then pull, 2WN/B;
//   S shards: about N/B (1 + (2W - 1)/S), since a shard's slice cannot
//   return before every worker's push to it is in. K partitions per shard
//   process (logical shard j on process j mod S): each partition's pull
//   runs while later partitions' pushes stream, so the two directions of
//   every link overlap and a step tends to max(N/B, WN/(SB)) plus one
//   partition's round: BytePS's way past the ring's 2(W-1)N/(WB).
// - Ring: every gradient bucket is all-reduced in 2(W-1) stages of N_b/W
//   elements each way per link; buckets overlap the backward pass except
//   the last one (the first layer's).
// - Colocated PS (model only): each host runs one worker and one shard on
//   one link; bytes to its own shard stay off the wire.
// - Ring members all on one host (same_host_link_bytes_per_second > 0):
//   neighbours exchange through shared-memory links (docs/architecture.md,
//   "Shared-memory links"), priced at that bandwidth with no per-message
//   latency instead of as network links; PS keeps the network terms (its
//   processes talk gRPC over loopback there).
// - Ring with sharded optimizer state: every bucket's reduce-scatter (W-1
//   stages, half the all-reduce's bytes) overlaps the backward pass like
//   the all-reduce; the params' all-gather (W-1 stages, the other half)
//   follows the update and is exposed whole.
#ifndef FERRY_CLIENT_COST_MODEL_H_
#define FERRY_CLIENT_COST_MODEL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/gradient_codec.h"

namespace ferry {

enum class CostMode { kPs, kRing };

struct CostInput {
  CostMode mode = CostMode::kPs;
  int workers = 2;
  int shards = 1;  // PS only: shard processes, each its own link
  // PS only: logical shards per process (common/shard_partitions.h), each
  // applied and pulled on its own as soon as its pushes are in.
  int partitions = 1;
  bool colocated = false;  // PS only: one worker + one shard per host
  // Ring only: the optimizer state sharded across the members (ZeRO stage
  // 1): each bucket is reduce-scattered as backward produces it, and the
  // whole model's params are all-gathered after the update (exposed).
  bool shard_optimizer_state = false;
  std::vector<int64_t> tensor_sizes;      // model order (elements)
  double bandwidth_bytes_per_second = 0;  // 0: unlimited (time terms are 0)
  double latency_seconds = 0;
  // Ring only: every member on one host, each link between neighbours a
  // shared-memory link of this bandwidth each way (what a 2-rank all-reduce
  // reaches as busbw on that host); 0: network links as above.
  double same_host_link_bytes_per_second = 0;
  double compute_seconds = 0;          // forward + backward of one step
  double backward_fraction = 2.0 / 3;  // of compute_seconds, overlappable
  // The stack's own cost of a step's exchange with no link limit (what
  // loopback measures: serialization, copies, gRPC, control RPCs; `ferry
  // bench compare` calibrates it from an unlimited run). PS adds it to the
  // exposed time (the stack's work happens between a push's last chunk and
  // the pull's answer). The ring adds it too: every hop's serialization and
  // add sit between its transfers (measured: docs/comparison.md).
  double overhead_seconds = 0;
  // PS: a shard's time to apply a step, per element of its slice
  // (optimizer + snapshot for the pulls; ~1 ns on this project's CPU).
  double update_seconds_per_element = 1e-9;
  int64_t max_chunk_elements = 256 * 1024;  // PS chunks
  bool pack_chunks = true;  // PS: tensors share chunks (JobSpec.pack_chunks)
  int64_t bucket_elements = 25 * 1024 * 1024 / 4;  // ring buckets
  int64_t piece_elements = 256 * 1024;             // ring messages
  // Gradients on the wire (common/gradient_codec.h); pulled weights are
  // always fp32. Ring top-k is a sparse all-gather (ring_collective.h).
  GradientCompression compression;
};

// Payload bytes per step of one process, both directions.
struct RoleBytes {
  int64_t sent = 0;
  int64_t received = 0;
  int64_t messages_sent = 0;
};

struct CostPrediction {
  CostMode mode = CostMode::kPs;
  int64_t params = 0;
  RoleBytes worker;                 // one worker (PS: with every shard)
  std::vector<RoleBytes> shards;    // PS: per shard process (all its
                                    // partitions), all workers together
  double comm_seconds = 0;          // all communication of the step
  double exposed_comm_seconds = 0;  // the part not hidden behind backward
  double step_seconds = 0;          // compute + exposed communication
  double overhead_seconds = 0;      // CostInput::overhead_seconds, included
  // Phase detail (PS: push, pull; ring: all buckets) and what bounds it.
  double push_seconds = 0, pull_seconds = 0, allreduce_seconds = 0;
  // "worker link", "shard link", "shared-memory link", "latency", ...
  std::string bottleneck;
};

// Errors: INVALID_ARGUMENT for workers < 1, shards < 1 (PS), no tensors,
// a negative size, bandwidth/latency/compute < 0, chunk/bucket/piece < 1,
// colocated with shards != workers.
absl::StatusOr<CostPrediction> PredictStep(const CostInput& input);

// Tensor sizes of a model (anything model/model_presets.h's
// ResolveModelSpec takes: mlp, convnet, a JSON path, "784-256-128-10"), in
// the layout every process exchanges (model/model_params.h ModelJobLayout:
// parameters, then BatchNorm state). A model that is not ferry's (a
// PyTorch model of a --model external job): its weights file, PATH.safetensors
// or a directory holding model.safetensors without model.json (the job's
// --export), whose tensors in file order are the job's flat layout;
// torch's own save_file of a state_dict serves too (its order may differ,
// which moves only the ring's bucket boundaries). Errors: the resolver's,
// the file's (NOT_FOUND, INVALID_ARGUMENT), a file without elements.
absl::StatusOr<std::vector<int64_t>> ModelTensorSizes(const std::string& spec);

// Whether `spec` names a PyTorch model's weights (ModelTensorSizes' second
// kind: its workers are PyTorch processes) rather than one of ferry's
// models.
bool IsPyTorchModelWeights(const std::string& spec);

// The cost model's own presets: MLP specs of about the size of the named
// model (synthetic stand-ins: same parameter count, not the same layers).
struct ModelPreset {
  std::string name;
  std::string mlp_spec;
  std::string description;
};
const std::vector<ModelPreset>& ModelPresets();
// A cost-model preset name -> its MLP spec; anything ResolveModelSpec takes
// -> itself. INVALID_ARGUMENT otherwise, naming the presets.
absl::StatusOr<std::string> ResolveModel(const std::string& name_or_spec);

// Crossovers with everything else in `input` held fixed; -1 when none in
// the searched range.
struct Crossover {
  int min_shards_ps_beats_ring = -1;  // searched 1..64
  // PS faster for models below this many parameters (every tensor scaled
  // by the same power of two, 2^-20 .. 2^10 of the input).
  int64_t params_ps_beats_ring_below = -1;
  // PS faster from this many parameters on (ring faster below it).
  int64_t params_ps_beats_ring_from = -1;
  // Of the model sizes tried (up to the crossover), how many PS won.
  int sizes_searched = 0;
  int sizes_ps_wins = 0;
  // Searched 2..256: the first run of worker counts where PS wins
  // (max = 256: it still wins at the end of the search).
  int min_workers_ps_beats_ring = -1;
  int max_workers_ps_beats_ring = -1;
};
absl::StatusOr<Crossover> FindCrossover(const CostInput& input);

}  // namespace ferry

#endif  // FERRY_CLIENT_COST_MODEL_H_
