#include "model/safetensors.h"

#include <cstring>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

SafetensorsFile TwoTensors() {
  SafetensorsFile f;
  f.tensors.push_back(
      {"0.weight", {2, 3}, SafetensorsDtype::kF32, {1, -2, 3.5f, 4, 5, 6}});
  f.tensors.push_back(
      {"1.num_batches_tracked", {}, SafetensorsDtype::kI64, {42}});
  f.tensors.push_back({"0.bias", {2}, SafetensorsDtype::kF32, {0.25f, -0}});
  f.metadata["format"] = "pt";
  return f;
}

// A file with `header` as its JSON header and `data` after it.
std::string Raw(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  return out + header + data;
}

std::string FloatBytes(std::initializer_list<float> v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), std::data(v), s.size());
  return s;
}

TEST(SafetensorsTest, RoundTripKeepsNamesShapesValuesOrderAndMetadata) {
  auto bytes = EncodeSafetensors(TwoTensors());
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  uint64_t header = 0;
  std::memcpy(&header, bytes->data(), 8);
  EXPECT_EQ(header % 8, 0u);  // padded as the reference writer does
  EXPECT_EQ(bytes->size(), 8 + header + 6 * 4 + 8 + 2 * 4);
  auto back = DecodeSafetensors(*bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->tensors.size(), 3u);
  EXPECT_EQ(back->tensors[0].name, "0.weight");
  EXPECT_THAT(back->tensors[0].shape, ElementsAre(2, 3));
  EXPECT_THAT(back->tensors[0].values, ElementsAre(1, -2, 3.5f, 4, 5, 6));
  EXPECT_EQ(back->tensors[1].name, "1.num_batches_tracked");
  EXPECT_EQ(back->tensors[1].dtype, SafetensorsDtype::kI64);
  EXPECT_TRUE(back->tensors[1].shape.empty());
  EXPECT_THAT(back->tensors[1].values, ElementsAre(42));
  EXPECT_EQ(back->tensors[2].name, "0.bias");
  EXPECT_EQ(back->metadata.at("format"), "pt");
}

TEST(SafetensorsTest, ReadsOtherWritersDtypesInOffsetOrder) {
  // Written by hand as another writer would: keys not in offset order, F16,
  // BF16, F64 and I32 data.
  std::string data;
  const uint16_t half[2] = {0x3c00, 0xc000};  // 1.0, -2.0
  data.append(reinterpret_cast<const char*>(half), 4);
  const uint16_t bf16[1] = {0x4049};  // 3.140625
  data.append(reinterpret_cast<const char*>(bf16), 2);
  const double f64 = 0.5;
  data.append(reinterpret_cast<const char*>(&f64), 8);
  const int32_t i32 = -7;
  data.append(reinterpret_cast<const char*>(&i32), 4);
  const std::string header =
      R"({"d":{"dtype":"I32","shape":[1],"data_offsets":[14,18]},)"
      R"("a":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},)"
      R"("c":{"dtype":"F64","shape":[],"data_offsets":[6,14]},)"
      R"("b":{"dtype":"BF16","shape":[1,1],"data_offsets":[4,6]}})";
  auto f = DecodeSafetensors(Raw(header, data));
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_EQ(f->tensors.size(), 4u);
  EXPECT_EQ(f->tensors[0].name, "a");
  EXPECT_THAT(f->tensors[0].values, ElementsAre(1.0f, -2.0f));
  EXPECT_THAT(f->tensors[1].values, ElementsAre(3.140625f));
  EXPECT_THAT(f->tensors[2].values, ElementsAre(0.5f));
  EXPECT_THAT(f->tensors[3].values, ElementsAre(-7.0f));
}

TEST(SafetensorsTest, RefusesMalformedFilesSayingWhat) {
  const std::string ok_header =
      R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string data = FloatBytes({1, 2});
  ASSERT_TRUE(DecodeSafetensors(Raw(ok_header, data)).ok());
  struct Case {
    std::string bytes;
    std::string message;
  } cases[] = {
      {"abc", "has no 8-byte header length"},
      {Raw(ok_header, data).substr(0, 20), "bytes, but the file has only"},
      {Raw(ok_header, data.substr(0, 4)), "truncated file"},
      {Raw(ok_header, data + "xx"), "2 bytes after the last tensor"},
      {Raw("{not json", data), "header is not a JSON object"},
      {Raw(R"({"w":{"dtype":"Q8","shape":[2],"data_offsets":[0,8]}})", data),
       "has dtype \"Q8\""},
      {Raw(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", data),
       "do not hold shape [3]"},
      {Raw(R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", data),
       "bad shape"},
      {Raw(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
           R"("v":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
           data),
       "overlap or gap"},
      {Raw(R"({"w":{"dtype":"F32","shape":[2]}})", data),
       "lacks dtype, shape or data_offsets"},
  };
  for (const Case& c : cases) {
    auto f = DecodeSafetensors(c.bytes);
    ASSERT_FALSE(f.ok()) << c.message;
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(f.status().message(), HasSubstr(c.message));
  }
  std::string huge(8, '\0');
  const uint64_t n = kMaxSafetensorsHeaderBytes + 1;
  std::memcpy(huge.data(), &n, 8);
  EXPECT_THAT(DecodeSafetensors(huge).status().message(),
              HasSubstr("over the limit"));
}

TEST(SafetensorsTest, EncodeRefusesBadTensors) {
  SafetensorsFile f = TwoTensors();
  f.tensors[1].name = "0.weight";
  EXPECT_THAT(EncodeSafetensors(f).status().message(), HasSubstr("repeated"));
  f = TwoTensors();
  f.tensors[0].values.pop_back();
  EXPECT_THAT(EncodeSafetensors(f).status().message(),
              HasSubstr("has 5 values"));
}

}  // namespace
}  // namespace ferry
