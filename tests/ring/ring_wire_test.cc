// ParseRingWire and RingPayload (ring/ring_wire.h, ring/ring_payload.h): a
// RingMessage read from gRPC's slices with its data left in place, split
// anywhere (floats across slices), agreeing with protobuf on every input.
#include "ring/ring_wire.h"

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/wire_mutations.h"

namespace ferry {
namespace {

using ::testing::ElementsAreArray;

using testutil::SlicedBuffer;

std::vector<float> Floats(int n) {
  std::vector<float> v;
  for (int i = 0; i < n; ++i) v.push_back(0.25f * static_cast<float>(i) - 3);
  return v;
}

v1::RingMessage Message(const std::vector<float>& data) {
  v1::RingMessage m;
  m.mutable_hello()->set_job_id("job");
  m.mutable_hello()->set_generation(4);
  m.set_op_id(7);
  m.set_stage(2);
  m.set_piece(3);
  m.set_data(std::string(reinterpret_cast<const char*>(data.data()),
                         data.size() * sizeof(float)));
  return m;
}

TEST(RingWireTest, DataSplitAnywhereIsAppliedFromTheSlices) {
  const std::vector<float> floats = Floats(37);
  const std::string bytes = Message(floats).SerializeAsString();
  // Cuts at every offset one at a time, then many odd ones at once.
  std::vector<std::vector<size_t>> cut_sets;
  for (size_t c = 1; c < bytes.size(); ++c) cut_sets.push_back({c});
  cut_sets.push_back({1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 100, 101, 150});
  for (const std::vector<size_t>& cuts : cut_sets) {
    grpc::ByteBuffer wire = SlicedBuffer(bytes, cuts);
    absl::StatusOr<RingWireMessage> m = ParseRingWire(wire);
    ASSERT_TRUE(m.ok()) << m.status();
    wire.Clear();  // the payload holds its own references
    EXPECT_EQ(m->head.op_id(), 7);
    EXPECT_EQ(m->head.stage(), 2);
    EXPECT_EQ(m->head.piece(), 3);
    EXPECT_EQ(m->head.hello().job_id(), "job");
    EXPECT_TRUE(m->head.data().empty());
    ASSERT_EQ(m->data.size(), floats.size() * sizeof(float));
    std::vector<float> copied(floats.size(), -1.0f);
    m->data.ApplyFloats(copied.data(), RecvOp::kCopy);
    EXPECT_THAT(copied, ElementsAreArray(floats));
    std::vector<float> added(floats.size(), 1.0f);
    m->data.ApplyFloats(added.data(), RecvOp::kAdd);
    for (size_t i = 0; i < floats.size(); ++i) {
      EXPECT_EQ(added[i], 1.0f + floats[i]) << i;
    }
  }
  // Cut inside the data, the payload lies in several pieces of the
  // message's own slices: nothing was gathered into one string, and the
  // pieces hold exactly the data.
  absl::StatusOr<RingWireMessage> m = ParseRingWire(
      SlicedBuffer(bytes, {bytes.size() - 50, bytes.size() - 21}));
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->data.pieces(), 3u);
  EXPECT_EQ(std::move(m->data).TakeString(), Message(floats).data());
}

// Every input: accepted exactly when protobuf accepts it, with its fields.
void ExpectAsProtobuf(const std::string& bytes, const std::vector<size_t>& cuts,
                      const std::string& what) {
  v1::RingMessage expected;
  const bool parses = expected.ParseFromString(bytes);
  absl::StatusOr<RingWireMessage> got =
      ParseRingWire(SlicedBuffer(bytes, cuts));
  ASSERT_EQ(got.ok(), parses) << what << ": " << got.status();
  if (!parses) {
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
    return;
  }
  const std::string data = std::move(got->data).TakeString();
  EXPECT_EQ(data, expected.data()) << what;
  expected.clear_data();
  EXPECT_EQ(got->head.SerializeAsString(), expected.SerializeAsString())
      << what;
}

TEST(RingWireTest, OddLayoutsReadAsProtobufReadsThem) {
  const std::string data = Message(Floats(5)).data();
  std::string wire;
  // The data before the other fields, twice (the last wins), and field 5
  // as a varint (an unknown field to protobuf).
  wire += std::string("\x2a\x04", 2) + "abcd";
  wire += std::string("\x10\x09", 2);  // op_id 9
  wire += std::string("\x2a\x14", 2) + data;
  wire += std::string("\x28\x05", 2);  // field 5, wire type 0
  ExpectAsProtobuf(wire, {3, 9}, "reordered");
  // An unknown group (field 9) around a varint: protobuf keeps it, the
  // in-place reader hands it to protobuf.
  ExpectAsProtobuf(wire + std::string("\x4b\x08\x01\x4c", 4), {5}, "group");
  // Truncated in a length, in the data, in a varint.
  ExpectAsProtobuf(std::string("\x2a", 1), {}, "length");
  ExpectAsProtobuf(std::string("\x2a\x08", 2) + "abc", {}, "data");
  ExpectAsProtobuf(std::string("\x10\x80", 2), {}, "varint");
  ExpectAsProtobuf(std::string("\x00\x01", 2), {}, "field 0");
  ExpectAsProtobuf("", {}, "empty");
}

TEST(RingWireTest, RandomMutationsAgreeWithProtobuf) {
  const std::string base = Message(Floats(9)).SerializeAsString();
  std::mt19937 rng(20261204);
  for (int round = 0; round < 3000; ++round) {
    const std::string bytes = testutil::MutatedBytes(base, rng, 4);
    const std::vector<size_t> cuts =
        testutil::RandomCuts(bytes.size(), rng, 7, 1, 11);
    ExpectAsProtobuf(bytes, cuts, "round " + std::to_string(round));
    if (HasFailure()) return;
  }
}

}  // namespace
}  // namespace ferry
