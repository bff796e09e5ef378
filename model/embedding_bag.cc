#include "model/embedding_bag.h"

#include <algorithm>
#include <cstddef>
#include <limits>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ferry {
namespace {

size_t Bags(const SparseBatch& b) {
  return static_cast<size_t>(b.batch) * static_cast<size_t>(b.num_fields);
}

// Checks that `unique` describes `batch` (DeduplicateIds' output shape) and
// that `sizes[t]` (the rows or gradients of table t) hold
// unique.ids[t].size() * dim floats.
template <typename SpanT>
absl::Status CheckRowsMatch(const SparseBatch& batch, const UniqueRows& unique,
                            const std::vector<SpanT>& tables, int dim,
                            size_t pooled_size, const char* what) {
  RETURN_IF_ERROR(ValidateSparseBatch(batch));
  if (dim < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("embedding dim must be >= 0, got ", dim));
  }
  const size_t fields = static_cast<size_t>(batch.num_fields);
  if (unique.ids.size() != fields) {
    return absl::InvalidArgumentError(
        absl::StrCat("unique rows cover ", unique.ids.size(),
                     " tables, the batch has ", fields, " fields"));
  }
  if (unique.row_of.size() != batch.ids.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("unique rows map ", unique.row_of.size(),
                     " ids, the batch has ", batch.ids.size()));
  }
  if (tables.size() != fields) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " given for ", tables.size(), " tables, expected ", fields));
  }
  for (size_t t = 0; t < fields; ++t) {
    const size_t want = unique.ids[t].size() * static_cast<size_t>(dim);
    if (tables[t].size() != want) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, " of table ", t, " hold ", tables[t].size(),
                       " floats, expected ", unique.ids[t].size(), " rows x ",
                       dim, " = ", want));
    }
  }
  const size_t want = Bags(batch) * static_cast<size_t>(dim);
  if (pooled_size != want) {
    return absl::InvalidArgumentError(
        absl::StrCat("pooled embeddings hold ", pooled_size,
                     " floats, expected batch ", batch.batch, " x fields ",
                     batch.num_fields, " x dim ", dim, " = ", want));
  }
  for (size_t bag = 0; bag < Bags(batch); ++bag) {
    const size_t t = bag % fields;
    for (int32_t k = batch.offsets[bag]; k < batch.offsets[bag + 1]; ++k) {
      const int32_t row = unique.row_of[k];
      if (row < 0 || static_cast<size_t>(row) >= unique.ids[t].size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("id ", k, " maps to row ", row, " of table ", t,
                         ", which has ", unique.ids[t].size(), " rows"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateSparseBatch(const SparseBatch& b) {
  if (b.batch < 0 || b.num_fields < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("sparse batch: batch (", b.batch, ") and num_fields (",
                     b.num_fields, ") must be >= 0"));
  }
  const size_t bags = Bags(b);
  if (b.offsets.size() != bags + 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sparse batch: ", b.offsets.size(), " offsets, expected batch ",
        b.batch, " x fields ", b.num_fields, " + 1 = ", bags + 1));
  }
  if (b.ids.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sparse batch: ", b.ids.size(), " ids do not fit int32 offsets"));
  }
  if (b.offsets[0] != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("sparse batch: offsets[0] must be 0, got ", b.offsets[0]));
  }
  for (size_t i = 0; i < bags; ++i) {
    if (b.offsets[i + 1] < b.offsets[i]) {
      return absl::InvalidArgumentError(
          absl::StrCat("sparse batch: offsets decrease at bag ", i, " (sample ",
                       i / b.num_fields, ", field ", i % b.num_fields,
                       "): ", b.offsets[i], " then ", b.offsets[i + 1]));
    }
  }
  if (static_cast<size_t>(b.offsets.back()) != b.ids.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("sparse batch: last offset is ", b.offsets.back(),
                     ", but there are ", b.ids.size(), " ids"));
  }
  return absl::OkStatus();
}

