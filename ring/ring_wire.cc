#include "ring/ring_wire.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "grpcpp/impl/codegen/proto_utils.h"

namespace ferry {
namespace {

constexpr int kDataField = 5;

// Reads a message laid out in pieces (its slices) front to back.
class PieceCursor {
 public:
  explicit PieceCursor(std::vector<absl::string_view> pieces)
      : pieces_(std::move(pieces)) {
    for (absl::string_view p : pieces_) total_ += p.size();
  }

  bool done() const { return offset_ == total_; }
  size_t offset() const { return offset_; }

  bool ReadByte(uint8_t& byte) {
    if (offset_ == total_) return false;
    while (in_piece_ == pieces_[piece_].size()) {
      ++piece_;
      in_piece_ = 0;
    }
    byte = static_cast<uint8_t>(pieces_[piece_][in_piece_++]);
    ++offset_;
    return true;
  }

  bool ReadVarint(uint64_t& value) {
    value = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      uint8_t byte = 0;
      if (!ReadByte(byte)) return false;
      value |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return true;
    }
    return false;  // more than 10 bytes
  }

  // Where some bytes lie: piece `index`, [begin, end) of it.
  struct Run {
    size_t index, begin, end;
  };

  // The next `n` bytes as runs of the pieces; false when fewer are left.
  bool Take(uint64_t n, std::vector<Run>& out) {
    if (n > total_ - offset_) return false;
    offset_ += n;
    while (n > 0) {
      const absl::string_view piece = pieces_[piece_];
      const size_t take = std::min<uint64_t>(n, piece.size() - in_piece_);
      if (take > 0) out.push_back({piece_, in_piece_, in_piece_ + take});
      in_piece_ += take;
      n -= take;
      if (in_piece_ == piece.size() && piece_ + 1 < pieces_.size()) {
        ++piece_;
        in_piece_ = 0;
      }
    }
    return true;
  }

 private:
  std::vector<absl::string_view> pieces_;
  size_t total_ = 0;
  size_t offset_ = 0;
  size_t piece_ = 0;
  size_t in_piece_ = 0;
};

// Appends `value` as a varint (protobuf's base-128 encoding).
void AppendVarint(uint64_t value, std::string& out) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

// The fast path: the message read in place. nullopt for whatever it does
// not take (a group, bytes that are malformed): protobuf decides those.
// What a wire payload's owner is (RingPayload::owner_of).
constexpr char kWireSlices = 0;

std::optional<RingWireMessage> ParseInPlace(const grpc::ByteBuffer& wire) {
  // The slices are referenced by the owner; the views point into their
  // memory (or into the Slice objects for small inlined ones), so they are
  // taken only once the slices sit where they stay.
  auto slices = std::make_shared<std::vector<grpc::Slice>>();
  if (!wire.Dump(slices.get()).ok()) return std::nullopt;
  std::vector<absl::string_view> pieces;
  for (const grpc::Slice& s : *slices) {
    pieces.emplace_back(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  PieceCursor cursor(std::move(pieces));
  // Every field but the data, re-encoded as protobuf reads it (a varint in
  // its shortest form reads the same; the data field under another wire
  // type is an unknown field to protobuf, and is kept as one here).
  std::string head_bytes;
  std::vector<PieceCursor::Run> data;
  bool has_data = false;
  while (!cursor.done()) {
    uint64_t key = 0;
    if (!cursor.ReadVarint(key) || (key >> 3) == 0) return std::nullopt;
    const int type = static_cast<int>(key & 7);
    std::string prefix;  // the key and, for a varint or a length, its value
    AppendVarint(key, prefix);
    uint64_t n = 0;  // value bytes that follow
    switch (type) {
      case 0: {
        uint64_t v = 0;
        if (!cursor.ReadVarint(v)) return std::nullopt;
        AppendVarint(v, prefix);
        break;
      }
      case 1:
        n = 8;
        break;
      case 5:
        n = 4;
        break;
      case 2:
        if (!cursor.ReadVarint(n)) return std::nullopt;
        AppendVarint(n, prefix);
        break;
      default:
        return std::nullopt;  // groups
    }
    std::vector<PieceCursor::Run> value;
    if (!cursor.Take(n, value)) return std::nullopt;
    if ((key >> 3) == kDataField && type == 2) {
      data = std::move(value);
      has_data = true;
      continue;
    }
    head_bytes += prefix;
    for (const PieceCursor::Run& run : value) {
      head_bytes.append(
          reinterpret_cast<const char*>((*slices)[run.index].begin()) +
              run.begin,
          run.end - run.begin);
    }
  }
  RingWireMessage message;
  if (!message.head.ParseFromString(head_bytes)) return std::nullopt;
  if (has_data) {
    // The data's own slices (references to the received memory; a small
    // inlined slice is copied), viewed once they sit where they stay.
    auto owner = std::make_shared<std::vector<grpc::Slice>>();
    owner->reserve(data.size());
    for (const PieceCursor::Run& run : data) {
      owner->push_back((*slices)[run.index].sub(run.begin, run.end));
    }
    std::vector<absl::string_view> views;
    for (const grpc::Slice& s : *owner) {
      views.emplace_back(reinterpret_cast<const char*>(s.begin()), s.size());
    }
    message.data =
        RingPayload(std::move(views), std::move(owner), &kWireSlices);
  }
  return message;
}

}  // namespace

const std::vector<grpc::Slice>* WireSlicesOf(const RingPayload& payload) {
  return static_cast<const std::vector<grpc::Slice>*>(
      payload.owner_of(&kWireSlices));
}

absl::StatusOr<RingWireMessage> ParseRingWire(const grpc::ByteBuffer& wire) {
  if (std::optional<RingWireMessage> fast = ParseInPlace(wire)) {
    return *std::move(fast);
  }
  // Protobuf's verdict, and a copy of the data when it parses.
  grpc::ByteBuffer copy(wire);  // references the slices
  v1::RingMessage whole;
  if (!grpc::GenericDeserialize<grpc::ProtoBufferReader,
                                google::protobuf::MessageLite>(&copy, &whole)
           .ok()) {
    return absl::InvalidArgumentError("ring message does not parse");
  }
  RingWireMessage message;
  message.data = RingPayload(std::move(*whole.mutable_data()));
  whole.clear_data();
  message.head = std::move(whole);
  return message;
}

}  // namespace ferry
