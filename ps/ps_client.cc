#include "ps/ps_client.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/memory/memory.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/link_shaper.h"
#include "common/prometheus_metrics.h"
#include "common/range_sets.h"
#include "ferry/v1/ps.grpc.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "proto/raw_wire.h"
#include "proto/rpc_util.h"
#include "ps/call_rounds.h"
#include "ps/ps_calls.h"
#include "ps/ps_wire.h"
#include "ps/sparse_rows_wire.h"

namespace ferry {

static_assert(std::endian::native == std::endian::little,
              "tensor bytes on the wire are little-endian fp32");

namespace {

using ps_internal::Annotate;
using ps_internal::MakePullCall;
using ps_internal::MakePushCall;
using ps_internal::ShardPullCall;
using ps_internal::ShardPushCall;
using Shard = GrpcParameterClient::Shard;

// Waits for started `calls` of `group`; cancels the rest after a fatal one.
class GrpcPushSession final : public PushSession {
 public:
  GrpcPushSession(const GrpcParameterClientOptions& options,
                  const std::vector<std::unique_ptr<Shard>>& shards,
                  int64_t num_elements, ByteCounter* counter,
                  ErrorFeedback* feedback, const PushInfo& info)
      : options_(options),
        shards_(shards),
        num_elements_(num_elements),
        counter_(counter),
        feedback_(feedback),
        group_(static_cast<int>(shards.size())),
        partial_(options.chunks.size()),
        covered_(options.chunks.size(), 0),
        absent_(options.chunks.size()) {
    // With rows, a shard's stream also waits for AddRows.
    // commit_at_finish: one more that only Finish() takes off.
    for (const auto& shard : shards_) {
      unsent_.push_back(shard->num_chunks + (info.with_rows ? 1 : 0) +
                        (info.commit_at_finish ? 1 : 0));
    }
    rows_expected_ = info.with_rows;
    v1::PushRequest header;
    v1::PushHeader* h = header.mutable_header();
    h->set_job_id(options.job_id);
    h->set_worker_id(options.worker_id);
    h->set_generation(info.generation);
    h->set_step(info.step);
    h->set_num_samples(info.num_samples);
    h->set_base_version(info.base_version);
    for (const PsContributor& c : info.step_contributors) {
      v1::Contributor* added = h->add_step_contributors();
      added->set_worker_id(c.worker_id);
      added->set_num_samples(c.num_samples);
    }
    const grpc::ByteBuffer header_message = SerializeMessage(header);
    for (const auto& shard : shards_) {
      calls_.push_back(MakePushCall(
          *shard, options.rpc_timeout, counter_, &group_,
          std::deque<grpc::ByteBuffer>{header_message}, /*is_retry=*/false));
    }
    for (auto& call : calls_) call->Start();
  }

  ~GrpcPushSession() override {
    if (finished_) return;
    for (auto& call : calls_) call->Cancel();
    group_.WaitAll();
  }

  absl::Status Ready(int64_t offset, int64_t length,
                     const float* grads) override {
    return Declare(offset, length, grads);
  }
  absl::Status ReadyZeros(int64_t offset, int64_t length) override {
    return Declare(offset, length, nullptr);
  }
  absl::Status ReadyAbsent(int64_t offset, int64_t length) override {
    return Declare(offset, length, nullptr, /*absent=*/true);
  }

