// The job a coordinator serves, built from its flags before it starts: the
// JobSpec every process reads, the epoch size and the test split its
// evaluator scores. A dense model (ModelDef) trains on fashion-mnist, mnist
// or synthetic:N; a DLRM (--model dlrm or a "kind": "dlrm" JSON file) on
// criteo:DIR, PS mode only, with its tables' options (the --embedding-*
// flags) in JobSpec.embedding (docs/sparse.md).
#ifndef FERRY_SERVER_COORDINATOR_JOB_H_
#define FERRY_SERVER_COORDINATOR_JOB_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "coordinator/grpc_shard_control.h"
#include "ferry/v1/common.pb.h"
#include "server/server_main.h"

namespace ferry {

struct CoordinatorJob {
  v1::JobSpec job;
  int64_t epoch_size = 0;  // training samples per epoch
  // What the evaluator scores: a Dataset for a dense model, a CtrDataset
  // for a DLRM. The training split is not kept (the workers load it).
  JobTestSet test_set;
};

// Every error is a configuration error (the coordinator exits with
// kExitConfig): INVALID_ARGUMENT naming the flag for a job that cannot
// train (a model that does not parse or fit its dataset, a DLRM on a
// dataset other than criteo:DIR, in ring mode, with --init-from or
// --export, --embedding-* flags with a dense model, PS mode without
// shards, bad optimizer values, ...), NOT_FOUND / DATA_LOSS for a dataset
// or model file that cannot be read, RESOURCE_EXHAUSTED for a model beyond
// the layout limits. Reads the whole dataset.
absl::StatusOr<CoordinatorJob> BuildCoordinatorJob(const CoordinatorFlags& f);

}  // namespace ferry

#endif  // FERRY_SERVER_COORDINATOR_JOB_H_
