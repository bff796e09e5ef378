// Reads the writer's files back with a reader written here from the format
// (TFRecord framing, tensorflow.Event field numbers), checking both CRCs.
#include "common/tfevents_writer.h"

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "absl/time/clock.h"
#include "common/crc32c.h"
#include "common/training_metrics.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;

struct Event {
  double wall_time = 0;
  int64_t step = 0;
  std::string file_version;
  std::vector<std::pair<std::string, float>> values;
};

// A minimal protobuf reader: the fields an Event holds, nothing else.
class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}
  bool done() const { return pos_ >= data_.size(); }
  uint64_t Varint() {
    uint64_t v = 0;
    for (int shift = 0; pos_ < data_.size(); shift += 7) {
      const uint8_t b = static_cast<uint8_t>(data_[pos_++]);
      v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if ((b & 0x80) == 0) return v;
    }
    ADD_FAILURE() << "truncated varint";
    return v;
  }
  uint64_t Fixed(int bytes) {
    uint64_t v = 0;
    EXPECT_LE(pos_ + bytes, data_.size());
    for (int i = 0; i < bytes && pos_ < data_.size(); ++i) {
      v |= static_cast<uint64_t>(static_cast<uint8_t>(data_[pos_++]))
           << (8 * i);
    }
    return v;
  }
  std::string_view Bytes() {
    const uint64_t n = Varint();
    EXPECT_LE(pos_ + n, data_.size());
    std::string_view out = data_.substr(pos_, n);
    pos_ += n;
    return out;
  }

 private:
  std::string_view data_;
  size_t pos_ = 0;
};

Event ParseEvent(std::string_view data) {
  Event e;
  Reader r(data);
  while (!r.done()) {
    const uint64_t key = r.Varint();
    switch (key) {
      case (1 << 3) | 1: {
        const uint64_t bits = r.Fixed(8);
        std::memcpy(&e.wall_time, &bits, 8);
        break;
      }
      case (2 << 3) | 0:
        e.step = static_cast<int64_t>(r.Varint());
        break;
      case (3 << 3) | 2:
        e.file_version = std::string(r.Bytes());
        break;
      case (5 << 3) | 2: {
        Reader summary(r.Bytes());
        while (!summary.done()) {
          EXPECT_EQ(summary.Varint(), (1u << 3) | 2);  // Summary.value
          Reader value(summary.Bytes());
          std::string tag;
          float simple = 0;
          while (!value.done()) {
            const uint64_t vkey = value.Varint();
            if (vkey == ((1 << 3) | 2)) {
              tag = std::string(value.Bytes());
            } else if (vkey == ((2 << 3) | 5)) {
              const uint32_t bits = static_cast<uint32_t>(value.Fixed(4));
              std::memcpy(&simple, &bits, 4);
            } else {
              ADD_FAILURE() << "unexpected Value field key " << vkey;
              return e;
            }
          }
          e.values.emplace_back(tag, simple);
        }
        break;
      }
      default:
        ADD_FAILURE() << "unexpected Event field key " << key;
        return e;
    }
  }
  return e;
}

uint64_t LittleEndian(std::string_view bytes) {
  uint64_t v = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    v |= static_cast<uint64_t>(static_cast<uint8_t>(bytes[i])) << (8 * i);
  }
  return v;
}

// Every record of a TFRecord file, both CRCs checked.
std::vector<Event> ReadEvents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string data = buffer.str();
  std::vector<Event> events;
  size_t pos = 0;
  while (pos < data.size()) {
    EXPECT_LE(pos + 12, data.size()) << "truncated header";
    if (pos + 12 > data.size()) break;
    const std::string_view header(data.data() + pos, 8);
    const uint64_t length = LittleEndian(header);
    EXPECT_EQ(UnmaskCrc32c(static_cast<uint32_t>(
                  LittleEndian({data.data() + pos + 8, 4}))),
              Crc32c(absl::string_view(header.data(), header.size())))
        << "length CRC at " << pos;
    EXPECT_LE(pos + 12 + length + 4, data.size()) << "truncated record";
    if (pos + 12 + length + 4 > data.size()) break;
    const std::string_view body(data.data() + pos + 12, length);
    EXPECT_EQ(UnmaskCrc32c(static_cast<uint32_t>(
                  LittleEndian({data.data() + pos + 12 + length, 4}))),
              Crc32c(absl::string_view(body.data(), body.size())))
        << "data CRC at " << pos;
    events.push_back(ParseEvent(body));
    pos += 12 + length + 4;
  }
  return events;
}

