#include "model/safetensors.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace ferry {
namespace {

struct DtypeInfo {
  SafetensorsDtype dtype;
  const char* name;
  int bytes;
};

constexpr DtypeInfo kDtypes[] = {
    {SafetensorsDtype::kF32, "F32", 4}, {SafetensorsDtype::kF64, "F64", 8},
    {SafetensorsDtype::kF16, "F16", 2}, {SafetensorsDtype::kBF16, "BF16", 2},
    {SafetensorsDtype::kI64, "I64", 8}, {SafetensorsDtype::kI32, "I32", 4},
};

const DtypeInfo& Info(SafetensorsDtype dtype) {
  for (const DtypeInfo& d : kDtypes) {
    if (d.dtype == dtype) return d;
  }
  return kDtypes[0];
}

// Elements of `shape`, or -1 on a negative dimension or overflow.
int64_t Numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || (d > 0 && n > (int64_t{1} << 50) / d)) return -1;
    n *= d;
  }
  return n;
}

template <typename T>
T Load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;  // the format and every platform ferry runs on are little-endian
}

float HalfToFloat(uint16_t h) {
  const uint32_t sign = (h >> 15) & 1;
  const int exponent = (h >> 10) & 0x1f;
  const uint32_t mantissa = h & 0x3ff;
  float magnitude;
  if (exponent == 0) {
    magnitude = std::ldexp(static_cast<float>(mantissa), -24);  // subnormal
  } else if (exponent == 31) {
    magnitude = mantissa == 0 ? INFINITY : NAN;
  } else {
    magnitude = std::ldexp(static_cast<float>(mantissa | 0x400), exponent - 25);
  }
  return sign ? -magnitude : magnitude;
}

float ToFloat(SafetensorsDtype dtype, const char* p) {
  switch (dtype) {
    case SafetensorsDtype::kF32:
      return Load<float>(p);
    case SafetensorsDtype::kF64:
      return static_cast<float>(Load<double>(p));
    case SafetensorsDtype::kF16:
      return HalfToFloat(Load<uint16_t>(p));
    case SafetensorsDtype::kBF16: {
      const uint32_t bits = static_cast<uint32_t>(Load<uint16_t>(p)) << 16;
      float f;
      std::memcpy(&f, &bits, 4);
      return f;
    }
    case SafetensorsDtype::kI64:
      return static_cast<float>(Load<int64_t>(p));
    case SafetensorsDtype::kI32:
      return static_cast<float>(Load<int32_t>(p));
  }
  return 0.0f;
}

absl::Status Invalid(absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("safetensors: ", what));
}

}  // namespace

const char* SafetensorsDtypeName(SafetensorsDtype dtype) {
  return Info(dtype).name;
}

