// Partitions of a parameter-server job (BytePS's partitioned model): a shard
// process may serve K of the job's logical shards, each with its own
// PsShard, checkpoints and gRPC port, so that a sync step finalizes and
// serves each partition as soon as its pushes are in while the pushes of
// later partitions still stream (push and pull overlap on the links).
//
// Layout, a pure function: a job of L = S x K logical shards (the job's
// shard addresses, in logical order) is served by S processes; process p
// serves the logical shards p, p + S, ..., p + (K-1) S as its partitions
// 0..K-1. Interleaved, so that consecutive flat ranges of the model (which
// the backward pass declares one after another) land on different
// processes and every process's link works at once. K = 1 is the plain
// one-shard-per-process job.
#ifndef FERRY_COMMON_SHARD_PARTITIONS_H_
#define FERRY_COMMON_SHARD_PARTITIONS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ferry {

// INVALID_ARGUMENT naming both numbers unless partitions >= 1 and
// logical_shards is a positive multiple of it.
absl::Status CheckPartitions(int logical_shards, int partitions);

// The logical shards that process `process` of `processes` serves, by
// partition index. REQUIRES: 0 <= process < processes, partitions >= 1.
std::vector<int> ShardsOfProcess(int process, int processes, int partitions);

// The job's shard addresses in logical order from each process's partition
// addresses: per_process[p][i] is partition i of process p. REQUIRES: every
// process lists the same number of partitions.
std::vector<std::string> LogicalShardAddresses(
    const std::vector<std::vector<std::string>>& per_process);

// The listen address of each of `partitions` partitions: a comma-separated
// list of exactly that many "host:port", or one "host:port" whose port P
// gives P, P+1, ..., P+K-1 (port 0: an OS-chosen port each).
// INVALID_ARGUMENT naming the text for a list of another length, an address
// without a port, or ports beyond 65535.
absl::StatusOr<std::vector<std::string>> PartitionListenAddresses(
    absl::string_view listen, int partitions);

}  // namespace ferry

#endif  // FERRY_COMMON_SHARD_PARTITIONS_H_
