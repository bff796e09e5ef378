// The `args` object of one layer in ferry.model.v1 JSON (model_def.h): the
// reader each layer kind parses its arguments with, and the writer it writes
// them back with (layer_kinds.h).
//
// Thread safety: one thread per instance.
#ifndef FERRY_MODEL_LAYER_ARGS_H_
#define FERRY_MODEL_LAYER_ARGS_H_

#include <cstdint>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/model_def.h"
#include "nlohmann/json.hpp"

namespace ferry {

// Reads one JSON object (a layer's args, or the model's input). Every key
// must be consumed by a Get-style call or be accepted at its PyTorch default;
// Finish() refuses the rest. Errors are INVALID_ARGUMENT prefixed with
// `where` ("layer 3 (Conv2d)"). `args` must outlive the reader.
class LayerArgReader {
 public:
  LayerArgReader(std::string where, const nlohmann::json& args)
      : where_(std::move(where)), args_(args) {}

  absl::Status Error(const std::string& message) const;

  // A positive (or, with allow_zero, non-negative) int below 2^31; required
  // unless a fallback is given.
  absl::StatusOr<int64_t> Int(const std::string& key, bool required,
                              int64_t fallback, bool allow_zero = false);
  // An int or an [h, w] pair of ints; `present` tells whether it was given.
  absl::StatusOr<IntPair> Pair(const std::string& key, bool required,
                               IntPair fallback, bool allow_zero,
                               bool* present = nullptr);
  absl::StatusOr<bool> Bool(const std::string& key, bool fallback);
  // A finite number in [lo, hi] (hi exclusive when hi_open).
  absl::StatusOr<double> Number(const std::string& key, double fallback,
                                double lo, double hi, bool hi_open);
  // Accepts `key` only when it holds `expected` (PyTorch's default, the only
  // behaviour ferry implements).
  absl::Status OnlyDefault(const std::string& key,
                           const nlohmann::json& expected);
  // Marks `key` as read by the caller.
  void Known(const std::string& key) { used_.insert(key); }
  // Accepts `key` with any boolean value (e.g. inplace).
  absl::Status Ignored(const std::string& key) {
    return Bool(key, false).status();
  }
  // INVALID_ARGUMENT naming the first key no call above read.
  absl::Status Finish() const;

 private:
  absl::StatusOr<int64_t> ToInt(const std::string& key, const nlohmann::json& v,
                                bool allow_zero) const;

  std::string where_;
  const nlohmann::json& args_;
  std::set<std::string> used_;
};

// Writes a layer's args in call order (the order ModelToJson keeps).
class LayerArgWriter {
 public:
  void Int(const std::string& key, int64_t value) { args_[key] = value; }
  // One int when h == w, else [h, w].
  void Pair(const std::string& key, const IntPair& value);
  void Bool(const std::string& key, bool value) { args_[key] = value; }
  void Number(const std::string& key, double value) { args_[key] = value; }

  const nlohmann::ordered_json& args() const { return args_; }

 private:
  nlohmann::ordered_json args_ = nlohmann::ordered_json::object();
};

}  // namespace ferry

#endif  // FERRY_MODEL_LAYER_ARGS_H_