absl::StatusOr<UniqueRows> DeduplicateIds(const SparseBatch& b) {
  RETURN_IF_ERROR(ValidateSparseBatch(b));
  const size_t fields = static_cast<size_t>(b.num_fields);
  UniqueRows out;
  out.ids.resize(fields);
  out.row_of.resize(b.ids.size());
  std::vector<absl::flat_hash_map<uint64_t, int32_t>> index(fields);
  for (size_t bag = 0; bag < Bags(b); ++bag) {
    const size_t t = bag % fields;
    for (int32_t k = b.offsets[bag]; k < b.offsets[bag + 1]; ++k) {
      const uint64_t id = b.ids[k];
      auto [it, inserted] =
          index[t].try_emplace(id, static_cast<int32_t>(out.ids[t].size()));
      if (inserted) out.ids[t].push_back(id);
      out.row_of[k] = it->second;
    }
  }
  return out;
}

const char* PoolingName(Pooling pooling) {
  return pooling == Pooling::kMean ? "mean" : "sum";
}

absl::StatusOr<Pooling> ParsePooling(std::string_view name) {
  if (name == "sum") return Pooling::kSum;
  if (name == "mean") return Pooling::kMean;
  return absl::InvalidArgumentError(absl::StrCat(
      "pooling must be \"sum\" or \"mean\", got \"", std::string(name), "\""));
}

absl::Status GatherPooled(const SparseBatch& b, const UniqueRows& unique,
                          const std::vector<absl::Span<const float>>& rows,
                          int dim, Pooling pooling, absl::Span<float> pooled) {
  RETURN_IF_ERROR(
      CheckRowsMatch(b, unique, rows, dim, pooled.size(), "row values"));
  const size_t fields = static_cast<size_t>(b.num_fields);
  const size_t d = static_cast<size_t>(dim);
  for (size_t bag = 0; bag < Bags(b); ++bag) {
    const absl::Span<const float> table = rows[bag % fields];
    float* out = pooled.data() + bag * d;
    std::fill_n(out, d, 0.0f);
    const int32_t begin = b.offsets[bag];
    const int32_t end = b.offsets[bag + 1];
    for (int32_t k = begin; k < end; ++k) {
      const float* row =
          table.data() + static_cast<size_t>(unique.row_of[k]) * d;
      for (size_t e = 0; e < d; ++e) out[e] += row[e];
    }
    if (pooling == Pooling::kMean && end - begin > 1) {
      const float n = static_cast<float>(end - begin);
      for (size_t e = 0; e < d; ++e) out[e] /= n;
    }
  }
  return absl::OkStatus();
}

absl::Status ScatterRowGradients(
    const SparseBatch& b, const UniqueRows& unique,
    absl::Span<const float> d_pooled, int dim, Pooling pooling,
    const std::vector<absl::Span<float>>& row_grads) {
  RETURN_IF_ERROR(CheckRowsMatch(b, unique, row_grads, dim, d_pooled.size(),
                                 "row gradients"));
  for (const absl::Span<float>& g : row_grads) {
    std::fill(g.begin(), g.end(), 0.0f);
  }
  const size_t fields = static_cast<size_t>(b.num_fields);
  const size_t d = static_cast<size_t>(dim);
  for (size_t bag = 0; bag < Bags(b); ++bag) {
    const absl::Span<float> table = row_grads[bag % fields];
    const float* in = d_pooled.data() + bag * d;
    const int32_t begin = b.offsets[bag];
    const int32_t end = b.offsets[bag + 1];
    const float n = static_cast<float>(end - begin);
    for (int32_t k = begin; k < end; ++k) {
      float* g = table.data() + static_cast<size_t>(unique.row_of[k]) * d;
      if (pooling == Pooling::kMean) {
        for (size_t e = 0; e < d; ++e) g[e] += in[e] / n;
      } else {
        for (size_t e = 0; e < d; ++e) g[e] += in[e];
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace ferry