  // Ready(), `grads` null for zeros; `absent`: the zeros are absent
  // (PushRequest.absent), except in compressed chunks.
  absl::Status Declare(int64_t offset, int64_t length, const float* grads,
                       bool absent = false) {
    if (finished_)
      return absl::FailedPreconditionError("push already finished");
    if (offset < 0 || length < 0 || offset + length > num_elements_) {
      return absl::InvalidArgumentError(
          absl::StrCat("gradient range [", offset, ", ", offset + length,
                       ") is outside the ", num_elements_, " parameters"));
    }
    if (length == 0) return absl::OkStatus();
    const int64_t end = offset + length;
    auto next = declared_.lower_bound(offset);
    if ((next != declared_.end() && next->first < end) ||
        (next != declared_.begin() && std::prev(next)->second > offset)) {
      return absl::InvalidArgumentError(
          absl::StrCat("gradient range [", offset, ", ", end,
                       ") overlaps one declared before"));
    }
    declared_.emplace(offset, end);
    declared_elements_ += length;
    const std::vector<Chunk>& chunks = options_.chunks;
    // The last chunk starting at or before `offset`, then on while they
    // overlap.
    auto first = std::upper_bound(
        chunks.begin(), chunks.end(), offset,
        [](int64_t value, const Chunk& c) { return value < c.flat_offset; });
    if (first != chunks.begin()) --first;
    for (size_t i = first - chunks.begin();
         i < chunks.size() && chunks[i].flat_offset < end; ++i) {
      const Chunk& c = chunks[i];
      const int64_t lo = std::max(offset, c.flat_offset);
      const int64_t hi = std::min(end, c.flat_offset + c.length);
      if (lo >= hi) continue;
      const bool compress = options_.compression.compressed() &&
                            c.flat_offset < options_.uncompressed_from;
      const bool whole = covered_[i] == 0 && lo == c.flat_offset &&
                         hi == c.flat_offset + c.length;
      const float* values = grads == nullptr ? nullptr : grads + (lo - offset);
      // Error feedback may add a residual to a compressed chunk's zeros,
      // and the codecs carry no ranges: there absent is zeros.
      if (absent && !compress) {
        absent_[i].push_back({lo - c.flat_offset, hi - c.flat_offset});
      }
      if (whole && ZerosMayTravel(compress) &&
          (values == nullptr || AllZero(values, c.length))) {
        covered_[i] = c.length;
        Send(c, grpc::Slice(), GradientEncoding::kZeros);
        continue;
      }
      if (whole && !compress) {  // values != nullptr: zeros were sent above
        // The whole fp32 chunk is in this range: the message references
        // `grads` itself (no copy; the caller keeps it until Finish).
        covered_[i] = c.length;
        Send(c,
             grpc::Slice(values, static_cast<size_t>(c.length) * sizeof(float),
                         grpc::Slice::STATIC_SLICE),
             GradientEncoding::kFp32);
        continue;
      }
      // A chunk cut by ranges (or encoded) is assembled in a slice of its
      // own, which the message then references: one copy.
      grpc::Slice& data = partial_[i];
      if (data.size() == 0) {
        data = shards_[c.shard]->buffers->Make(c.length * sizeof(float));
      }
      // The slice was just allocated for this chunk and nobody else
      // references it yet: writing through begin() is safe.
      uint8_t* into = const_cast<uint8_t*>(data.begin()) +
                      (lo - c.flat_offset) * sizeof(float);
      if (values == nullptr) {
        std::memset(into, 0, (hi - lo) * sizeof(float));
      } else {
        std::memcpy(into, values, (hi - lo) * sizeof(float));
      }
      covered_[i] += hi - lo;
      if (covered_[i] == c.length) {
        if (ZerosMayTravel(compress) &&
            AllZero(reinterpret_cast<const float*>(data.begin()), c.length)) {
          Send(c, grpc::Slice(), GradientEncoding::kZeros);
        } else if (compress) {
          Send(c, Compress(c, data), options_.compression.encoding);
        } else {
          Send(c, data, GradientEncoding::kFp32);
        }
        data = grpc::Slice();
      }
    }
    return absl::OkStatus();
  }

