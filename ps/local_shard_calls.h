// Internal to the PS client (not an API): the calls of a shard this process
// hosts (a colocated shard, ps/shard_host.h), made on PsShard directly:
// no gRPC call, no serialization of the pulled values, no thread hand-off.
//
// LocalPushCall takes each queued message into the shard on the caller's
// thread, parsed as the service parses it (so a chunk's bytes are copied
// twice: into the parsed message, then into the push's staging; a raw
// parse as the client's pull does would save the first) and commits on
// Close(): a push that
// completes its step applies the step right there. LocalPullCall waits on
// the shard's version without a thread and copies the chunks from the
// snapshot into the flat buffer on the thread that makes the version (the
// caller's when it exists already); a grpc::Alarm gives it the deadline a
// gRPC pull has. Both behave as their gRPC counterparts (ps/ps_calls.h)
// towards the push session and the pull rounds: the same statuses, messages
// and byte accounting of the payload (PullCall counts message framing too),
// kept out of the client's wire bytes.
#ifndef FERRY_PS_LOCAL_SHARD_CALLS_H_
#define FERRY_PS_LOCAL_SHARD_CALLS_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "grpcpp/alarm.h"
#include "ps/ps_calls.h"
#include "ps/ps_shard.h"

namespace ferry {
namespace ps_internal {

class LocalPullCall final : public ShardPullCall {
 public:
  // As PullCall's; shard.local must be set.
  LocalPullCall(const Shard& shard, const std::vector<Chunk>& chunks,
                const v1::PullRequest& request, absl::Duration timeout,
                float* flat, ByteCounter* shard_counter, CallGroup* group);

  void Start() override;
  void Cancel() override;
  absl::Status status() const override { return status_; }
  int64_t version() const override { return version_; }

 private:
  struct Wait;  // what the shard's and the alarm's callbacks share

  // The shard's callback: the values of the version, or why not.
  void Land(absl::StatusOr<std::shared_ptr<const PsSnapshot>> snapshot);
  // Ends the wait with `status` unless the shard's callback has run or
  // runs: the deadline (the alarm) and Cancel().
  static void Abandon(const std::shared_ptr<Wait>& wait,
                      const absl::Status& status);
  void Finish(const absl::Status& status);

  const Shard& shard_;
  PsShard* const ps_;
  ByteCounter* const shard_counter_;
  const std::vector<Chunk>& chunks_;
  const v1::PullRequest request_;
  const absl::Duration timeout_;
  float* const flat_;
  CallGroup* const group_;
  std::shared_ptr<Wait> wait_;
  // The deadline. Destroyed with the call; its callback holds wait_ only.
  grpc::Alarm alarm_;
  absl::Status status_;
  int64_t version_ = kNoVersion;
};

class LocalPushCall final : public ShardPushCall {
 public:
  // As PushCall's; shard.local must be set. `is_retry`: `requests` are the
  // whole push, committed at Start().
  LocalPushCall(const Shard& shard, CallGroup* group,
                std::deque<grpc::ByteBuffer> requests, bool is_retry);

  void Start() override;
  void Enqueue(grpc::ByteBuffer request) override;
  void Close() override;
  void Cancel() override;
  absl::Status status() const override { return status_; }
  std::deque<grpc::ByteBuffer> TakeRequests() override;

 private:
  void Take(const grpc::ByteBuffer& message);
  void Finish(absl::Status status);

  const Shard& shard_;
  PsShard* const ps_;
  CallGroup* const group_;
  std::deque<grpc::ByteBuffer> requests_;  // kept for a retry
  const bool is_retry_;
  std::unique_ptr<PsPushStaging> staging_;
  int64_t taken_ = 0;   // messages taken in
  absl::Status error_;  // the first refusal; the push is refused for good
  bool done_ = false;
  absl::Status status_;
};

}  // namespace ps_internal
}  // namespace ferry

#endif  // FERRY_PS_LOCAL_SHARD_CALLS_H_
