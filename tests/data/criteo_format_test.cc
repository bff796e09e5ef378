// The Criteo TSV line format: parse, print back, and every malformed column
// named.
#include "data/criteo_format.h"

#include <string>

#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;

// label, 13 integers, 26 ids, some of each empty.
std::string GoodLine() {
  std::vector<std::string> cols = {"1"};
  for (int j = 0; j < kCriteoDense; ++j)
    cols.push_back(j == 2 ? "" : (j == 1 ? "-1" : std::to_string(j * 10)));
  for (int j = 0; j < kCriteoCategorical; ++j)
    cols.push_back(j == 5 ? "" : (j == 0 ? "68FD1E64" : "0000000a"));
  return absl::StrJoin(cols, "\t");
}

TEST(CriteoFormatTest, ParsesEveryColumnKind) {
  CriteoExample x;
  ASSERT_TRUE(ParseCriteoLine(GoodLine(), x).ok());
  EXPECT_EQ(x.label, 1);
  EXPECT_EQ(x.dense[0], 0);
  EXPECT_EQ(x.dense[1], -1);
  EXPECT_EQ(x.dense[12], 120);
  EXPECT_EQ(x.dense_missing, 1u << 2);
  EXPECT_EQ(x.ids[0], 0x68fd1e64u);
  EXPECT_EQ(x.ids[1], 10u);
  EXPECT_EQ(x.ids[5], kCriteoMissingId);
  // A trailing carriage return is fine.
  ASSERT_TRUE(ParseCriteoLine(GoodLine() + "\r", x).ok());
  EXPECT_EQ(x.ids[25], 10u);
}

TEST(CriteoFormatTest, FormatRoundTrips) {
  CriteoExample x;
  ASSERT_TRUE(ParseCriteoLine(GoodLine(), x).ok());
  const std::string line = FormatCriteoLine(x);
  EXPECT_EQ(line, [] {
    std::string s = GoodLine();
    for (char& c : s) c = static_cast<char>(std::tolower(c));
    return s;
  }());
  CriteoExample y;
  ASSERT_TRUE(ParseCriteoLine(line, y).ok());
  EXPECT_EQ(y.dense, x.dense);
  EXPECT_EQ(y.ids, x.ids);
  EXPECT_EQ(y.dense_missing, x.dense_missing);
}

TEST(CriteoFormatTest, MalformedColumnsAreNamed) {
  CriteoExample x;
  auto error = [&](const std::string& line) {
    absl::Status s = ParseCriteoLine(line, x);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << line;
    return std::string(s.message());
  };
  std::string line = GoodLine();
  EXPECT_THAT(error("2" + line.substr(1)), HasSubstr("column 1 (label)"));
  EXPECT_THAT(error(""), HasSubstr("column 1 (label)"));
  EXPECT_THAT(error(line + "\textra"), HasSubstr("more than 40"));
  EXPECT_THAT(error(line.substr(0, line.rfind('\t'))),
              HasSubstr("39 tab-separated columns, expected 40"));
  std::string bad_int = line;
  bad_int.replace(bad_int.find("\t-1\t"), 4, "\t1x\t");
  EXPECT_THAT(error(bad_int), HasSubstr("column 3 (I2)"));
  std::string bad_hex = line;
  bad_hex.replace(bad_hex.find("68FD1E64"), 8, "68FD1E6G");
  EXPECT_THAT(error(bad_hex), HasSubstr("column 15 (C1): expected 8 hex"));
  std::string short_hex = line;
  short_hex.replace(short_hex.find("68FD1E64"), 8, "68FD1E6");
  EXPECT_THAT(error(short_hex), HasSubstr("C1"));
  std::string huge = line;
  huge.replace(huge.find("\t-1\t"), 4, "\t99999999999999999999\t");
  EXPECT_THAT(error(huge), HasSubstr("I2"));
}

}  // namespace
}  // namespace ferry
