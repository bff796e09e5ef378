#include "ps/ps_wire.h"

#include <string>
#include <vector>

#include "ferry/v1/ps.pb.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ferry {
namespace {

using ::testing::ElementsAreArray;

// What protobuf reads from a message ChunkMessage built.
v1::PushRequest Parsed(const grpc::ByteBuffer& wire) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(wire.Dump(&slices).ok());
  std::string bytes;
  for (const grpc::Slice& s : slices) {
    bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  v1::PushRequest request;
  EXPECT_TRUE(request.ParseFromString(bytes));
  return request;
}

TEST(PsWireTest, ChunkMessagesParseAsProtobufWithTheirAbsentRanges) {
  const float values[] = {1.5f, 0.0f, -2.0f};
  const grpc::Slice data(values, sizeof(values));
  std::vector<int64_t> many;
  for (int64_t i = 0; i < 300; ++i) {  // large bounds: multi-byte varints
    many.push_back(i * 1000003);
    many.push_back(i * 1000003 + 7);
  }
  const struct {
    int32_t chunk;
    bool with_data;
    int encoding;
    std::vector<int64_t> absent;
  } cases[] = {
      {0, true, 0, {}},
      {5, true, 0, {1, 2}},
      {7, false, v1::ENCODING_ZEROS, {0, 3}},
      {9, true, v1::ENCODING_FP16, {0, 1, 2, 3}},
      {300, false, v1::ENCODING_ZEROS, many},
  };
  for (const auto& c : cases) {
    const v1::PushRequest request = Parsed(ChunkMessage(
        c.chunk, c.with_data ? data : grpc::Slice(), c.encoding, c.absent));
    EXPECT_EQ(request.chunk_id(), c.chunk);
    EXPECT_EQ(request.data().size(), c.with_data ? sizeof(values) : 0u);
    EXPECT_EQ(static_cast<int>(request.encoding()), c.encoding);
    EXPECT_THAT(request.absent(), ElementsAreArray(c.absent));
    EXPECT_FALSE(request.has_header());
  }
}

}  // namespace
}  // namespace ferry
