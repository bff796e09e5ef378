// Test helpers for parsers of received messages (ring/ring_wire.h,
// ps/push_intake.h): a message cut into slices where a test says, and
// random edits of a message's bytes, to check a parser against protobuf on
// inputs that are split anywhere or malformed.
#ifndef FERRY_TESTS_TESTING_WIRE_MUTATIONS_H_
#define FERRY_TESTS_TESTING_WIRE_MUTATIONS_H_

#include <cstddef>
#include <random>
#include <string>
#include <vector>

#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"

namespace ferry::testutil {

// `bytes` as a ByteBuffer of slices cut at `cuts` (ascending offsets; those
// out of range are skipped). gRPC merges adjacent slices of a few bytes.
inline grpc::ByteBuffer SlicedBuffer(const std::string& bytes,
                                     const std::vector<size_t>& cuts) {
  std::vector<grpc::Slice> slices;
  size_t at = 0;
  for (size_t cut : cuts) {
    if (cut <= at || cut >= bytes.size()) continue;
    slices.emplace_back(bytes.data() + at, cut - at);
    at = cut;
  }
  slices.emplace_back(bytes.data() + at, bytes.size() - at);
  return grpc::ByteBuffer(slices.data(), slices.size());
}

// `bytes` after 1 to `max_edits` random edits: a byte overwritten, a byte
// inserted, or the rest cut off.
inline std::string MutatedBytes(std::string bytes, std::mt19937& rng,
                                int max_edits) {
  const int edits = 1 + static_cast<int>(rng() % max_edits);
  for (int e = 0; e < edits; ++e) {
    const size_t at = rng() % (bytes.size() + 1);
    switch (rng() % 3) {
      case 0:
        if (at < bytes.size()) bytes[at] = static_cast<char>(rng());
        break;
      case 1:
        bytes.insert(at, 1, static_cast<char>(rng()));
        break;
      default:
        bytes.resize(at);
        break;
    }
  }
  return bytes;
}

// Random cut offsets in [1, size): the first below 1 + `first`, then steps
// of `step` to `step` + `spread` - 1 bytes.
inline std::vector<size_t> RandomCuts(size_t size, std::mt19937& rng,
                                      size_t first, size_t step,
                                      size_t spread) {
  std::vector<size_t> cuts;
  for (size_t c = 1 + rng() % first; c < size; c += step + rng() % spread) {
    cuts.push_back(c);
  }
  return cuts;
}

}  // namespace ferry::testutil

#endif  // FERRY_TESTS_TESTING_WIRE_MUTATIONS_H_