  absl::Status AddRows(const std::vector<SparseRows>& rows) override {
    if (finished_) {
      return absl::FailedPreconditionError("push already finished");
    }
    if (!rows_expected_) {
      return absl::FailedPreconditionError(
          "push rows: the session was begun without PushInfo.with_rows, or "
          "its rows were added already");
    }
    for (const SparseRows& part : rows) {
      if (part.ids.empty() ? !part.grads.empty()
                           : part.grads.size() % part.ids.size() != 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("push rows of embedding table ", part.table, ": ",
                         part.grads.size(), " gradient floats for ",
                         part.ids.size(), " ids"));
      }
    }
    rows_expected_ = false;
    const int num_shards = static_cast<int>(shards_.size());
    for (const SparseRows& part : rows) {
      if (part.ids.empty()) continue;
      const size_t dim = part.grads.size() / part.ids.size();
      // Split by placement, keeping the ids' order per shard.
      std::vector<std::vector<uint64_t>> ids(num_shards);
      std::vector<std::vector<float>> grads(num_shards);
      for (size_t i = 0; i < part.ids.size(); ++i) {
        const int32_t s = ShardOfRow(part.table, part.ids[i], num_shards);
        ids[s].push_back(part.ids[i]);
        grads[s].insert(grads[s].end(), part.grads.begin() + i * dim,
                        part.grads.begin() + (i + 1) * dim);
      }
      for (int s = 0; s < num_shards; ++s) {
        if (ids[s].empty()) continue;
        v1::PushRequest message;
        ToSparseRowsPart(part.table, ids[s], grads[s], message.mutable_rows());
        calls_[s]->Enqueue(SerializeMessage(message));
      }
    }
    for (int s = 0; s < num_shards; ++s) {
      if (--unsent_[s] == 0) calls_[s]->Close();
    }
    return absl::OkStatus();
  }

  // Queues chunk `c`'s message, with its absent ranges, on its shard's
  // stream; closes the stream after the shard's last chunk, so that the
  // shard commits (and, finalizing on push, applies the step and answers
  // pulls) while the other shards' chunks are still being produced.
  void Send(const Chunk& c, const grpc::Slice& data,
            GradientEncoding encoding) {
    if (!first_chunk_.has_value()) first_chunk_ = absl::Now();
    std::vector<FlatRange>& absent = absent_[c.id];
    const std::vector<int64_t> pairs =
        absent.empty() ? std::vector<int64_t>()
                       : ToRangePairs(NormalizeRanges(std::move(absent)));
    calls_[c.shard]->Enqueue(
        ChunkMessage(c.id, data, static_cast<int>(encoding), pairs));
    if (--unsent_[c.shard] == 0) calls_[c.shard]->Close();
  }

  // An all-zero chunk travels as a flag (kZeros, no bytes: a pipeline
  // stage's gradient outside its layers), unless error feedback must
  // encode it with the residual.
  bool ZerosMayTravel(bool compress) const {
    return !compress || feedback_ == nullptr;
  }
  // Stops at the first non-zero element: a real gradient costs a read or
  // two.
  static bool AllZero(const float* values, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
      if (values[i] != 0.0f) return false;
    }
    return true;
  }

  absl::Status Finish() override {
    if (finished_)
      return absl::FailedPreconditionError("push already finished");
    finished_ = true;
    if (declared_elements_ != num_elements_ || rows_expected_) {
      // Shards whose chunks all went out have committed (or will): only
      // the others are cancelled.
      for (size_t s = 0; s < calls_.size(); ++s) {
        if (unsent_[s] > 0 || shards_[s]->num_chunks == 0) calls_[s]->Cancel();
      }
      group_.WaitAll();
      return absl::FailedPreconditionError(
          absl::StrCat("push finished with ", declared_elements_, " of ",
                       num_elements_, " gradient elements declared",
                       rows_expected_ ? " and without its rows" : "",
                       "; the push was cancelled"));
    }
    for (auto& call : calls_) call->Close();
    // Round 0 is the streams opened in the constructor; later rounds resend
    // the kept messages to the shards that were UNAVAILABLE.
    const absl::Status status =
        RetryRounds(static_cast<int>(shards_.size()), options_.retry,
                    [this](const std::vector<int>& shards, int round) {
                      std::vector<absl::Status> statuses;
                      if (round == 0) {
                        group_.WaitAll();
                        for (int s : shards)
                          statuses.push_back(calls_[s]->status());
                        return statuses;
                      }
                      CallGroup group(static_cast<int>(shards.size()));
                      std::vector<std::unique_ptr<ShardPushCall>> calls;
                      for (int s : shards) {
                        calls.push_back(MakePushCall(
                            *shards_[s], options_.rpc_timeout, counter_, &group,
                            calls_[s]->TakeRequests(), /*is_retry=*/true));
                      }
                      for (auto& call : calls) call->Start();
                      group.WaitAll();
                      for (size_t i = 0; i < shards.size(); ++i) {
                        statuses.push_back(calls[i]->status());
                        calls_[shards[i]] = std::move(calls[i]);
                      }
                      return statuses;
                    });
    if (status.ok()) {  // ferry_push_seconds: first chunk to the last answer
      Metrics()
          .push_seconds(MetricRole::kWorker)
          .Observe(SecondsSince(first_chunk_.value_or(created_)));
    }
    return status;
  }

