// A distributed job's embedding tables, one part per shard, as the sources
// of one table section (common/checkpoint_tables.h): per table the shards'
// rows and admission counters one after the other, their event counters
// summed (kept only when every shard has them). The parts are read in place
// (views into the shards' sections, e.g. mapped spool files), a bounded run
// of rows copied at a time, so writing the merged tables holds no copy of
// the rows. The rows of one id on two shards are not looked for (placement
// puts each on one).
//
// Thread safety: the views' bytes must outlive the sources and not change;
// a source is read by one thread at a time.
#ifndef FERRY_PS_MERGED_TABLES_H_
#define FERRY_PS_MERGED_TABLES_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/checkpoint_tables.h"

namespace ferry {

class MergedTableSources {
 public:
  // `shards[s]` is shard s's tables. INVALID_ARGUMENT when the shards do
  // not hold the same tables, in the same order, with the same row size.
  // `release` (empty, or one per shard, e.g. its mapped file's
  // MappedFile::Release) is told of a shard's bytes once a pass over them
  // has read them, so that a mapped part's pages leave the process behind
  // the writer; INVALID_ARGUMENT for another count.
  static absl::StatusOr<std::unique_ptr<MergedTableSources>> Create(
      std::vector<std::vector<TableCheckpointView>> shards,
      std::vector<BytesDone> release = {});
  ~MergedTableSources();

  // The merged tables, in the shards' table order.
  absl::Span<const TablePartSource* const> pointers() const {
    return pointers_;
  }

 private:
  class Table;
  MergedTableSources() = default;
  std::vector<std::unique_ptr<Table>> tables_;
  std::vector<const TablePartSource*> pointers_;
};

}  // namespace ferry

#endif  // FERRY_PS_MERGED_TABLES_H_
