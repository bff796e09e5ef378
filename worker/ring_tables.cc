#include "worker/ring_tables.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "data/dlrm_job_check.h"
#include "ferry/v1/ring.pb.h"
#include "ps/dlrm_init.h"
#include "ps/sparse_rows_wire.h"
#include "ps/tables_file.h"
#include "ring/ring_bytes.h"
#include "ring/ring_collective.h"

namespace ferry {
namespace {

// A 64-bit mix (splitmix64's finalizer) of one value into a hash.
uint64_t Mix(uint64_t h, uint64_t v) {
  uint64_t z = h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::string EncodeRows(int64_t step, const std::vector<SparseRows>& rows) {
  v1::RingRowGradients message;
  message.set_step(step);
  for (const SparseRows& part : rows) {
    ToSparseRowsPart(part.table, part.ids, part.grads, message.add_parts());
  }
  return message.SerializeAsString();
}

absl::StatusOr<std::vector<SparseRows>> DecodeRows(const std::string& payload,
                                                   int64_t step, int rank) {
  v1::RingRowGradients message;
  if (!message.ParseFromString(payload)) {
    return absl::DataLossError(
        absl::StrCat("row gradients of rank ", rank, " do not parse"));
  }
  if (message.step() != step) {
    return absl::DataLossError(absl::StrCat("row gradients of rank ", rank,
                                            " are of step ", message.step(),
                                            ", not ", step));
  }
  std::vector<SparseRows> rows;
  rows.reserve(message.parts_size());
  for (const v1::SparseRowsPart& part : message.parts()) {
    auto decoded = FromSparseRowsPart(part);
    if (!decoded.ok()) {
      return absl::Status(decoded.status().code(),
                          absl::StrCat("row gradients of rank ", rank, ": ",
                                       decoded.status().message()));
    }
    rows.push_back(*std::move(decoded));
  }
  return rows;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RingTables>> RingTables::Create(
    std::vector<int32_t> dims, const EmbeddingOptions& options, uint64_t seed,
    int64_t full_table_rows) {
  int64_t floats_per_row = 0;
  for (int32_t dim : dims) floats_per_row += dim;
  RETURN_IF_ERROR(CheckFullTableRows(full_table_rows, floats_per_row));
  RETURN_IF_ERROR(CheckRingKeepsEveryRow(options));
  ASSIGN_OR_RETURN(std::unique_ptr<SparseStore> store,
                   SparseStore::Create(
                       MakeSparseStoreConfig(options, std::move(dims), seed)));
  return std::unique_ptr<RingTables>(
      new RingTables(std::move(store), full_table_rows));
}

absl::Status RingTables::LoadInitTables(const std::string& init_from,
                                        int64_t dense_elements) {
  if (full_table_rows_ > 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "full tables of ", full_table_rows_,
        " rows (--ring-full-table-rows) hold ids mod that many rows and "
        "cannot start from an export's rows (",
        init_from, ")"));
  }
  return RestoreDlrmInitTables(init_from, dense_elements, *store_,
                               TableScope::kAll);
}

absl::Status RingTables::RestoreCheckpoint(
    const std::vector<TableCheckpoint>& tables) {
  RETURN_IF_ERROR(store_->Restore(tables));
  undos_.clear();
  return absl::OkStatus();
}

absl::Status RingTables::SetStepRows(std::vector<SparseRows> rows) {
  step_rows_.clear();
  RETURN_IF_ERROR(store_->CheckRows(rows));
  if (full_table_rows_ > 0) {
    // Rows id mod N (< N: one shard holds them all); ids that meet on one
    // row sum their gradients.
    const uint64_t n = static_cast<uint64_t>(full_table_rows_);
    for (SparseRows& part : rows) {
      const size_t dim = static_cast<size_t>(store_->table(part.table).dim());
      absl::flat_hash_map<uint64_t, size_t> slot;
      SparseRows merged{part.table, {}, {}};
      for (size_t i = 0; i < part.ids.size(); ++i) {
        auto [it, added] = slot.try_emplace(part.ids[i] % n, merged.ids.size());
        if (added) {
          merged.ids.push_back(part.ids[i] % n);
          merged.grads.resize(merged.grads.size() + dim, 0.0f);
        }
        for (size_t k = 0; k < dim; ++k) {
          merged.grads[it->second * dim + k] += part.grads[i * dim + k];
        }
      }
      part = std::move(merged);
    }
  }
  step_rows_ = std::move(rows);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::vector<SparseRows>>> RingTables::GatherRows(
    RingTransport& transport, int64_t op_id, int64_t steps_before,
    int64_t piece_bytes, absl::Time deadline) {
  std::string mine = EncodeRows(steps_before, step_rows_);
  ASSIGN_OR_RETURN(
      std::vector<std::string> payloads,
      AllGatherBytes(transport, op_id, std::move(mine), piece_bytes, deadline));
  std::vector<std::vector<SparseRows>> contributions(payloads.size());
  for (size_t rank = 0; rank < payloads.size(); ++rank) {
    if (static_cast<int>(rank) == transport.rank()) {
      contributions[rank] = std::move(step_rows_);  // checked by SetStepRows
      continue;
    }
    ASSIGN_OR_RETURN(
        contributions[rank],
        DecodeRows(payloads[rank], steps_before, static_cast<int>(rank)));
    if (absl::Status s = store_->CheckRows(contributions[rank]); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("row gradients of rank ", rank,
                                                 ": ", s.message()));
    }
  }
  return contributions;
}

absl::StatusOr<std::vector<std::vector<SparseRows>>>
RingTables::AllReduceFullTables(RingTransport& transport, int64_t op_id,
                                int64_t piece_bytes, absl::Time deadline) {
  const int64_t n = full_table_rows_;
  std::vector<int64_t> offset(store_->num_tables() + 1, 0);
  for (int32_t t = 0; t < store_->num_tables(); ++t) {
    offset[t + 1] = offset[t] + n * store_->table(t).dim();
  }
  full_gradient_.assign(offset.back(), 0.0f);
  for (const SparseRows& part : step_rows_) {
    const int64_t dim = store_->table(part.table).dim();
    float* table = full_gradient_.data() + offset[part.table];
    for (size_t i = 0; i < part.ids.size(); ++i) {
      std::copy_n(part.grads.data() + i * dim, dim,
                  table + static_cast<int64_t>(part.ids[i]) * dim);
    }
  }
  RingCollectiveOptions options;
  options.piece_elements = std::max<int64_t>(1, piece_bytes / 4);
  options.timeout = std::max(deadline - absl::Now(), absl::ZeroDuration());
  RingCollective collective(&transport, options);
  RETURN_IF_ERROR(
      collective.AllReduceSum(op_id, full_gradient_.data(), offset.back()));
  // The summed gradient is bitwise the same on every member, and so are
  // its non-zero rows.
  std::vector<SparseRows> rows;
  for (int32_t t = 0; t < store_->num_tables(); ++t) {
    const int64_t dim = store_->table(t).dim();
    const float* table = full_gradient_.data() + offset[t];
    SparseRows part{t, {}, {}};
    for (int64_t r = 0; r < n; ++r) {
      const float* row = table + r * dim;
      if (std::all_of(row, row + dim, [](float g) { return g == 0.0f; })) {
        continue;
      }
      part.ids.push_back(static_cast<uint64_t>(r));
      part.grads.insert(part.grads.end(), row, row + dim);
    }
    if (!part.ids.empty()) rows.push_back(std::move(part));
  }
  RETURN_IF_ERROR(store_->CheckRows(rows));  // e.g. a non-finite sum
  std::vector<std::vector<SparseRows>> contributions;
  contributions.push_back(std::move(rows));
  return contributions;
}

absl::Status RingTables::ApplyStep(RingTransport& transport, int64_t op_id,
                                   int64_t steps_before, int64_t step_samples,
                                   int64_t piece_bytes, absl::Time deadline) {
  absl::StatusOr<std::vector<std::vector<SparseRows>>> contributions =
      full_table_rows_ > 0
          ? AllReduceFullTables(transport, op_id, piece_bytes, deadline)
          : GatherRows(transport, op_id, steps_before, piece_bytes, deadline);
  step_rows_.clear();
  RETURN_IF_ERROR(contributions.status());
  std::vector<const std::vector<SparseRows>*> order;
  for (const std::vector<SparseRows>& c : *contributions) order.push_back(&c);
  KeptUndo kept;
  kept.steps_before = steps_before;
  RETURN_IF_ERROR(
      store_->ApplyCheckedStep(order, step_samples, steps_before, &kept.undo));
  if (!undos_.empty() && undos_.back().steps_before + 1 != steps_before) {
    undos_.clear();  // not consecutive: the older ones no longer apply
  }
  undos_.push_back(std::move(kept));
  while (undos_.size() > kKeptSteps) undos_.pop_front();
  return absl::OkStatus();
}

absl::Status RingTables::RollBackTo(int64_t from_steps, int64_t to_steps) {
  if (to_steps >= from_steps) return absl::OkStatus();
  if (undos_.empty() || undos_.back().steps_before != from_steps - 1 ||
      undos_.front().steps_before > to_steps) {
    return absl::FailedPreconditionError(
        absl::StrCat("the embedding tables keep no undo of steps ", to_steps,
                     "..", from_steps - 1, ": cannot roll back from ",
                     from_steps, " to ", to_steps, " steps"));
  }
  while (!undos_.empty() && undos_.back().steps_before >= to_steps) {
    store_->Undo(undos_.back().undo);
    undos_.pop_back();
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> RingTables::Broadcast(RingTransport& transport,
                                           int64_t op_id, int root,
                                           int64_t piece_bytes,
                                           absl::Time deadline) {
  // Every member's digest: no copy of the tables when all hold root's.
  const uint64_t digest = Digest();
  std::string mine(sizeof(digest), '\0');
  std::memcpy(mine.data(), &digest, sizeof(digest));
  ASSIGN_OR_RETURN(
      const std::vector<std::string> digests,
      AllGatherBytes(transport, op_id, std::move(mine), piece_bytes, deadline));
  if (root < 0 || root >= static_cast<int>(digests.size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tables broadcast from root ", root, " in a ring of ", digests.size()));
  }
  bool same = true;
  for (size_t rank = 0; rank < digests.size(); ++rank) {
    if (digests[rank].size() != sizeof(digest)) {
      return absl::DataLossError(absl::StrCat("tables digest of rank ", rank,
                                              " holds ", digests[rank].size(),
                                              " bytes, not 8"));
    }
    same = same && digests[rank] == digests[root];
  }
  if (same) return false;
  const bool sender = transport.rank() == root;
  std::string blob = sender ? Encode() : std::string();
  RETURN_IF_ERROR(
      BroadcastBytes(transport, op_id + 1, blob, root, piece_bytes, deadline));
  if (sender) return true;
  ASSIGN_OR_RETURN(std::vector<TableCheckpoint> tables,
                   DecodeTables(blob, /*with_counters=*/true));
  RETURN_IF_ERROR(store_->Restore(tables));
  undos_.clear();
  return true;
}

std::string RingTables::Encode() const { return EncodeSparseStore(*store_); }

uint64_t RingTables::Digest() const {
  // A sum of per-row hashes: the same whatever order the rows are in.
  uint64_t sum = 0;
  for (int32_t t = 0; t < store_->num_tables(); ++t) {
    const SparseTable& table = store_->table(t);
    table.ForEachRow(
        [&](uint64_t id, int64_t last_seen, absl::Span<const float> row) {
          uint64_t h = Mix(Mix(static_cast<uint64_t>(t), id),
                           static_cast<uint64_t>(last_seen));
          for (float v : row) {
            uint32_t bits;
            std::memcpy(&bits, &v, sizeof(bits));
            h = Mix(h, bits);
          }
          sum += h;
        });
    table.ForEachPending([&](uint64_t id, int32_t count, int64_t last_seen) {
      sum += Mix(
          Mix(Mix(~static_cast<uint64_t>(t), id), static_cast<uint64_t>(count)),
          static_cast<uint64_t>(last_seen));
    });
  }
  return sum;
}

}  // namespace ferry