 private:
  // The chunk's fp32 gradient `fp32` (released) encoded per the options,
  // through the error feedback residual when there is one.
  grpc::Slice Compress(const Chunk& c, const grpc::Slice& fp32) {
    const GradientCompression& comp = options_.compression;
    encoded_.clear();
    const float* values = reinterpret_cast<const float*>(fp32.begin());
    if (feedback_ != nullptr) {
      feedback_->Encode(comp.encoding, c.flat_offset, values, c.length,
                        comp.topk_ratio, &encoded_);
    } else {
      Encode(comp.encoding, values, c.length, comp.topk_ratio, &encoded_);
    }
    return grpc::Slice(encoded_);
  }

  const GrpcParameterClientOptions& options_;
  const std::vector<std::unique_ptr<Shard>>& shards_;
  const int64_t num_elements_;
  ByteCounter* const counter_;
  ErrorFeedback* const feedback_;                      // null: none
  std::string encoded_;                                // Compress()'s scratch
  CallGroup group_;                                    // the calls of round 0
  std::vector<std::unique_ptr<ShardPushCall>> calls_;  // [shard], latest
  std::map<int64_t, int64_t> declared_;                // begin -> end, disjoint
  int64_t declared_elements_ = 0;
  std::vector<grpc::Slice> partial_;            // [chunk] data being assembled
  std::vector<int64_t> covered_;                // [chunk] elements declared
  std::vector<std::vector<FlatRange>> absent_;  // [chunk] declared absent
  std::vector<int64_t> unsent_;  // [shard] chunks not yet enqueued
  bool finished_ = false;
  bool rows_expected_ = false;  // begun with_rows, AddRows not yet called
  const absl::Time created_ = absl::Now();
  std::optional<absl::Time> first_chunk_;  // when the first chunk was sent
};

// One PullCall per shard, started at once and waited for later. Its bytes
// reach the client's counters when it ends (Wait, or the destructor), not
// as they arrive: a worker's per-step byte report then counts exactly one
// pull per step, whenever the pull ahead happened to land.
class GrpcPendingPull final : public PendingPull {
 public:
  GrpcPendingPull(const std::vector<std::unique_ptr<Shard>>& shards,
                  const std::vector<Chunk>& chunks,
                  const v1::PullRequest& request, absl::Duration timeout,
                  float* flat_params, ByteCounter* counter)
      : shards_(shards),
        counter_(counter),
        min_version_(request.min_version()),
        group_(static_cast<int>(shards.size())),
        shard_bytes_(shards.size()) {
    for (size_t s = 0; s < shards.size(); ++s) {
      calls_.push_back(MakePullCall(*shards[s], chunks, request, timeout,
                                    flat_params, &bytes_, &group_,
                                    &shard_bytes_[s]));
    }
    for (auto& call : calls_) call->Start();
  }

  ~GrpcPendingPull() override {
    if (waited_) return;
    for (auto& call : calls_) call->Cancel();
    group_.WaitAll();
    CountBytes();
  }

