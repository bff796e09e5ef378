// Gradient buckets for overlapping all-reduce with the backward pass: a pure
// function of the tensor sizes and the bucket limit.
//
// Tensors are laid out contiguously in the flat buffer, tensor 0 first. The
// backward pass produces gradients from the LAST tensor to the first, so
// buckets are formed walking the tensors from last to first, greedily adding
// whole consecutive tensors while the bucket stays <= bucket_elements. A
// tensor that does not fit closes the current bucket; if it is larger than
// bucket_elements it is cut from its end backward: full pieces of
// bucket_elements [end - b, end), [end - 2b, end - b), ... each form a
// bucket, and the remainder at the tensor's start (size % bucket_elements
// elements, if any) opens the next bucket, which earlier tensors may join.
//
// The plan lists buckets in readiness order (the bucket holding the last
// tensor first), i.e. by decreasing offset. Buckets are contiguous ranges of
// 1..bucket_elements elements that partition [0, total) exactly; zero-size
// tensors take no room and never make an empty bucket.
#ifndef FERRY_RING_BUCKET_PLAN_H_
#define FERRY_RING_BUCKET_PLAN_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace ferry {

struct Bucket {
  int64_t offset = 0;  // first element within the flat buffer
  int64_t length = 0;  // elements
};

// Errors: INVALID_ARGUMENT when bucket_elements <= 0, a size is negative or
// the total overflows int64. No tensors (or only empty ones) -> empty plan.
absl::StatusOr<std::vector<Bucket>> PlanBuckets(
    const std::vector<int64_t>& tensor_sizes, int64_t bucket_elements);

// A job whose flat buffer ends with non-trainable state (BatchNorm running
// statistics, model/model_params.h ModelJobLayout: the trailing tensors
// holding `state_elements`): PlanBuckets over the parameter tensors, then
// PlanBuckets over the state tensors (offsets past the parameters), listed
// last. The state's change is declared after the backward pass and is
// all-reduced uncompressed, so it never shares a bucket with parameters.
// Errors: PlanBuckets'; INVALID_ARGUMENT when no run of trailing tensors
// holds exactly state_elements.
absl::StatusOr<std::vector<Bucket>> PlanBucketsWithState(
    const std::vector<int64_t>& tensor_sizes, int64_t bucket_elements,
    int64_t state_elements);

}  // namespace ferry

#endif  // FERRY_RING_BUCKET_PLAN_H_
