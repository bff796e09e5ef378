#include "data/idx_reader.h"

#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/data/temp_dir_test.h"

namespace ferry {
namespace {

using ::testing::HasSubstr;

using Bytes = std::vector<uint8_t>;

void AppendBigEndian32(Bytes& out, uint32_t v) {
  out.push_back(static_cast<uint8_t>(v >> 24));
  out.push_back(static_cast<uint8_t>(v >> 16));
  out.push_back(static_cast<uint8_t>(v >> 8));
  out.push_back(static_cast<uint8_t>(v));
}

// An IDX file: magic, dims, then `data`.
Bytes Idx(uint32_t magic, const std::vector<uint32_t>& dims,
          const Bytes& data) {
  Bytes out;
  AppendBigEndian32(out, magic);
  for (uint32_t d : dims) AppendBigEndian32(out, d);
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

Bytes Iota(size_t n) {
  Bytes out(n);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint8_t>(i * 7);
  return out;
}

class IdxReaderTest : public TempDirTest {
 protected:
  std::string WritePlain(const std::string& name, const Bytes& bytes) {
    const std::string path = (dir_ / name).string();
    FILE* f = fopen(path.c_str(), "wb");
    EXPECT_NE(f, nullptr);
    if (!bytes.empty()) fwrite(bytes.data(), 1, bytes.size(), f);
    fclose(f);
    return path;
  }

  std::string WriteGz(const std::string& name, const Bytes& bytes) {
    const std::string path = (dir_ / name).string();
    gzFile f = gzopen(path.c_str(), "wb");
    EXPECT_NE(f, nullptr);
    if (!bytes.empty()) {
      EXPECT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())),
                static_cast<int>(bytes.size()));
    }
    gzclose(f);
    return path;
  }
};

void ExpectDataLoss(const absl::StatusOr<IdxArray>& result,
                    const std::string& path, const std::string& detail) {
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kDataLoss)
      << result.status();
  EXPECT_THAT(std::string(result.status().message()), HasSubstr(path));
  EXPECT_THAT(std::string(result.status().message()), HasSubstr(detail));
}

