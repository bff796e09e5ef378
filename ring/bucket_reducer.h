// BucketAllReducer: overlaps the ring all-reduce of gradient buckets with the
// backward pass. The backward pass declares flat ranges of the gradient
// buffer final (Ready); as soon as every element of a bucket has been
// declared, one background thread owned by the class all-reduces (sums) that
// bucket in place over the RingCollective, while the backward pass goes on.
//
// Per step:
//   reducer.Start(first_op_id);
//   ... reducer.Ready(offset, length);  // any order, any split
//   RETURN_IF_ERROR(reducer.Finish());   // grads now hold the ring sum
//
// Op ids: bucket i of the plan uses op id first_op_id + i, so a step uses
// [first_op_id, first_op_id + plan.size()); the next step must start at or
// above first_op_id + plan.size() (op ids are unique per transport).
//
// Ordering across ranks: buckets are reduced one at a time, in the order in
// which they became complete (buckets completed by the same Ready call in
// plan order). The ring needs this order to be identical on all ranks; it is
// when every rank makes the same sequence of Ready calls (every rank runs
// the same model). Different orders make the ranks wait on each other until
// the collective's deadline.
#ifndef FERRY_RING_BUCKET_REDUCER_H_
#define FERRY_RING_BUCKET_REDUCER_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/sharding.h"
#include "ring/bucket_plan.h"
#include "ring/ring_collective.h"

namespace ferry {

// Thread safety: all methods are thread-safe. Ready may be called from
// several threads, but then the completion order (see above) is only
// deterministic if the caller orders the calls. The caller must neither read
// nor write a declared range of grads until Finish returns: the background
// thread writes it.
class BucketAllReducer {
 public:
  // `collective` and `grads` are not owned and must outlive this object.
  // `plan` must partition [0, total) into contiguous buckets of length >= 1
  // (any order; PlanBuckets' output does); grads holds total floats. An
  // invalid plan makes every Ready and Finish return INVALID_ARGUMENT.
  BucketAllReducer(RingCollective* collective, std::vector<Bucket> plan,
                   float* grads);
  // With gradient compression: every bucket goes through
  // RingCollective::AllReduceSumCompressed with the same `compression`;
  // `residual` (nullable, not owned, total floats indexed like grads) is
  // the error feedback, written by the background thread during a step.
  BucketAllReducer(RingCollective* collective, std::vector<Bucket> plan,
                   float* grads, GradientCompression compression,
                   float* residual);

  // Buckets starting at or after `offset` are all-reduced in fp32 without
  // error feedback whatever the compression (the job's BatchNorm state,
  // model/model_params.h ModelJobLayout). Call before the first Start.
  void set_uncompressed_from(int64_t offset) { uncompressed_from_ = offset; }

  // Reduce-scatter instead of all-reduce (ZeRO's sharded optimizer state):
  // rank q keeps the sum of slices[q] (one slice of [0, total) per rank,
  // tiling it): each bucket goes through RingCollective::ReduceScatterSum
  // with its share of every slice (SharesOfRange), and after Finish only
  // this rank's slice of grads holds the ring's sum (the rest is
  // unspecified). Needs fp32 (no compression). Call before the first Start.
  void set_reduce_scatter(const std::vector<FlatRange>& slices);

  // Stops the background thread: buckets queued but not started are dropped
  // (left unreduced); one being all-reduced is waited for (at most the
  // collective's timeout).
  ~BucketAllReducer();

  BucketAllReducer(const BucketAllReducer&) = delete;
  BucketAllReducer& operator=(const BucketAllReducer&) = delete;

  // Begins a step: no element is declared yet. A step still in progress
  // (Start without Finish) is abandoned: its queued buckets are reduced and
  // waited for first, as in Finish, and its result is discarded.
  void Start(int64_t first_op_id);

  // Declares grads[offset, offset + length) final for this step and queues
  // every bucket that thereby became complete. length == 0 is a no-op.
  // Errors: FAILED_PRECONDITION outside a step (before Start or after
  // Finish); INVALID_ARGUMENT when the range is outside [0, total) or
  // overlaps a range declared earlier in this step (the range is then
  // ignored, the step goes on).
  absl::Status Ready(int64_t offset, int64_t length);

  // Ends the step: waits until every queued bucket has been all-reduced and
  // returns the first error. After the first failed bucket, the buckets
  // still queued are not reduced (they keep their local values), so a broken
  // ring costs one timeout, not one per bucket. If no bucket failed but some
  // elements were never declared: FAILED_PRECONDITION; the complete buckets
  // (in flight or queued) have still been reduced and waited for, the
  // incomplete ones are left untouched (their peers' matching all-reduces
  // will run into DEADLINE_EXCEEDED). Either way the background thread no
  // longer touches grads when Finish returns.
  // Errors: FAILED_PRECONDITION outside a step or with undeclared elements;
  // INVALID_ARGUMENT for an invalid plan; otherwise the collective's error
  // with the bucket prepended.
  absl::Status Finish();

  const std::vector<Bucket>& plan() const { return plan_; }
  int64_t total_elements() const { return total_; }

 private:
  void Run();  // the background thread
  bool HasWorkOrStopping() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool Drained() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  RingCollective* const collective_;
  const std::vector<Bucket> plan_;
  float* const grads_;
  const GradientCompression compression_;
  float* const residual_;  // null: no error feedback
  int64_t uncompressed_from_ = INT64_MAX;
  // Reduce-scatter: each bucket's share of every rank's slice, by plan
  // index (empty: all-reduce).
  std::vector<std::vector<FlatRange>> shares_;
  int64_t total_ = 0;
  absl::Status plan_status_;       // OK when plan_ is a valid partition
  std::vector<size_t> by_offset_;  // plan indices sorted by offset

  absl::Mutex mu_;
  bool active_ ABSL_GUARDED_BY(mu_) = false;  // between Start and Finish
  int64_t first_op_id_ ABSL_GUARDED_BY(mu_) = 0;
  std::map<int64_t, int64_t> declared_ ABSL_GUARDED_BY(mu_);  // begin -> end
  int64_t declared_elements_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<int64_t> remaining_ ABSL_GUARDED_BY(mu_);  // per plan index
  std::deque<size_t> queue_ ABSL_GUARDED_BY(mu_);  // complete, not started
  bool busy_ ABSL_GUARDED_BY(mu_) = false;         // a bucket is being reduced
  absl::Status first_error_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  std::thread thread_;  // last member: started after everything above
};

}  // namespace ferry

#endif  // FERRY_RING_BUCKET_REDUCER_H_