std::vector<std::string> EventFiles(const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& entry : fs::directory_iterator(dir))
    files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

class TfEventsWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() /
            ("ferry_tfevents_" + std::to_string(getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name()))
               .string();
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string dir_;
};

TEST_F(TfEventsWriterTest, FramingOfAKnownRecord) {
  const std::string record = FrameTfRecord("abc");
  ASSERT_EQ(record.size(), 8u + 4 + 3 + 4);
  EXPECT_EQ(LittleEndian(std::string_view(record).substr(0, 8)), 3u);
  EXPECT_EQ(record.substr(12, 3), "abc");
  EXPECT_EQ(LittleEndian(std::string_view(record).substr(15, 4)),
            MaskCrc32c(Crc32c("abc")));
}

TEST_F(TfEventsWriterTest, RoundTripsScalarsWithStepsAndTags) {
  const absl::Time t0 = absl::Now();
  {
    auto writer = TfEventsWriter::Open(dir_ + "/run/ps");  // parents created
    ASSERT_TRUE(writer.ok()) << writer.status();
    const std::string name = fs::path((*writer)->path()).filename().string();
    EXPECT_EQ(name.rfind("events.out.tfevents.", 0), 0u) << name;
    EXPECT_NE(name.find("." + std::to_string(getpid()) + "."),
              std::string::npos)
        << name;
    for (int64_t step = 1; step <= 3; ++step) {
      ASSERT_TRUE((*writer)
                      ->WriteScalars(step, t0 + absl::Seconds(step),
                                     {{"train/loss", 2.0f / step},
                                      {"train/accuracy", 0.25f * step}})
                      .ok());
    }
    ASSERT_TRUE(
        (*writer)->WriteScalars(1LL << 40, t0, {{"big/step", -1.5f}}).ok());
  }
  const auto files = EventFiles(dir_ + "/run/ps");
  ASSERT_EQ(files.size(), 1u);
  const std::vector<Event> events = ReadEvents(files[0]);
  ASSERT_EQ(events.size(), 5u);
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  EXPECT_NEAR(events[0].wall_time,
              absl::ToDoubleSeconds(t0 - absl::UnixEpoch()), 60);
  EXPECT_TRUE(events[0].values.empty());
  for (int64_t step = 1; step <= 3; ++step) {
    const Event& e = events[step];
    EXPECT_EQ(e.step, step);
    EXPECT_DOUBLE_EQ(
        e.wall_time,
        absl::ToDoubleSeconds(t0 + absl::Seconds(step) - absl::UnixEpoch()));
    ASSERT_EQ(e.values.size(), 2u);
    EXPECT_EQ(e.values[0].first, "train/loss");
    EXPECT_FLOAT_EQ(e.values[0].second, 2.0f / step);
    EXPECT_EQ(e.values[1].first, "train/accuracy");
    EXPECT_FLOAT_EQ(e.values[1].second, 0.25f * step);
  }
  EXPECT_EQ(events[4].step, 1LL << 40);
  EXPECT_FLOAT_EQ(events[4].values.at(0).second, -1.5f);
}

TEST_F(TfEventsWriterTest, EachWriterStartsANewFileAndFlushesEveryPoint) {
  auto first = TfEventsWriter::Open(dir_);
  auto second = TfEventsWriter::Open(dir_);  // same second, same process
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_NE((*first)->path(), (*second)->path());
  ASSERT_TRUE((*first)->WriteScalars(7, absl::Now(), {{"a", 1.0f}}).ok());
  // Readable while the writer is still open: flushed.
  const std::vector<Event> events = ReadEvents((*first)->path());
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].step, 7);
  EXPECT_EQ(ReadEvents((*second)->path()).size(), 1u);
  EXPECT_EQ(EventFiles(dir_).size(), 2u);
}

