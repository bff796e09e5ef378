// A ParameterClient that records what an exchange does to it (pulls,
// pushes, rows) and answers from fixed values: dense element i pulls as i,
// row `id` of table t as t * 100 + id in each of its 2 elements; pulls
// answer version min_version + 2, row pulls min_version.
#ifndef FERRY_TESTS_WORKER_RECORDING_PARAMETER_CLIENT_H_
#define FERRY_TESTS_WORKER_RECORDING_PARAMETER_CLIENT_H_

#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "ps/ps_client.h"

namespace ferry::testing {

// What the exchange did to the client.
struct Calls {
  std::vector<int64_t> pulls;  // min_version of each
  // StartPull works only when set (else UNIMPLEMENTED, as for fakes); it
  // writes element i as i + 0.5 at once, and its Wait answers min_version.
  bool start_pulls = false;
  std::vector<int64_t> started_pulls;  // min_version of each StartPull
  // The range each pull asked for ({0, 0}: the whole buffer).
  std::vector<std::pair<int64_t, int64_t>> pull_ranges;
  std::vector<PushInfo> pushes;
  std::vector<std::pair<int64_t, float>> ready;    // offset, first value
  std::vector<std::pair<int64_t, int64_t>> zeros;  // ReadyZeros: offset, length
  std::vector<std::pair<int64_t, int64_t>> absent;  // ReadyAbsent
  std::vector<std::vector<SparseRows>> rows;        // AddRows calls
  std::vector<int64_t> row_pulls;                   // min_version of each
  std::vector<int32_t> row_pull_tables;
  int finished = 0;
  int destroyed_unfinished = 0;
  int shard_checks = 0;
  absl::Status shards = absl::OkStatus();  // what CheckShards answers
  absl::Status finish = absl::OkStatus();  // what Finish answers
};

class RecordingSession final : public PushSession {
 public:
  explicit RecordingSession(Calls* calls) : calls_(calls) {}
  ~RecordingSession() override {
    if (!finished_) ++calls_->destroyed_unfinished;
  }
  absl::Status Ready(int64_t offset, int64_t length,
                     const float* grads) override {
    (void)length;
    calls_->ready.emplace_back(offset, grads[0]);
    return absl::OkStatus();
  }
  absl::Status ReadyZeros(int64_t offset, int64_t length) override {
    calls_->zeros.emplace_back(offset, length);
    return absl::OkStatus();
  }
  absl::Status ReadyAbsent(int64_t offset, int64_t length) override {
    calls_->absent.emplace_back(offset, length);
    return absl::OkStatus();
  }
  absl::Status AddRows(const std::vector<SparseRows>& rows) override {
    calls_->rows.push_back(rows);
    return absl::OkStatus();
  }
  absl::Status Finish() override {
    finished_ = true;
    ++calls_->finished;
    return calls_->finish;
  }

 private:
  Calls* const calls_;
  bool finished_ = false;
};

// A pull that has landed already.
class DonePull final : public PendingPull {
 public:
  explicit DonePull(int64_t version) : version_(version) {}
  absl::StatusOr<int64_t> Wait() override { return version_; }

 private:
  const int64_t version_;
};

class RecordingParameterClient final : public ParameterClient {
 public:
  // Holds `num_elements` dense elements.
  RecordingParameterClient(Calls* calls, int64_t num_elements)
      : calls_(calls), n_(num_elements) {}
  int64_t num_elements() const override { return n_; }
  absl::StatusOr<int64_t> Pull(int64_t min_version, float* out) override {
    calls_->pulls.push_back(min_version);
    calls_->pull_ranges.emplace_back(range_.begin, range_.end);
    // The destination holds the range (ParameterClient::SetPullRange).
    const int64_t end = range_.end == 0 ? n_ : range_.end;
    for (int64_t i = range_.begin; i < end; ++i) {
      out[i - range_.begin] = static_cast<float>(i);
    }
    return min_version + 2;  // a newer version than asked
  }
  absl::StatusOr<std::unique_ptr<PendingPull>> StartPull(int64_t min_version,
                                                         float* out) override {
    if (!calls_->start_pulls)
      return ParameterClient::StartPull(min_version, out);
    calls_->started_pulls.push_back(min_version);
    const int64_t end = range_.end == 0 ? n_ : range_.end;
    for (int64_t i = range_.begin; i < end; ++i) {
      out[i - range_.begin] = static_cast<float>(i) + 0.5f;
    }
    return std::unique_ptr<PendingPull>(
        std::make_unique<DonePull>(min_version));
  }
  absl::StatusOr<std::unique_ptr<PushSession>> BeginPush(
      const PushInfo& info) override {
    calls_->pushes.push_back(info);
    return std::unique_ptr<PushSession>(
        std::make_unique<RecordingSession>(calls_));
  }
  absl::Status CheckShards(absl::Duration) override {
    ++calls_->shard_checks;
    return calls_->shards;
  }
  // Row i of a table reads as table * 100 + id in every element.
  absl::StatusOr<int64_t> PullRows(
      int64_t min_version, absl::Span<const RowRequest> tables,
      std::vector<std::vector<float>>& out) override {
    calls_->row_pulls.push_back(min_version);
    out.assign(tables.size(), {});
    for (size_t t = 0; t < tables.size(); ++t) {
      calls_->row_pull_tables.push_back(tables[t].table);
      for (uint64_t id : tables[t].ids) {
        out[t].insert(out[t].end(), 2,
                      static_cast<float>(tables[t].table * 100 + id));
      }
    }
    return min_version;
  }
  TransferBytes bytes() const override { return {100, 200, 3}; }
  void SetPullRange(FlatRange range) override { range_ = range; }

 private:
  Calls* const calls_;
  const int64_t n_;
  FlatRange range_;
};

}  // namespace ferry::testing

#endif  // FERRY_TESTS_WORKER_RECORDING_PARAMETER_CLIENT_H_
