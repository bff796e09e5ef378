// The safetensors file format (huggingface/safetensors), the weights half of
// ferry's model export: an 8-byte little-endian header length N, N bytes of
// JSON header {"<name>": {"dtype": D, "shape": [...], "data_offsets": [b, e]},
// "__metadata__": {"k": "v"}} (padded with spaces to a multiple of 8), then
// the tensors' raw little-endian bytes, offsets relative to the end of the
// header. Pure functions on byte strings; callers do the file I/O through
// common/file_system.h.
#ifndef FERRY_MODEL_SAFETENSORS_H_
#define FERRY_MODEL_SAFETENSORS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ferry {

// How a tensor is stored. Every tensor is read into fp32; kI64 is what
// PyTorch writes for BatchNorm's num_batches_tracked.
enum class SafetensorsDtype { kF32, kF64, kF16, kBF16, kI64, kI32 };

struct SafetensorsTensor {
  std::string name;
  std::vector<int64_t> shape;
  SafetensorsDtype dtype = SafetensorsDtype::kF32;  // as stored in the file
  std::vector<float> values;                        // numel(shape) values
};

struct SafetensorsFile {
  std::vector<SafetensorsTensor> tensors;  // in data-offset order
  std::map<std::string, std::string> metadata;
};

// Largest header accepted (the reference implementation's limit).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100ull << 20;

// Encodes `file`. Tensors are written in the given order as F32, or as I64
// when their dtype says so (values must then be whole numbers; they are
// rounded). INVALID_ARGUMENT on an empty or duplicate name, a name equal to
// "__metadata__", a negative dimension, or values.size() != numel(shape).
absl::StatusOr<std::string> EncodeSafetensors(const SafetensorsFile& file);

// Decodes a whole file's bytes. INVALID_ARGUMENT, with what and where, on a
// truncated file, a header over kMaxSafetensorsHeaderBytes, JSON that does
// not parse, an unknown dtype, a shape whose byte size differs from its data
// offsets, offsets outside the data or overlapping, data left over between
// or after the tensors, or a duplicate name. Tensors come back sorted by
// their data offsets.
absl::StatusOr<SafetensorsFile> DecodeSafetensors(absl::string_view bytes);

// "F32", "I64", ...
const char* SafetensorsDtypeName(SafetensorsDtype dtype);

}  // namespace ferry

#endif  // FERRY_MODEL_SAFETENSORS_H_
