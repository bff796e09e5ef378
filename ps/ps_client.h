// The worker's view of the parameter-server shards: pull the flat parameter
// buffer from every shard, push the flat gradient to every shard, each shard
// receiving exactly the chunks that PlaceChunks() assigns to it.
//
// ParameterClient is the interface the trainer uses (no gRPC types);
// GrpcParameterClient implements it over ferry.v1.ParameterServer with the
// gRPC callback API: all shards are contacted in parallel, without a thread
// per shard, and every call has a deadline. Chunk data is copied at most
// once on each side of the wire: Ready() sends a chunk straight from the
// caller's gradient (or copies it into a slice when ranges cut it or it is
// encoded), Pull() copies from the received slices into flat_params (raw
// ByteBuffers with the canonical PushRequest / PullResponse encoding, no
// protobuf `bytes` copies). The push buffers are recycled: a client keeps up to
// one model's worth of them (each shard's bytes) between pushes.
#ifndef FERRY_PS_PS_CLIENT_H_
#define FERRY_PS_PS_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/backoff.h"
#include "common/byte_counter.h"
#include "common/gradient_codec.h"
#include "common/link_shaper.h"
#include "common/sharding.h"
#include "ps/sparse_store.h"
#include "ps/step_contributors.h"

namespace grpc {
class Channel;
}  // namespace grpc

namespace ferry {
namespace v1 {
class PullRequest;
}  // namespace v1
class PsShard;

// What a push is about; becomes the ferry.v1.PushHeader with the client's
// job and worker ids.
struct PushInfo {
  int64_t generation = 0;
  int64_t step = 0;
  int64_t num_samples = 0;   // samples whose gradients were summed
  int64_t base_version = 0;  // version the gradient was computed on
  // Sync: the step's whole contributor set (PushHeader.step_contributors),
  // or empty.
  std::vector<PsContributor> step_contributors;
  // The push will carry embedding rows (PushSession::AddRows): no shard's
  // stream closes before they are added.
  bool with_rows = false;
  // No shard's stream closes (so no shard commits the push) before
  // Finish(), even once all its data is sent: for a caller that decides
  // after sending whether the push may count (hybrid: only once its dense
  // all-reduce succeeded); destroying the session instead cancels it.
  bool commit_at_finish = false;
};

// One table's ids of a row pull.
using RowRequest = TableIds;

// One push of one gradient to every shard, fed range by range while the
// backward pass produces it (in any order, typically reverse layer order).
//
// Thread safety: one thread at a time. Destroying a session that was not
// finished cancels its streams: the shards see an aborted push and apply
// nothing.
class PushSession {
 public:
  virtual ~PushSession() = default;

  // Declares the gradient of flat range [offset, offset + length) final;
  // `grads[i]` is the value of element offset + i (host memory). It must stay
  // unchanged until Finish() returned or the session is destroyed: a chunk
  // the range covers whole is sent from it without a copy (fp32; chunks cut
  // by ranges, and encoded ones, are copied). Every chunk whose elements have
  // all been declared is sent at once, and a shard's stream is closed as soon
  // as its last chunk is sent: that shard commits the push then, before
  // Finish(). Errors: INVALID_ARGUMENT when the range is outside the parameter
  // buffer or overlaps a range declared before; FAILED_PRECONDITION after
  // Finish(). A shard failing does not fail Ready(); Finish() reports it.
  virtual absl::Status Ready(int64_t offset, int64_t length,
                             const float* grads) = 0;

  // Declares the gradient of [offset, offset + length) final and all zeros
  // without a buffer (a pipeline stage's gradient outside its layers, which
  // the worker does not hold): as Ready() with zeros, the all-zero chunks
  // travelling as flags. Errors as Ready()'s.
  virtual absl::Status ReadyZeros(int64_t offset, int64_t length) = 0;

  // Declares [offset, offset + length) final, all zeros and absent: no
  // sample of the push used those parameters (PushRequest.absent), so a
  // step whose every contributor leaves an element out skips it in the
  // shard's optimizer. Only parameters, not the model's state. In a
  // compressed chunk absent elements travel as zeros. Errors as Ready()'s.
  virtual absl::Status ReadyAbsent(int64_t offset, int64_t length) = 0;

