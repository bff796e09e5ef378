// The CTR generator: Criteo-format files that read back, same seed same
// bytes, a positive rate near the target, a teacher that beats chance (and
// its AUC in meta.json), Zipf-skewed ids, bad options refused.
#include "data/ctr_generator.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "data/criteo_reader.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/data/temp_dir_test.h"

namespace ferry {
namespace {

std::string Slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

using CtrGeneratorTest = TempDirTest;

CtrGeneratorOptions Small(uint64_t seed) {
  CtrGeneratorOptions o;
  o.rows = 3000;
  o.test_rows = 2000;
  o.seed = seed;
  return o;
}

TEST_F(CtrGeneratorTest, WritesReadableFilesAndTheTeachersAuc) {
  std::vector<std::pair<int64_t, int64_t>> progress;
  auto meta = WriteCtrDataset(
      (dir_ / "a").string(), Small(7),
      [&](int64_t done, int64_t total) { progress.emplace_back(done, total); });
  ASSERT_TRUE(meta.ok()) << meta.status();
  ASSERT_FALSE(progress.empty());
  EXPECT_EQ(progress.back(), std::make_pair(int64_t{5000}, int64_t{5000}));
  EXPECT_NEAR(meta->train_positive_rate, 0.25, 0.05);
  EXPECT_GT(meta->teacher_test_auc, 0.7);  // far from chance
  EXPECT_LT(meta->teacher_test_auc, 1.0);

  for (const char* name : {"train.tsv", "test.tsv"}) {
    auto reader = CriteoReader::Open((dir_ / "a" / name).string());
    ASSERT_TRUE(reader.ok());
    CriteoExample x;
    std::map<uint64_t, int> c3;  // the 10M-id field
    while (*(*reader)->Next(x)) ++c3[x.ids[2]];
    EXPECT_EQ((*reader)->stats().malformed, 0);
    const int64_t rows = std::string(name) == "train.tsv" ? 3000 : 2000;
    EXPECT_EQ((*reader)->stats().examples, rows);
    // Zipf: the most frequent id takes a visible share of a huge field.
    int top = 0;
    for (const auto& [id, n] : c3)
      if (id != kCriteoMissingId) top = std::max(top, n);
    EXPECT_GT(top, rows / 50) << name;
  }
  const nlohmann::json j =
      nlohmann::json::parse(Slurp(dir_ / "a" / "meta.json"));
  EXPECT_EQ(j["rows"], 3000);
  EXPECT_EQ(j["vocab_sizes"].size(), 26u);
  EXPECT_DOUBLE_EQ(j["teacher_test_auc"].get<double>(), meta->teacher_test_auc);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "a" / "train.tsv.tmp"));
}

TEST_F(CtrGeneratorTest, SameSeedSameBytesOtherSeedOtherBytes) {
  ASSERT_TRUE(WriteCtrDataset((dir_ / "a").string(), Small(3)).ok());
  ASSERT_TRUE(WriteCtrDataset((dir_ / "b").string(), Small(3)).ok());
  ASSERT_TRUE(WriteCtrDataset((dir_ / "c").string(), Small(4)).ok());
  for (const char* name : {"train.tsv", "test.tsv", "meta.json"}) {
    EXPECT_EQ(Slurp(dir_ / "a" / name), Slurp(dir_ / "b" / name)) << name;
  }
  EXPECT_NE(Slurp(dir_ / "a" / "train.tsv"), Slurp(dir_ / "c" / "train.tsv"));
  // gzip holds the same lines.
  CtrGeneratorOptions gz = Small(3);
  gz.gzip = true;
  ASSERT_TRUE(WriteCtrDataset((dir_ / "g").string(), gz).ok());
  auto plain = CriteoReader::Open((dir_ / "a" / "test.tsv").string());
  auto zipped = CriteoReader::Open((dir_ / "g" / "test.tsv.gz").string());
  ASSERT_TRUE(plain.ok() && zipped.ok());
  CriteoExample x, y;
  int rows = 0;
  while (*(*plain)->Next(x)) {
    ASSERT_TRUE(*(*zipped)->Next(y));
    ASSERT_EQ(FormatCriteoLine(x), FormatCriteoLine(y));
    ++rows;
  }
  EXPECT_EQ(rows, 2000);
}

TEST_F(CtrGeneratorTest, TheTeacherScoresTheRowsItLabelled) {
  auto g = CtrGenerator::Create(Small(11));
  ASSERT_TRUE(g.ok());
  double p = 0;
  const CriteoExample x = g->Row(1, 17, &p);
  EXPECT_NEAR(p, 1 / (1 + std::exp(-g->TeacherLogit(x))), 1e-12);
  double q = 0;
  EXPECT_EQ(FormatCriteoLine(g->Row(1, 17, &q)), FormatCriteoLine(x));
  EXPECT_EQ(p, q);
}

TEST_F(CtrGeneratorTest, BadOptionsAreRefusedAndWriteNothing) {
  auto refused = [&](CtrGeneratorOptions o, const std::string& what) {
    auto meta = WriteCtrDataset((dir_ / "bad").string(), o);
    ASSERT_FALSE(meta.ok());
    EXPECT_EQ(meta.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(meta.status().message()),
                ::testing::HasSubstr(what));
    EXPECT_FALSE(std::filesystem::exists(dir_ / "bad"));
  };
  CtrGeneratorOptions o = Small(1);
  o.rows = 0;
  refused(o, "rows");
  o = Small(1);
  o.vocab_sizes = {10, 20};
  refused(o, "2 vocabulary sizes");
  o.vocab_sizes.assign(26, 5);
  o.vocab_sizes[3] = 0;
  refused(o, "C4");
  o = Small(1);
  o.zipf_exponent = -1;
  refused(o, "Zipf");
  o = Small(1);
  o.target_ctr = 1;
  refused(o, "target CTR");
}

}  // namespace
}  // namespace ferry
