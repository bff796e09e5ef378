#include "model/layer_args.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ferry {

using Json = nlohmann::json;

absl::Status LayerArgReader::Error(const std::string& message) const {
  return absl::InvalidArgumentError(absl::StrCat(where_, ": ", message));
}

absl::StatusOr<int64_t> LayerArgReader::Int(const std::string& key,
                                            bool required, int64_t fallback,
                                            bool allow_zero) {
  used_.insert(key);
  auto it = args_.find(key);
  if (it == args_.end()) {
    if (required) return Error(absl::StrCat("missing argument '", key, "'"));
    return fallback;
  }
  return ToInt(key, *it, allow_zero);
}

absl::StatusOr<IntPair> LayerArgReader::Pair(const std::string& key,
                                             bool required, IntPair fallback,
                                             bool allow_zero, bool* present) {
  used_.insert(key);
  auto it = args_.find(key);
  if (present != nullptr) *present = it != args_.end() && !it->is_null();
  if (it == args_.end() || it->is_null()) {
    if (required) return Error(absl::StrCat("missing argument '", key, "'"));
    return fallback;
  }
  if (it->is_array()) {
    if (it->size() != 2) {
      return Error(absl::StrCat("'", key, "' must be an int or [h, w], got ",
                                it->dump()));
    }
    ASSIGN_OR_RETURN(int64_t h, ToInt(key, (*it)[0], allow_zero));
    ASSIGN_OR_RETURN(int64_t w, ToInt(key, (*it)[1], allow_zero));
    return IntPair{h, w};
  }
  ASSIGN_OR_RETURN(int64_t v, ToInt(key, *it, allow_zero));
  return IntPair{v, v};
}

absl::StatusOr<bool> LayerArgReader::Bool(const std::string& key,
                                          bool fallback) {
  used_.insert(key);
  auto it = args_.find(key);
  if (it == args_.end()) return fallback;
  if (!it->is_boolean()) {
    return Error(
        absl::StrCat("'", key, "' must be true or false, got ", it->dump()));
  }
  return it->get<bool>();
}

absl::StatusOr<double> LayerArgReader::Number(const std::string& key,
                                              double fallback, double lo,
                                              double hi, bool hi_open) {
  used_.insert(key);
  auto it = args_.find(key);
  if (it == args_.end()) return fallback;
  if (!it->is_number()) {
    return Error(
        absl::StrCat("'", key, "' must be a number, got ", it->dump()));
  }
  const double v = it->get<double>();
  if (!std::isfinite(v) || v < lo || v > hi || (hi_open && v == hi)) {
    return Error(absl::StrCat("'", key, "' is ", it->dump(), ", outside [", lo,
                              ", ", hi, hi_open ? ")" : "]"));
  }
  return v;
}

absl::Status LayerArgReader::OnlyDefault(const std::string& key,
                                         const Json& expected) {
  used_.insert(key);
  auto it = args_.find(key);
  if (it == args_.end() || *it == expected) return absl::OkStatus();
  return Error(absl::StrCat("'", key, "' = ", it->dump(),
                            " is not supported (only ", expected.dump(), ")"));
}

absl::Status LayerArgReader::Finish() const {
  for (auto it = args_.begin(); it != args_.end(); ++it) {
    if (!used_.contains(it.key())) {
      return Error(absl::StrCat("unknown argument '", it.key(), "'"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> LayerArgReader::ToInt(const std::string& key,
                                              const Json& v,
                                              bool allow_zero) const {
  if (!v.is_number_integer()) {
    return Error(
        absl::StrCat("'", key, "' must be an integer, got ", v.dump()));
  }
  const int64_t i = v.get<int64_t>();
  if (i < 0 || (i == 0 && !allow_zero) || i > (int64_t{1} << 31) - 1) {
    return Error(absl::StrCat("'", key, "' is ", i, ", must be ",
                              allow_zero ? ">= 0" : "> 0"));
  }
  return i;
}

void LayerArgWriter::Pair(const std::string& key, const IntPair& value) {
  if (value.h == value.w) {
    args_[key] = value.h;
  } else {
    args_[key] = nlohmann::ordered_json::array({value.h, value.w});
  }
}

}  // namespace ferry
