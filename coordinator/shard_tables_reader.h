// Reads a PS shard's embedding tables for a DLRM export (the ReadTables
// stream, ps/ps_service.h): the pieces of one checkpoint table section,
// decoded (common/checkpoint_tables.h DecodeTables). The coordinator merges
// the shards' parts (ps/dlrm_export.h MergeShardTables) and writes the
// export.
//
// Thread safety: a pure function over its arguments (the stub is
// thread-safe).
#ifndef FERRY_COORDINATOR_SHARD_TABLES_READER_H_
#define FERRY_COORDINATOR_SHARD_TABLES_READER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/byte_counter.h"
#include "common/checkpoint_tables.h"
#include "ferry/v1/ps.grpc.pb.h"

namespace ferry {

// How long one shard may take to send its tables.
inline constexpr absl::Duration kReadTablesTimeout = absl::Minutes(10);

// The shard's tables at a version >= `min_version`. Errors: the call's
// (FAILED_PRECONDITION from the shard: wrong job, no tables, an older
// version); DATA_LOSS when the pieces disagree on the version or the size,
// end before the size they announced, or do not decode. `bytes` (optional)
// counts what was received.
absl::StatusOr<std::vector<TableCheckpoint>> ReadShardTables(
    v1::ParameterServer::Stub& stub, const std::string& job_id,
    int64_t min_version, absl::Duration timeout = kReadTablesTimeout,
    ByteCounter* bytes = nullptr);

}  // namespace ferry

#endif  // FERRY_COORDINATOR_SHARD_TABLES_READER_H_