absl::StatusOr<std::string> EncodeSafetensors(const SafetensorsFile& file) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!file.metadata.empty()) {
    header["__metadata__"] = nlohmann::ordered_json::object();
    for (const auto& [k, v] : file.metadata) header["__metadata__"][k] = v;
  }
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const SafetensorsTensor& t : file.tensors) {
    if (t.name.empty() || t.name == "__metadata__" ||
        !names.insert(t.name).second) {
      return Invalid(absl::StrCat("tensor name '", t.name,
                                  "' is empty, reserved or repeated"));
    }
    const int64_t numel = Numel(t.shape);
    if (numel < 0 || static_cast<size_t>(numel) != t.values.size()) {
      return Invalid(absl::StrCat("tensor '", t.name, "' has ", t.values.size(),
                                  " values, which its shape does not hold"));
    }
    const bool i64 = t.dtype == SafetensorsDtype::kI64;
    const uint64_t bytes = static_cast<uint64_t>(numel) * (i64 ? 8 : 4);
    header[t.name] = {{"dtype", i64 ? "I64" : "F32"},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');
  std::string out(8, '\0');
  const uint64_t n = json.size();
  std::memcpy(out.data(), &n, 8);
  out += json;
  out.reserve(out.size() + offset);
  for (const SafetensorsTensor& t : file.tensors) {
    if (t.dtype == SafetensorsDtype::kI64) {
      for (float v : t.values) {
        const int64_t i = std::llround(v);
        out.append(reinterpret_cast<const char*>(&i), 8);
      }
    } else {
      out.append(reinterpret_cast<const char*>(t.values.data()),
                 t.values.size() * 4);
    }
  }
  return out;
}

absl::StatusOr<SafetensorsFile> DecodeSafetensors(absl::string_view bytes) {
  if (bytes.size() < 8) {
    return Invalid(absl::StrCat("file of ", bytes.size(),
                                " bytes has no 8-byte header length"));
  }
  const uint64_t header_bytes = Load<uint64_t>(bytes.data());
  if (header_bytes > kMaxSafetensorsHeaderBytes) {
    return Invalid(absl::StrCat("header of ", header_bytes,
                                " bytes is over the limit of ",
                                kMaxSafetensorsHeaderBytes));
  }
  if (header_bytes > bytes.size() - 8) {
    return Invalid(absl::StrCat("header of ", header_bytes,
                                " bytes, but the file has only ",
                                bytes.size() - 8, " after its length"));
  }
  const nlohmann::json header = nlohmann::json::parse(
      bytes.substr(8, header_bytes), nullptr, /*allow_exceptions=*/false);
  if (!header.is_object()) return Invalid("header is not a JSON object");
  const absl::string_view data = bytes.substr(8 + header_bytes);

  SafetensorsFile file;
  struct Range {
    uint64_t begin, end;
    size_t index;
  };
  std::vector<Range> ranges;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) return Invalid("__metadata__ is not an object");
      for (const auto& [k, v] : entry.items()) {
        if (!v.is_string())
          return Invalid(absl::StrCat("metadata '", k, "' is not a string"));
        file.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    const std::string where = absl::StrCat("tensor '", name, "'");
    if (!entry.is_object() || !entry.contains("dtype") ||
        !entry.contains("shape") || !entry.contains("data_offsets")) {
      return Invalid(
          absl::StrCat(where, " lacks dtype, shape or data_offsets"));
    }
    SafetensorsTensor t;
    t.name = name;
    const nlohmann::json& dtype = entry["dtype"];
    const DtypeInfo* info = nullptr;
    for (const DtypeInfo& d : kDtypes) {
      if (dtype.is_string() && dtype.get<std::string>() == d.name) info = &d;
    }
    if (info == nullptr) {
      return Invalid(absl::StrCat(where, " has dtype ", dtype.dump(),
                                  "; F32, F64, F16, BF16, I64 and I32 are "
                                  "read"));
    }
    t.dtype = info->dtype;
    const nlohmann::json& shape = entry["shape"];
    if (!shape.is_array()) return Invalid(absl::StrCat(where, ": bad shape"));
    for (const nlohmann::json& d : shape) {
      if (!d.is_number_integer() || d.get<int64_t>() < 0) {
        return Invalid(absl::StrCat(where, ": bad shape ", shape.dump()));
      }
      t.shape.push_back(d.get<int64_t>());
    }
    const nlohmann::json& offsets = entry["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2 ||
        !offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned()) {
      return Invalid(
          absl::StrCat(where, ": bad data_offsets ", offsets.dump()));
    }
    const uint64_t begin = offsets[0].get<uint64_t>();
    const uint64_t end = offsets[1].get<uint64_t>();
    const int64_t numel = Numel(t.shape);
    if (numel < 0 || end < begin ||
        end - begin != static_cast<uint64_t>(numel) * info->bytes) {
      return Invalid(absl::StrCat(where, ": data_offsets ", offsets.dump(),
                                  " do not hold shape ", shape.dump(), " of ",
                                  info->name));
    }
    if (end > data.size()) {
      return Invalid(absl::StrCat(where, " ends at byte ", end,
                                  " of a data section of ", data.size(),
                                  " (truncated file?)"));
    }
    ranges.push_back({begin, end, file.tensors.size()});
    file.tensors.push_back(std::move(t));
  }
  std::sort(ranges.begin(), ranges.end(),
            [](const Range& a, const Range& b) { return a.begin < b.begin; });
  uint64_t expected = 0;
  std::vector<SafetensorsTensor> sorted;
  sorted.reserve(ranges.size());
  for (const Range& r : ranges) {
    SafetensorsTensor& t = file.tensors[r.index];
    if (r.begin != expected) {
      return Invalid(absl::StrCat("tensor '", t.name, "' starts at byte ",
                                  r.begin, ", expected ", expected,
                                  " (overlap or gap)"));
    }
    expected = r.end;
    const int bytes = Info(t.dtype).bytes;
    const size_t numel = (r.end - r.begin) / bytes;
    t.values.resize(numel);
    for (size_t i = 0; i < numel; ++i) {
      t.values[i] = ToFloat(t.dtype, data.data() + r.begin + i * bytes);
    }
    sorted.push_back(std::move(t));
  }
  if (expected != data.size()) {
    return Invalid(
        absl::StrCat(data.size() - expected, " bytes after the last tensor"));
  }
  file.tensors = std::move(sorted);
  return file;
}

}  // namespace ferry