  // Closes every stream and waits for every shard's answer, retrying shards
  // that were UNAVAILABLE per the client's RetryPolicy. A shard answering
  // ALREADY_EXISTS counts as accepted, on any attempt: it holds this
  // worker's push of this step from an earlier attempt (a retry whose
  // answer was lost, or an abandoned attempt at the same lease that another
  // shard failed). Returns OK when every shard accepted the push. Errors:
  // FAILED_PRECONDITION when some element was never declared (the streams
  // still open are cancelled; shards whose chunks were all sent have
  // committed) or when called twice; otherwise
  // the first failing shard's status (e.g. ABORTED stale generation,
  // INVALID_ARGUMENT, UNAVAILABLE, DEADLINE_EXCEEDED), its message naming
  // the shard.
  virtual absl::Status Finish() = 0;

  // Jobs with embedding tables, a session begun with PushInfo.with_rows:
  // adds the push's row gradients (per table, unique ids, sums over its
  // samples), each row to the shard ShardOfRow places it on, and lets
  // every shard's stream close once its chunks are sent too. Call once,
  // before Finish(); a push without rows for a shard sends it none.
  // FAILED_PRECONDITION when the session was not begun with_rows, rows were
  // already added, or after Finish(); INVALID_ARGUMENT for a part whose
  // gradient size is not a multiple of its ids. The shards check the rest
  // (Finish() reports it). The default (fakes): UNIMPLEMENTED.
  virtual absl::Status AddRows(const std::vector<SparseRows>& rows) {
    (void)rows;
    return absl::UnimplementedError("this push session carries no rows");
  }
};

// A pull started ahead of need (StartPull). Destroying it cancels the calls
// still running and waits for them: nothing writes into the destination
// after the destructor returns.
class PendingPull {
 public:
  virtual ~PendingPull() = default;
  // Waits for every shard's answer. Returns the smallest shard version, or
  // the first failing shard's status (no retries: the caller pulls again).
  // Once it returned, the destination holds the pulled values. Call once.
  virtual absl::StatusOr<int64_t> Wait() = 0;
};

// Thread safety: Pull(), StartPull(), BeginPush() and bytes() may be called
// from several threads at once; each PushSession and PendingPull is used by
// one thread.
class ParameterClient {
 public:
  virtual ~ParameterClient() = default;

  // Number of elements of the flat parameter buffer.
  virtual int64_t num_elements() const = 0;

  // Fills flat_params[0, num_elements()) from every shard, each at version
  // >= min_version, and returns the smallest shard version (shards of an
  // async job may differ by a few versions; all chunks of one shard carry
  // one version). Errors: DATA_LOSS when a shard sends an unknown, foreign,
  // duplicate or wrongly sized chunk, misses one of its chunks, mixes
  // versions or answers a version below min_version; DEADLINE_EXCEEDED when
  // a shard does not reach min_version in time; UNAVAILABLE when a shard
  // stays unreachable through the retry budget; others as the shard returns
  // them. On error flat_params is partly written.
  virtual absl::StatusOr<int64_t> Pull(int64_t min_version,
                                       float* flat_params) = 0;

  // Starts a Pull(min_version, flat_params) without waiting: each shard's
  // chunks land in flat_params as soon as that shard reaches min_version, so
  // a sync worker can ask for the next version before it pushes this step,
  // and each shard's weights arrive while its pushes to other shards still
  // run (the parameter server's overlap of both link directions). The
  // caller must not read or write a shard's range of flat_params until
  // Wait() returned, and must expect it written as soon as that shard's
  // version exists. UNIMPLEMENTED when the client cannot (fakes): use Pull.
  virtual absl::StatusOr<std::unique_ptr<PendingPull>> StartPull(
      int64_t min_version, float* flat_params) {
    (void)min_version;
    (void)flat_params;
    return absl::UnimplementedError("this parameter client has no StartPull");
  }

  // Opens a push to every shard (writes the header). Errors are reported by
  // the session's Finish(); BeginPush itself fails only on a bad `info`
  // (INVALID_ARGUMENT: negative num_samples).
  virtual absl::StatusOr<std::unique_ptr<PushSession>> BeginPush(
      const PushInfo& info) = 0;

