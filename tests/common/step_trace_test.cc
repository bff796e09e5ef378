// StepTrace writes what it recorded, in order, with the process's names, an
// unknown step as "?", and rewrites the whole file at each Flush.
#include "common/step_trace.h"

#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

std::vector<std::string> TraceLines(const std::string& dir) {
  std::ifstream in(absl::StrCat(dir, "/steptrace-", getpid(), ".txt"));
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(StepTraceTest, WritesTheEventsInOrderWithTheProcessNames) {
  std::string dir = ::testing::TempDir() + "/ferry-steptrace-XXXXXX";
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  StepTrace::EnableForTest(dir);
  StepTrace::AddName("worker w0");
  StepTrace::AddName("ps shard 1");
  StepTrace::Record(StepEvent::kBegun, 7);
  StepTrace::Record(StepEvent::kPushAcked, StepTrace::kUnknownStep, 1);
  StepTrace::Record(StepEvent::kStepApplied, 7, 1);
  ASSERT_TRUE(StepTrace::Flush().ok());

  std::vector<std::string> lines = TraceLines(dir);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0], absl::StrCat("# ferry step trace: pid ", getpid(),
                                   " names worker_w0+ps_shard_1 dropped 0"));
  std::vector<std::vector<std::string>> fields;
  for (size_t i = 1; i < lines.size(); ++i) {
    fields.push_back(absl::StrSplit(lines[i], ' '));
    ASSERT_EQ(fields.back().size(), 4u) << lines[i];
  }
  EXPECT_EQ(fields[0][1], "begun");
  EXPECT_EQ(fields[0][2], "7");
  EXPECT_EQ(fields[0][3], "-1");
  EXPECT_EQ(fields[1][1], "push_acked");
  EXPECT_EQ(fields[1][2], "?");
  EXPECT_EQ(fields[1][3], "1");
  EXPECT_EQ(fields[2][1], "step_applied");
  EXPECT_LE(std::stoll(fields[0][0]), std::stoll(fields[1][0]));
  EXPECT_LE(std::stoll(fields[1][0]), std::stoll(fields[2][0]));

  StepTrace::Record(StepEvent::kFinished, 7);
  ASSERT_TRUE(StepTrace::Flush().ok());
  lines = TraceLines(dir);
  ASSERT_EQ(lines.size(), 5u);  // the whole trace again, one more event
  EXPECT_NE(lines[4].find(" finished 7 -1"), std::string::npos) << lines[4];
}

}  // namespace
}  // namespace ferry