  absl::StatusOr<int64_t> Wait() override {
    if (waited_) return absl::FailedPreconditionError("pull already waited");
    waited_ = true;
    const std::vector<absl::Status> statuses = WaitCalls(group_, calls_);
    CountBytes();
    int64_t version = ShardPullCall::kNoVersion;
    for (size_t i = 0; i < calls_.size(); ++i) {
      if (!statuses[i].ok()) return statuses[i];
      const int64_t v = calls_[i]->version();
      if (v != ShardPullCall::kNoVersion &&
          (version == ShardPullCall::kNoVersion || v < version)) {
        version = v;
      }
    }
    return version == ShardPullCall::kNoVersion ? min_version_ : version;
  }

 private:
  void CountBytes() {
    counter_->Add(bytes_.Get());
    for (size_t s = 0; s < shards_.size(); ++s) {
      shards_[s]->bytes->Add(shard_bytes_[s].Get());
    }
  }

  const std::vector<std::unique_ptr<Shard>>& shards_;
  ByteCounter* const counter_;  // the client's
  const int64_t min_version_;
  CallGroup group_;  // outlives the calls
  ByteCounter bytes_;
  std::vector<ByteCounter> shard_bytes_;  // [shard]
  std::vector<std::unique_ptr<ShardPullCall>> calls_;
  bool waited_ = false;
};

}  // namespace

GrpcParameterClient::GrpcParameterClient(GrpcParameterClientOptions options)
    : options_(std::move(options)) {}

GrpcParameterClient::~GrpcParameterClient() = default;

absl::StatusOr<std::unique_ptr<GrpcParameterClient>>
GrpcParameterClient::Create(GrpcParameterClientOptions options) {
  const int num_shards = static_cast<int>(options.shard_addresses.size());
  if (num_shards == 0) {
    return absl::InvalidArgumentError("parameter client: no shard addresses");
  }
  auto client = absl::WrapUnique(new GrpcParameterClient(std::move(options)));
  for (int s = 0; s < num_shards; ++s) {
    auto shard = std::make_unique<Shard>();
    shard->id = s;
    shard->address = client->options_.shard_addresses[s];
    const auto local = client->options_.in_process_shards.find(s);
    shard->in_process = local != client->options_.in_process_shards.end();
    const std::shared_ptr<grpc::Channel> channel =
        shard->in_process ? local->second.channel : MakeChannel(shard->address);
    if (shard->in_process) shard->local = local->second.shard;
    shard->stub = std::make_unique<grpc::GenericStub>(channel);
    shard->control = v1::ParameterServer::NewStub(channel);
    shard->shaper = shard->in_process ? nullptr : client->options_.shaper;
    client->shards_.push_back(std::move(shard));
  }
  int64_t flat = 0;
  const std::vector<Chunk>& chunks = client->options_.chunks;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const Chunk& c = chunks[i];
    if (c.id != static_cast<int32_t>(i) || c.flat_offset != flat ||
        c.length < 1 || c.shard < 0 || c.shard >= num_shards) {
      return absl::InvalidArgumentError(absl::StrCat(
          "parameter client: chunk ", i, " (id ", c.id, ", offset ",
          c.flat_offset, ", shard ", c.shard,
          ") does not continue a placement over ", num_shards, " shards"));
    }
    flat += c.length;
    ++client->shards_[c.shard]->num_chunks;
  }
  for (auto& shard : client->shards_) {
    int64_t bytes = 0;
    for (const Chunk& c : chunks) {
      if (c.shard == shard->id) bytes += c.length * sizeof(float);
    }
    shard->buffers =
        std::make_shared<ChunkBufferPool>(static_cast<size_t>(bytes));
  }
  client->num_elements_ = flat;
  const GradientCompression& comp = client->options_.compression;
  if (absl::Status s = ValidateCompression(comp); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("parameter client: ", s.message()));
  }
  if (comp.uses_feedback()) {
    client->feedback_ = std::make_unique<ErrorFeedback>(flat);
  }
  return client;
}