  // Whether every shard answers right now: one ShardInfo call to each, in
  // parallel, each with deadline `timeout`. OK when every shard answered;
  // otherwise the first failing shard's status (e.g. DEADLINE_EXCEEDED,
  // UNAVAILABLE), its message naming the shard. Tells a pull that ran out
  // of time waiting for a version that other workers have not pushed yet
  // (every shard answers) from a shard this worker cannot reach (a network
  // partition, a dead shard). The default (fakes) answers OK.
  virtual absl::Status CheckShards(absl::Duration timeout) {
    (void)timeout;
    return absl::OkStatus();
  }

  // Reads embedding rows: out[i] gets tables[i].ids.size() x dim floats,
  // each row from the shard that holds it, once that shard's version is
  // >= min_version (a sync step's rows: pull them with the step's version).
  // Returns the smallest version the shards answered (min_version when no
  // shard was asked). Errors: DATA_LOSS when a shard answers other tables,
  // sizes that do not divide into its ids, or dims that differ between
  // shards; DEADLINE_EXCEEDED / UNAVAILABLE (after the retry budget) as for
  // Pull; the shard's own errors (e.g. INVALID_ARGUMENT for an unknown
  // table), naming the shard. The default (fakes): UNIMPLEMENTED.
  virtual absl::StatusOr<int64_t> PullRows(
      int64_t min_version, absl::Span<const RowRequest> tables,
      std::vector<std::vector<float>>& out) {
    (void)min_version;
    (void)tables;
    (void)out;
    return absl::UnimplementedError("this parameter client pulls no rows");
  }

  // Pulls (Pull, StartPull, PullRows) started after this call carry
  // `generation` (the lease's membership generation; 0: unfenced, the
  // default): a shard fenced past it answers ABORTED at once instead of
  // waiting for a version it has not reached (PullRequest.generation), so a
  // worker holding an aborted lease learns it without waiting out its
  // deadline. Thread-safe. The default (fakes): ignored.
  virtual void SetPullGeneration(int64_t generation) { (void)generation; }

  // Pulls (Pull, StartPull) started after this call fetch only the chunks
  // that intersect `range` of the flat buffer (common/sharding.h
  // ChunkInPullRange; {0, 0}, the default: every chunk), and their
  // destination holds only the range: element e lands in
  // flat_params[e - range.begin], for e in [range.begin, range.end); a
  // chunk's elements outside the range are dropped. Every shard is still
  // asked (one without such chunks answers with none once it has the
  // version, so a sync step still waits for every shard). A pipeline stage
  // pulls its own layers this way, into buffers that hold only them.
  // Thread-safe. REQUIRES: 0 <= range.begin <= range.end <= num_elements().
  virtual void SetPullRange(FlatRange range) = 0;

