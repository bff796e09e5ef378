#include "common/log.h"

#include <cstdio>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace ferry {
namespace {

class LogTest : public ::testing::Test {
 protected:
  void TearDown() override {
    ASSERT_TRUE(ConfigureLogging("ferry", "info", "text").ok());
    SetLogStreamForTesting(stderr);
  }
  // Lines written while `body` runs.
  template <typename F>
  std::string Capture(F body) {
    std::FILE* f = std::tmpfile();
    SetLogStreamForTesting(f);
    body();
    SetLogStreamForTesting(stderr);
    std::rewind(f);
    std::string out;
    char buf[512];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
    std::fclose(f);
    return out;
  }
};

TEST_F(LogTest, TextLineHasLevelComponentMessageAndQuotedFields) {
  ASSERT_TRUE(ConfigureLogging("ps-1", "info", "text").ok());
  const std::string out = Capture([] {
    LogInfo("listening", {{"port", 7071}, {"path", "/tmp/a b"}, {"job", "j1"}});
  });
  EXPECT_NE(
      out.find(" INFO  ps-1 listening port=7071 path=\"/tmp/a b\" job=j1\n"),
      std::string::npos)
      << out;
  EXPECT_EQ(out.find('\n'), out.size() - 1);  // one line
}

TEST_F(LogTest, JsonLineKeepsNumbersAndEscapesText) {
  ASSERT_TRUE(ConfigureLogging("coordinator", "debug", "json").ok());
  const std::string out = Capture([] {
    LogWarn("odd \"input\"",
            {{"step", int64_t{12}},
             {"ratio", 0.5},
             {"ok", false},
             {"error", absl::InvalidArgumentError("bad\nshape")}});
  });
  const nlohmann::json line = nlohmann::json::parse(out);
  EXPECT_EQ(line["level"], "warn");
  EXPECT_EQ(line["component"], "coordinator");
  EXPECT_EQ(line["msg"], "odd \"input\"");
  EXPECT_EQ(line["step"], 12);
  EXPECT_DOUBLE_EQ(line["ratio"].get<double>(), 0.5);
  EXPECT_EQ(line["ok"], false);
  EXPECT_EQ(line["error"], "INVALID_ARGUMENT: bad\nshape");
  EXPECT_TRUE(line["ts"].get<std::string>().ends_with("Z"));
}

TEST_F(LogTest, LevelFiltersLowerEvents) {
  ASSERT_TRUE(ConfigureLogging("w", "warn", "text").ok());
  const std::string out = Capture([] {
    LogDebug("d");
    LogInfo("i");
    LogWarn("w1");
    LogError("e1");
  });
  EXPECT_EQ(out.find(" d\n"), std::string::npos);
  EXPECT_EQ(out.find(" i\n"), std::string::npos);
  EXPECT_NE(out.find("WARN  w w1"), std::string::npos);
  EXPECT_NE(out.find("ERROR w e1"), std::string::npos);
}

TEST_F(LogTest, UnknownLevelOrFormatIsRejectedAndChangesNothing) {
  ASSERT_TRUE(ConfigureLogging("keep", "info", "text").ok());
  EXPECT_EQ(ConfigureLogging("x", "verbose", "text").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ConfigureLogging("x", "info", "xml").code(),
            absl::StatusCode::kInvalidArgument);
  const std::string line = FormatLogLine(LogLevel::kInfo, "m", {});
  EXPECT_NE(line.find(" keep m"), std::string::npos) << line;
}

}  // namespace
}  // namespace ferry