v1::PullRequest GrpcParameterClient::PullRequestFor(int64_t min_version) {
  v1::PullRequest request;
  request.set_job_id(options_.job_id);
  request.set_worker_id(options_.worker_id);
  request.set_min_version(min_version);
  request.set_generation(pull_generation_.load());
  absl::MutexLock lock(&pull_range_mu_);
  request.set_range_begin(pull_range_.begin);
  request.set_range_end(pull_range_.end);
  return request;
}

absl::StatusOr<int64_t> GrpcParameterClient::Pull(int64_t min_version,
                                                  float* flat_params) {
  const v1::PullRequest request = PullRequestFor(min_version);
  int64_t version = ShardPullCall::kNoVersion;
  const absl::Time begun = absl::Now();
  const absl::Status status = RetryRounds(
      static_cast<int>(shards_.size()), options_.retry,
      [&](const std::vector<int>& shards, int) {
        // Every shard, also one without a chunk in the range: its answer
        // says it reached the version (a sync step's barrier).
        CallGroup group(static_cast<int>(shards.size()));
        std::vector<std::unique_ptr<ShardPullCall>> calls;
        for (int s : shards) {
          calls.push_back(MakePullCall(*shards_[s], options_.chunks, request,
                                       options_.rpc_timeout, flat_params,
                                       &counter_, &group));
        }
        for (auto& call : calls) call->Start();
        std::vector<absl::Status> statuses = WaitCalls(group, calls);
        for (size_t i = 0; i < calls.size(); ++i) {
          const int64_t v = calls[i]->version();
          if (statuses[i].ok() && v != ShardPullCall::kNoVersion &&
              (version == ShardPullCall::kNoVersion || v < version)) {
            version = v;
          }
        }
        return statuses;
      });
  if (!status.ok()) return status;
  Metrics().pull_seconds(MetricRole::kWorker).Observe(SecondsSince(begun));
  // Only shards without chunks answered: nothing tells the version.
  return version == ShardPullCall::kNoVersion ? min_version : version;
}

absl::StatusOr<std::unique_ptr<PendingPull>> GrpcParameterClient::StartPull(
    int64_t min_version, float* flat_params) {
  const v1::PullRequest request = PullRequestFor(min_version);
  return std::make_unique<GrpcPendingPull>(shards_, options_.chunks, request,
                                           options_.rpc_timeout, flat_params,
                                           &counter_);
}

absl::Status GrpcParameterClient::CheckShards(absl::Duration timeout) {
  const int n = static_cast<int>(shards_.size());
  std::unique_ptr<grpc::ClientContext[]> contexts(new grpc::ClientContext[n]);
  std::vector<v1::ShardInfoResponse> responses(n);
  std::vector<absl::Status> statuses(n);
  CallGroup group(n);
  const v1::ShardInfoRequest request;
  for (int s = 0; s < n; ++s) {
    ps_internal::PrepareContext(contexts[s], *shards_[s], timeout);
    shards_[s]->control->async()->ShardInfo(
        &contexts[s], &request, &responses[s], [&, s](grpc::Status status) {
          statuses[s] = ps_internal::Annotate(FromGrpcStatus(status),
                                              *shards_[s], "shard info");
          group.Done(false);
        });
  }
  group.WaitAll();
  for (const absl::Status& status : statuses) {
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

std::map<std::string, TransferBytes> GrpcParameterClient::peer_bytes() const {
  std::map<std::string, TransferBytes> bytes;
  for (const auto& shard : shards_) {
    bytes[absl::StrCat("ps", shard->id)] = shard->bytes->Get();
  }
  return bytes;
}

absl::StatusOr<std::unique_ptr<PushSession>> GrpcParameterClient::BeginPush(
    const PushInfo& info) {
  if (info.num_samples < 0) {
    return absl::InvalidArgumentError("push: negative num_samples");
  }
  return std::make_unique<GrpcPushSession>(options_, shards_, num_elements_,
                                           &counter_, feedback_.get(), info);
}

}  // namespace ferry
