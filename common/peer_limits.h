// Limits on everything a peer controls: how much it can make a process
// allocate or keep. Each is checked where the input arrives, before anything
// changes; a violation is answered with RESOURCE_EXHAUSTED whose message names
// the limit, the value and the bound (LimitExceeded below), and is counted in
// ferry_rejected_inputs_total like any other refused input.
//
// Where each one is enforced (docs/protocol.md, "Limits"):
//  - message size: every gRPC server and channel (proto/rpc_util.h; gRPC
//    itself answers RESOURCE_EXHAUSTED);
//  - identifier length: PsShard::BeginPush, Coordinator::Register, the ring
//    peer's hello;
//  - tensors and elements per job: ParameterLayout::Create; chunks per job:
//    PlaceChunks; shards per job: PlaceChunks;
//  - pushes in flight and buffered per step, async workers tracked, pending
//    pulls: PsShard (PsLimits, flags of ferry-server --role ps);
//  - members and parked lease requests per worker: Coordinator
//    (--max-workers);
//  - entries of the byte-count maps a worker reports: Coordinator::NextTask;
//  - unclaimed ring messages and bytes: RingMailbox.
#ifndef FERRY_COMMON_PEER_LIMITS_H_
#define FERRY_COMMON_PEER_LIMITS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ferry {

// Largest gRPC message any ferry service accepts or sends. Tensor data
// travels in chunks of at most a few MiB, far below this.
inline constexpr int kMaxMessageBytes = 64 << 20;

// Job ids, worker ids, host names and peer addresses.
inline constexpr int64_t kMaxIdBytes = 256;

// A job's model: tensors, fp32 elements (8 GiB), chunks and PS shards.
inline constexpr int64_t kMaxTensorsPerJob = 4096;
inline constexpr int64_t kMaxModelElements = int64_t{1} << 31;
inline constexpr int64_t kMaxChunksPerJob = int64_t{1} << 20;
inline constexpr int64_t kMaxShardsPerJob = 1024;

// Members of one job (the coordinator's --max-workers default).
inline constexpr int kDefaultMaxWorkers = 1024;

// Lease requests (NextTask) of one worker parked at the coordinator at once
// (a worker has at most two: its lease and a prefetch).
inline constexpr int64_t kMaxParkedLeasesPerWorker = 8;

// Keys of each ByteCounts map in a worker's StepReport.
inline constexpr int64_t kMaxByteCountEntries = 256;

// Per PS shard: push streams being received at once (each holds a staging
// buffer the size of the shard's slice), pushes buffered for the open sync
// step (one per worker), workers whose last async step is remembered, and
// pulls waiting for a version.
struct PsLimits {
  int64_t max_open_pushes = 256;
  int64_t max_step_pushes = kDefaultMaxWorkers;
  int64_t max_async_workers = 64 * kDefaultMaxWorkers;
  int64_t max_pending_pulls = 4096;
  // Bytes of one push stream gRPC reads ahead of the shard (the HTTP/2
  // stream window, with BDP probing off); 0 (the default): gRPC's adaptive
  // window. A bound caps what concurrent pushes hold in the transport
  // beside their buffers (about pushing workers x this): left adaptive, a
  // 4-worker push of a 96 MiB slice each held 161 MiB of read slices; 4 MiB
  // (which covers the bandwidth-delay product of a 25 Gb/s link at 1 ms
  // round trip) held none measurable. Not the default: on loopback a single
  // shard's goodput is 13 % lower with it, and it changes the step timing
  // of small-message jobs (docs/benchmarks.md, "Memory of a shard and of a
  // ring member").
  int64_t receive_window_bytes = 0;
};

// Unclaimed messages a ring peer buffers for its collective.
inline constexpr int64_t kDefaultMaxRingMessages = int64_t{1} << 16;
// Unclaimed bytes past which a ring peer stops reading its neighbour's
// stream until its collective takes some (RingMailbox::MayReadOn): what
// the neighbour sends ahead then waits in its own buffers (sent borrowed,
// not copied) and the socket's.
inline constexpr int64_t kDefaultRingReadAheadBytes = int64_t{32} << 20;

// The ring of a shared-memory link between ring neighbours on one host
// (ring/shm_link.h): bytes in flight from a sender to its receiver.
inline constexpr int64_t kDefaultRingShmBytes = int64_t{4} << 20;

// RESOURCE_EXHAUSTED "<what> is <value>; the limit is <limit>".
absl::Status LimitExceeded(absl::string_view what, int64_t value,
                           int64_t limit);

// OK, or RESOURCE_EXHAUSTED when `value` is longer than kMaxIdBytes.
absl::Status CheckIdLength(absl::string_view what, absl::string_view value);

}  // namespace ferry

#endif  // FERRY_COMMON_PEER_LIMITS_H_