TEST_F(IdxReaderTest, ReadsPlainImages) {
  const Bytes pixels = Iota(2 * 3 * 4);
  const std::string path =
      WritePlain("images", Idx(kIdxImagesMagic, {2, 3, 4}, pixels));
  absl::StatusOr<IdxArray> array = ReadIdxFile(path, 3);
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_EQ(array->dims, (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(array->data, pixels);
}

TEST_F(IdxReaderTest, ReadsGzipLabels) {
  const Bytes labels = {0, 9, 3, 3, 1};
  const std::string path =
      WriteGz("labels.gz", Idx(kIdxLabelsMagic, {5}, labels));
  absl::StatusOr<IdxArray> array = ReadIdxFile(path, 1);
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_EQ(array->dims, (std::vector<int64_t>{5}));
  EXPECT_EQ(array->data, labels);
}

TEST_F(IdxReaderTest, ReadsEmptyArray) {
  const std::string path =
      WriteGz("empty.gz", Idx(kIdxImagesMagic, {0, 28, 28}, {}));
  absl::StatusOr<IdxArray> array = ReadIdxFile(path, 3);
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_EQ(array->dims, (std::vector<int64_t>{0, 28, 28}));
  EXPECT_TRUE(array->data.empty());
}

TEST_F(IdxReaderTest, MissingFileIsNotFound) {
  const std::string path = (dir_ / "nope-idx1-ubyte.gz").string();
  absl::StatusOr<IdxArray> array = ReadIdxFile(path, 1);
  EXPECT_EQ(array.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(array.status().message()), HasSubstr(path));
}

TEST_F(IdxReaderTest, DirectoryIsFailedPrecondition) {
  absl::StatusOr<IdxArray> array = ReadIdxFile(dir_.string(), 1);
  EXPECT_EQ(array.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(IdxReaderTest, RankOutOfRangeIsInvalidArgument) {
  const std::string path = WritePlain("labels", Idx(kIdxLabelsMagic, {0}, {}));
  EXPECT_EQ(ReadIdxFile(path, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReadIdxFile(path, 9).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(IdxReaderTest, BadMagicIsDataLoss) {
  const std::string path = WritePlain("bad", Idx(0x12345678, {2}, {1, 2}));
  ExpectDataLoss(ReadIdxFile(path, 1), path, "0x12345678");
}

TEST_F(IdxReaderTest, LabelsReadAsImagesIsDataLoss) {
  const std::string path =
      WriteGz("labels.gz", Idx(kIdxLabelsMagic, {2}, {1, 2}));
  ExpectDataLoss(ReadIdxFile(path, 3), path, "expected 0x00000803");
}

TEST_F(IdxReaderTest, TruncatedHeaderIsDataLoss) {
  Bytes header = Idx(kIdxImagesMagic, {2, 3, 4}, {});
  header.resize(10);
  const std::string plain = WritePlain("short", header);
  ExpectDataLoss(ReadIdxFile(plain, 3), plain, "truncated IDX header");
  const std::string gz = WriteGz("short.gz", header);
  ExpectDataLoss(ReadIdxFile(gz, 3), gz, "truncated IDX header");
  const std::string tiny = WritePlain("tiny", {0, 0});
  ExpectDataLoss(ReadIdxFile(tiny, 1), tiny, "truncated IDX header");
  const std::string empty = WritePlain("empty", {});
  ExpectDataLoss(ReadIdxFile(empty, 1), empty, "truncated IDX header");
}

TEST_F(IdxReaderTest, TruncatedDataIsDataLoss) {
  Bytes file = Idx(kIdxImagesMagic, {2, 3, 4}, Iota(24));
  file.resize(file.size() - 5);
  const std::string plain = WritePlain("short", file);
  ExpectDataLoss(ReadIdxFile(plain, 3), plain, "found 19");
  const std::string gz = WriteGz("short.gz", file);
  ExpectDataLoss(ReadIdxFile(gz, 3), gz, "found 19");
}

TEST_F(IdxReaderTest, TrailingDataIsDataLoss) {
  const std::string path =
      WriteGz("long.gz", Idx(kIdxLabelsMagic, {3}, {1, 2, 3, 4}));
  ExpectDataLoss(ReadIdxFile(path, 1), path, "holds more");
}

TEST_F(IdxReaderTest, HugeHeaderIsDataLossWithoutAllocating) {
  // 2^32-1 cubed overflows 64 bits; 60000 x 60000 x 784 is under the cap but
  // far more than a tiny file can hold, plain or gzip.
  const std::string overflow = WritePlain(
      "overflow",
      Idx(kIdxImagesMagic, {0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF}, {}));
  ExpectDataLoss(ReadIdxFile(overflow, 3), overflow, "limit");
  const std::string plain =
      WritePlain("big", Idx(kIdxImagesMagic, {1000, 1000, 4000}, Iota(100)));
  ExpectDataLoss(ReadIdxFile(plain, 3), plain, "truncated IDX data");
  const std::string gz =
      WriteGz("big.gz", Idx(kIdxImagesMagic, {1000, 1000, 4000}, Iota(100)));
  ExpectDataLoss(ReadIdxFile(gz, 3), gz, "truncated IDX data");
}

TEST_F(IdxReaderTest, GzipGarbageIsDataLoss) {
  // A gzip magic followed by garbage.
  Bytes garbage = {0x1f, 0x8b, 0x08, 0x00, 0, 0, 0, 0, 0, 0x03};
  for (int i = 0; i < 200; ++i)
    garbage.push_back(static_cast<uint8_t>(i * 37 + 11));
  const std::string gz = WritePlain("garbage.gz", garbage);
  ExpectDataLoss(ReadIdxFile(gz, 3), gz, "");
  // Garbage without a gzip magic reads as plain and fails the IDX magic.
  const std::string raw = WritePlain("raw.gz", Bytes(64, 0xAB));
  ExpectDataLoss(ReadIdxFile(raw, 3), raw, "bad IDX magic");
}

TEST_F(IdxReaderTest, CutGzipStreamIsDataLoss) {
  const std::string full =
      WriteGz("full.gz", Idx(kIdxImagesMagic, {4, 16, 16}, Iota(4 * 16 * 16)));
  const auto size = std::filesystem::file_size(full);
  // Cut at several points: inside the deflate data and inside the trailer.
  for (uintmax_t keep : {size / 2, size - 6, size - 1}) {
    std::filesystem::copy_file(
        full, dir_ / "cut.gz",
        std::filesystem::copy_options::overwrite_existing);
    std::filesystem::resize_file(dir_ / "cut.gz", keep);
    const std::string cut = (dir_ / "cut.gz").string();
    ExpectDataLoss(ReadIdxFile(cut, 3), cut, "");
  }
}

TEST_F(IdxReaderTest, FlippedGzipByteIsDataLoss) {
  const std::string path =
      WriteGz("flip.gz", Idx(kIdxImagesMagic, {4, 16, 16}, Iota(4 * 16 * 16)));
  const auto size = std::filesystem::file_size(path);
  FILE* f = fopen(path.c_str(), "r+b");
  ASSERT_NE(f, nullptr);
  const long offset = static_cast<long>(size - 6);  // inside the CRC-32
  fseek(f, offset, SEEK_SET);
  const int byte = fgetc(f);
  fseek(f, offset, SEEK_SET);
  fputc(byte ^ 0x5A, f);
  fclose(f);
  // Either inflate or the CRC check rejects it; it must not read as valid.
  absl::StatusOr<IdxArray> array = ReadIdxFile(path, 3);
  EXPECT_FALSE(array.ok());
}

TEST_F(IdxReaderTest, EveryTruncationAndRandomCorruptionIsHandled) {
  const Bytes idx = Idx(kIdxImagesMagic, {3, 5, 7}, Iota(3 * 5 * 7));
  const std::string gz_path = WriteGz("source.gz", idx);
  Bytes gz(std::filesystem::file_size(gz_path));
  {
    FILE* f = fopen(gz_path.c_str(), "rb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(fread(gz.data(), 1, gz.size(), f), gz.size());
    fclose(f);
  }
  auto check = [](const absl::StatusOr<IdxArray>& result) {
    if (!result.ok()) return;
    int64_t product = 1;
    for (int64_t d : result->dims) product *= d;
    EXPECT_EQ(static_cast<int64_t>(result->data.size()), product);
  };
  for (const Bytes* source : std::vector<const Bytes*>{&idx, &gz}) {
    for (size_t keep = 0; keep < source->size(); ++keep) {
      const std::string path =
          WritePlain("cut", Bytes(source->begin(), source->begin() + keep));
      absl::StatusOr<IdxArray> result = ReadIdxFile(path, 3);
      EXPECT_FALSE(result.ok()) << "kept " << keep;
      if (!result.ok()) {
        EXPECT_EQ(result.status().code(), absl::StatusCode::kDataLoss)
            << result.status();
      }
    }
  }
  // Deterministic pseudo-random byte flips; any outcome but a crash is fine,
  // and an OK result must be self-consistent.
  uint32_t state = 12345;
  auto next = [&state] { return state = state * 1664525u + 1013904223u; };
  for (int trial = 0; trial < 300; ++trial) {
    Bytes mutated = trial % 2 == 0 ? gz : idx;
    const int flips = 1 + static_cast<int>(next() % 3);
    for (int k = 0; k < flips; ++k) {
      mutated[next() % mutated.size()] ^=
          static_cast<uint8_t>(1 + next() % 255);
    }
    check(ReadIdxFile(WritePlain("mutated", mutated), 3));
  }
}

TEST_F(IdxReaderTest, ConcatenatedGzipMembersAndTrailingZeros) {
  const Bytes idx = Idx(kIdxImagesMagic, {2, 4, 4}, Iota(32));
  const std::string first =
      WriteGz("first.gz", Bytes(idx.begin(), idx.begin() + 20));
  const std::string second =
      WriteGz("second.gz", Bytes(idx.begin() + 20, idx.end()));
  Bytes joined;
  for (const std::string& part : {first, second}) {
    FILE* f = fopen(part.c_str(), "rb");
    ASSERT_NE(f, nullptr);
    int c;
    while ((c = fgetc(f)) != EOF) joined.push_back(static_cast<uint8_t>(c));
    fclose(f);
  }
  absl::StatusOr<IdxArray> array =
      ReadIdxFile(WritePlain("joined.gz", joined), 3);
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_EQ(array->data, Iota(32));
  // Bytes after the last member that do not start another one are ignored, as
  // gzip does (e.g. padding).
  joined.insert(joined.end(), 16, 0);
  array = ReadIdxFile(WritePlain("padded.gz", joined), 3);
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_EQ(array->data, Iota(32));
}

TEST(IdxReaderRealDataTest, ReadsFashionMnistTestLabels) {
  const std::string path =
      "/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not installed";
  absl::StatusOr<IdxArray> array = ReadIdxFile(path, 1);
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_EQ(array->dims, (std::vector<int64_t>{10000}));
  EXPECT_EQ(array->data.size(), 10000u);
}

TEST_F(IdxReaderTest, RealFileCutNearItsEndIsDataLoss) {
  // A large read that ends exactly where a cut stream runs out must not look
  // like a clean end (zlib's gzread misses this case).
  const std::string source =
      "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz";
  if (!std::filesystem::exists(source))
    GTEST_SKIP() << source << " not installed";
  const auto size = std::filesystem::file_size(source);
  const std::string cut = (dir_ / "cut.gz").string();
  for (uintmax_t drop : {1, 4, 8, 9, 12}) {
    std::filesystem::copy_file(
        source, cut, std::filesystem::copy_options::overwrite_existing);
    std::filesystem::permissions(cut, std::filesystem::perms::owner_write,
                                 std::filesystem::perm_options::add);
    std::filesystem::resize_file(cut, size - drop);
    ExpectDataLoss(ReadIdxFile(cut, 3), cut, "");
  }
}

}  // namespace
}  // namespace ferry
