// Reads a PS shard's embedding tables for a DLRM export (the ReadTables
// stream, ps/ps_service.h): the pieces of one checkpoint table section
// (common/checkpoint_tables.h), written to a spool file as they arrive, so
// that the coordinator holds none of the rows in memory. It then reads the
// shards' spool files in place and writes the export from them merged
// (ps/merged_tables.h).
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
#include "common/file_system.h"
#include "ferry/v1/ps.grpc.pb.h"

namespace ferry {

// How long one shard may take to send its tables.
inline constexpr absl::Duration kReadTablesTimeout = absl::Minutes(10);

// Writes the shard's table section at a version >= `min_version` to `path`
// (replaced atomically once every byte arrived; its directory must exist)
// and returns that version. Errors: the call's (FAILED_PRECONDITION from
// the shard: wrong job, no tables, an older version); DATA_LOSS when the
// pieces disagree on the version or the size, or end before the size they
// announced; the file system's. `path` is left as it was on error. `bytes`
// (optional) counts what was received.
absl::StatusOr<int64_t> ReadShardTablesToFile(
    v1::ParameterServer::Stub& stub, const std::string& job_id,
    int64_t min_version, const std::string& path, FileSystem* fs,
    absl::Duration timeout = kReadTablesTimeout, ByteCounter* bytes = nullptr);

}  // namespace ferry

#endif  // FERRY_COORDINATOR_SHARD_TABLES_READER_H_