  // Cumulative payload bytes exchanged with the shards.
  virtual TransferBytes bytes() const = 0;
  // The same per shard, keyed "ps<shard id>" (empty when not tracked).
  virtual std::map<std::string, TransferBytes> peer_bytes() const { return {}; }
};

// A shard this process hosts, as its own PS client reaches it: the shard
// itself (must outlive the client) and a channel to its server over gRPC's
// in-process transport (ShardHost::InProcess).
struct InProcessShard {
  std::shared_ptr<grpc::Channel> channel;
  PsShard* shard = nullptr;
};

struct GrpcParameterClientOptions {
  std::string job_id;
  std::string worker_id;
  std::vector<std::string> shard_addresses;  // index = shard id
  // The placement over shard_addresses.size() shards (PlaceChunks()).
  std::vector<Chunk> chunks;
  // Deadline of every Push and Pull attempt. A pull may wait for other
  // workers' pushes, so this is long; a push's first attempt runs from
  // BeginPush(), so it also covers the backward pass.
  absl::Duration rpc_timeout = absl::Seconds(30);
  RetryPolicy retry;
  // Link emulation (not owned; must outlive the client; null: none): push
  // messages and pull requests wait for its send bucket, pull responses for
  // its receive bucket, on its timer thread (no gRPC thread blocks).
  LinkShaper* shaper = nullptr;
  // Gradient encoding of every pushed chunk (each message names its own).
  // Lossy encodings with error_feedback keep a residual per flat element
  // in the client, carried from one push to the next.
  GradientCompression compression;
  // Chunks at or after this flat offset (the job's BatchNorm state,
  // model/model_params.h ModelJobLayout) are pushed as fp32 whatever the
  // compression: a few KB whose values (changes times samples, step counts)
  // fp16/bf16 could overflow or round and top-k would defer. Chunks never
  // straddle it (they never cross a tensor).
  int64_t uncompressed_from = INT64_MAX;
  // Shards this process hosts (a colocated shard, ps/shard_host.h), by
  // shard id, instead of shard_addresses: Push and Pull call the PsShard
  // directly (ps/local_shard_calls.h), the other calls go over the
  // in-process channel; no link emulation, their bytes kept out of bytes()
  // (which counts what crosses a socket) but in peer_bytes().
  std::map<int, InProcessShard> in_process_shards;
};

class GrpcParameterClient final : public ParameterClient {
 public:
  // Connects lazily (no RPC is made). INVALID_ARGUMENT when there is no
  // shard, the chunks are not numbered 0..n-1 in flat order without gaps, or
  // a chunk names a shard outside the address list.
  static absl::StatusOr<std::unique_ptr<GrpcParameterClient>> Create(
      GrpcParameterClientOptions options);
  ~GrpcParameterClient() override;

  int64_t num_elements() const override { return num_elements_; }
  absl::StatusOr<int64_t> Pull(int64_t min_version,
                               float* flat_params) override;
  absl::StatusOr<std::unique_ptr<PendingPull>> StartPull(
      int64_t min_version, float* flat_params) override;
  absl::StatusOr<std::unique_ptr<PushSession>> BeginPush(
      const PushInfo& info) override;
  absl::Status CheckShards(absl::Duration timeout) override;
  absl::StatusOr<int64_t> PullRows(
      int64_t min_version, absl::Span<const RowRequest> tables,
      std::vector<std::vector<float>>& out) override;  // ps_client_rows.cc
  TransferBytes bytes() const override { return counter_.Get(); }
  std::map<std::string, TransferBytes> peer_bytes() const override;
  void SetPullGeneration(int64_t generation) override {
    pull_generation_.store(generation);
  }
  void SetPullRange(FlatRange range) override {
    absl::MutexLock lock(&pull_range_mu_);
    pull_range_ = range;
  }

  struct Shard;  // channel + stub + owned chunk ids; defined in the .cc

 private:
  explicit GrpcParameterClient(GrpcParameterClientOptions options);

  GrpcParameterClientOptions options_;
  int64_t num_elements_ = 0;
  std::vector<std::unique_ptr<Shard>> shards_;
  ByteCounter counter_;
  std::atomic<int64_t> pull_generation_{0};
  absl::Mutex pull_range_mu_;
  FlatRange pull_range_ ABSL_GUARDED_BY(pull_range_mu_);
  // A PullRequest of the client's job, pull generation and range.
  v1::PullRequest PullRequestFor(int64_t min_version);
  // Lossy compression with error feedback: the residual (else null). Used by
  // one push session at a time.
  std::unique_ptr<ErrorFeedback> feedback_;
};

// A CTR step's rows from the shards (not owned; the client outlives this
// object): every Read is one PullRows of version >= min_version(), so a sync
// step reads the rows of the version its dense weights were pulled at.
class ParameterClientRowSource final : public EmbeddingRowSource {
 public:
  explicit ParameterClientRowSource(ParameterClient* client)
      : client_(client) {}

  void set_min_version(int64_t version) { min_version_ = version; }
  int64_t min_version() const { return min_version_; }

  absl::Status Read(absl::Span<const TableIds> tables,
                    std::vector<std::vector<float>>& out) override {
    return client_->PullRows(min_version_, tables, out).status();
  }

 private:
  ParameterClient* const client_;
  int64_t min_version_ = 0;
};

}  // namespace ferry

#endif  // FERRY_PS_PS_CLIENT_H_
