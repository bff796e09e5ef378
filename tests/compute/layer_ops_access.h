// The layer op families of a backend in tests (compute/layer_ops.h): the
// family's ops, aborting when the backend lacks them.
#ifndef FERRY_TESTS_COMPUTE_LAYER_OPS_ACCESS_H_
#define FERRY_TESTS_COMPUTE_LAYER_OPS_ACCESS_H_

#include <memory>

#include "compute/batch_norm_ops.h"
#include "compute/compute_backend.h"
#include "compute/conv_ops.h"
#include "compute/dropout_ops.h"
#include "compute/pool_ops.h"

namespace ferry::testing {

template <typename Ops>
Ops& OpsOf(const std::unique_ptr<ComputeBackend>& backend) {
  return *backend->LayerOpsOf<Ops>().value();
}
inline ConvOps& Conv(const std::unique_ptr<ComputeBackend>& b) {
  return OpsOf<ConvOps>(b);
}
inline PoolOps& Pool(const std::unique_ptr<ComputeBackend>& b) {
  return OpsOf<PoolOps>(b);
}
inline DropoutOps& Drop(const std::unique_ptr<ComputeBackend>& b) {
  return OpsOf<DropoutOps>(b);
}
inline BatchNormOps& BatchNorm(const std::unique_ptr<ComputeBackend>& b) {
  return OpsOf<BatchNormOps>(b);
}

}  // namespace ferry::testing

#endif  // FERRY_TESTS_COMPUTE_LAYER_OPS_ACCESS_H_