TEST_F(TfEventsWriterTest, ConcurrentWritersKeepRecordsWhole) {
  auto writer = TfEventsWriter::Open(dir_);
  ASSERT_TRUE(writer.ok());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        (void)(*writer)->WriteScalars(
            t * 1000 + i, absl::Now(),
            {{"thread/" + std::to_string(t), 1.0f * i}});
      }
    });
  }
  for (auto& th : threads) th.join();
  const std::vector<Event> events = ReadEvents((*writer)->path());
  EXPECT_EQ(events.size(), 1u + 4 * 50);
}

TEST_F(TfEventsWriterTest, UncreatableDirectoryIsAClearError) {
  fs::create_directories(dir_);
  std::ofstream(dir_ + "/file") << "x";
  auto writer = TfEventsWriter::Open(dir_ + "/file/sub");
  ASSERT_FALSE(writer.ok());
  EXPECT_NE(writer.status().message().find(dir_ + "/file/sub"),
            std::string::npos)
      << writer.status();
  EXPECT_FALSE(TfEventsWriter::Open("").ok());
}

TEST_F(TfEventsWriterTest, TensorBoardSinkWritesStepAndEvalTags) {
  auto sinks = OpenMetricsSinks("", dir_);
  ASSERT_TRUE(sinks.ok()) << sinks.status();
  ASSERT_NE(*sinks, nullptr);
  StepMetrics step;
  step.step = 4;
  step.time = absl::Now();
  step.train_loss = 0.75;
  step.train_accuracy = 0.5;
  step.lr = 0.125;
  step.bytes_sent = 1000;
  step.bytes_workers = 2;
  step.step_seconds = 0.125;
  (*sinks)->RecordStep(step);
  EvalMetrics eval;
  eval.step = 4;
  eval.time = absl::Now();
  eval.test_accuracy = 0.8;
  eval.test_loss = 0.6;
  (*sinks)->RecordEval(eval);
  const auto files = EventFiles(dir_);
  ASSERT_EQ(files.size(), 1u);
  const std::vector<Event> events = ReadEvents(files[0]);
  ASSERT_EQ(events.size(), 3u);
  std::map<std::string, float> s(events[1].values.begin(),
                                 events[1].values.end());
  EXPECT_EQ(events[1].step, 4);
  EXPECT_FLOAT_EQ(s.at("train/loss"), 0.75f);
  EXPECT_FLOAT_EQ(s.at("train/accuracy"), 0.5f);
  EXPECT_FLOAT_EQ(s.at("train/lr"), 0.125f);
  EXPECT_FLOAT_EQ(s.at("comm/bytes_sent"), 1000.0f);
  EXPECT_FLOAT_EQ(s.at("comm/bytes_sent_per_worker"), 500.0f);
  EXPECT_FLOAT_EQ(s.at("time/step_seconds"), 0.125f);
  EXPECT_TRUE(s.count("time/comm_seconds") && s.count("time/compute_seconds"));
  std::map<std::string, float> e(events[2].values.begin(),
                                 events[2].values.end());
  EXPECT_EQ(events[2].step, 4);
  EXPECT_FLOAT_EQ(e.at("test/accuracy"), 0.8f);
  EXPECT_FLOAT_EQ(e.at("test/loss"), 0.6f);
  EXPECT_EQ(e.count("test/auc"), 0u) << "a dense model has no AUC";
}

TEST_F(TfEventsWriterTest, TensorBoardSinkWritesTheAucOfCtrEvaluations) {
  auto sinks = OpenMetricsSinks("", dir_);
  ASSERT_TRUE(sinks.ok()) << sinks.status();
  EvalMetrics eval;
  eval.step = 9;
  eval.time = absl::Now();
  eval.test_accuracy = 0.75;
  eval.test_loss = 0.45;
  eval.test_auc = 0.8125;
  (*sinks)->RecordEval(eval);
  const auto files = EventFiles(dir_);
  ASSERT_EQ(files.size(), 1u);
  const std::vector<Event> events = ReadEvents(files[0]);
  ASSERT_EQ(events.size(), 2u);  // the file version, then the point
  std::map<std::string, float> e(events[1].values.begin(),
                                 events[1].values.end());
  EXPECT_EQ(events[1].step, 9);
  EXPECT_FLOAT_EQ(e.at("test/auc"), 0.8125f);
  EXPECT_FLOAT_EQ(e.at("test/loss"), 0.45f);
  EXPECT_FLOAT_EQ(e.at("test/accuracy"), 0.75f);
}

}  // namespace
}  // namespace ferry
