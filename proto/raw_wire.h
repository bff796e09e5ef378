// Protobuf wire format over raw grpc::ByteBuffers, for the messages that
// carry tensor data (PS Push/Pull, ring Exchange): the small fields are
// encoded or decoded here and the float data stays in its own slices, so it
// is written from and read into tensor memory without a protobuf `bytes`
// field in between (TensorFlow's grpc_tensor_coding pattern). The bytes on
// the wire are exactly the canonical protobuf encoding of the messages.
#ifndef FERRY_PROTO_RAW_WIRE_H_
#define FERRY_PROTO_RAW_WIRE_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "google/protobuf/message_lite.h"
#include "grpcpp/grpcpp.h"

namespace ferry {

// Protobuf wire types.
inline constexpr uint8_t kWireVarint = 0, kWireFixed64 = 1, kWireLength = 2,
                         kWireFixed32 = 5;

// Writes `value` as a varint at `out` (at most 10 bytes); returns the end.
uint8_t* PutVarint(uint64_t value, uint8_t* out);

// Any message, serialized into one slice (a raw method's small messages:
// requests, headers, responses).
grpc::ByteBuffer SerializeMessage(const google::protobuf::MessageLite& message);

// Parses message `index` (from 1) of a raw `stream` ("push", "ring") into
// `out`, consuming `wire`. A raw reactor reads whole messages and parses
// them with this, because gRPC tells a typed read reactor about a message
// that does not parse exactly as it tells the end of the stream. Error:
// INVALID_ARGUMENT "<stream> message <index> does not parse".
absl::Status ParseStreamMessage(grpc::ByteBuffer& wire,
                                google::protobuf::MessageLite& out,
                                absl::string_view stream, int64_t index);

// Recycles the memory that pushed chunks are copied into, so that a push
// neither allocates nor faults in fresh pages for every chunk (for large
// models that costs more than the copy itself). A slice made by Make() gives
// its buffer back when gRPC and the push session have dropped it. Keeps at
// most `max_free_bytes` of free buffers and frees the rest. Thread-safe;
// every slice keeps the pool alive.
class ChunkBufferPool : public std::enable_shared_from_this<ChunkBufferPool> {
 public:
  explicit ChunkBufferPool(size_t max_free_bytes)
      : max_free_bytes_(max_free_bytes) {}
  ~ChunkBufferPool() {
    for (auto& [size, buffers] : free_) {
      for (Buffer* b : buffers) Delete(b);
    }
  }

  // A slice of `size` uninitialized bytes that only the caller references;
  // writable through const_cast<uint8_t*>(slice.begin()) until shared.
  grpc::Slice Make(size_t size) {
    Buffer* buffer = nullptr;
    {
      absl::MutexLock lock(&mu_);
      auto it = free_.find(size);
      if (it != free_.end() && !it->second.empty()) {
        buffer = it->second.back();
        it->second.pop_back();
        free_bytes_ -= size;
      }
    }
    if (buffer == nullptr) {
      buffer = new Buffer{static_cast<char*>(::operator new(size)), size, {}};
    }
    buffer->pool = shared_from_this();
    return grpc::Slice(buffer->data, size, &ChunkBufferPool::Release, buffer);
  }

 private:
  struct Buffer {
    char* data;
    size_t size;
    std::shared_ptr<ChunkBufferPool> pool;  // set while leased
  };

  static void Delete(Buffer* b) {
    ::operator delete(b->data);
    delete b;
  }
  static void Release(void* arg) {  // the slice's destroy callback
    Buffer* buffer = static_cast<Buffer*>(arg);
    const std::shared_ptr<ChunkBufferPool> pool = std::move(buffer->pool);
    {
      absl::MutexLock lock(&pool->mu_);
      if (pool->free_bytes_ + buffer->size <= pool->max_free_bytes_) {
        pool->free_[buffer->size].push_back(buffer);
        pool->free_bytes_ += buffer->size;
        return;
      }
    }
    Delete(buffer);
  }

  const size_t max_free_bytes_;
  absl::Mutex mu_;
  std::map<size_t, std::vector<Buffer*>> free_ ABSL_GUARDED_BY(mu_);
  size_t free_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

// Reads a received message across its slices. Positions are byte offsets
// from the start of the message.
class WireReader {
 public:
  explicit WireReader(const grpc::ByteBuffer& buffer) {
    (void)buffer.Dump(&slices_);  // fails only for a null buffer: no slices
    for (const grpc::Slice& s : slices_) size_ += s.size();
  }

  size_t size() const { return size_; }
  bool done() const { return pos_ >= size_; }
  size_t position() const { return pos_; }

  bool ReadVarint(uint64_t* value) {
    uint64_t result = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (done()) return false;
      const uint8_t byte = NextByte();
      result |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) {
        *value = result;
        return true;
      }
    }
    return false;  // more than 10 bytes
  }
  bool Skip(uint64_t n) {
    if (n > size_ - pos_) return false;
    Seek(pos_ + n);
    return true;
  }
  // Copies [begin, begin + n) of the message to `out`. REQUIRES: in range.
  void CopyOut(size_t begin, size_t n, char* out) const {
    size_t start = 0;
    for (const grpc::Slice& s : slices_) {
      if (n == 0) return;
      const size_t end = start + s.size();
      if (begin < end) {
        const size_t take = std::min(n, end - begin);
        std::memcpy(out, s.begin() + (begin - start), take);
        out += take;
        begin += take;
        n -= take;
      }
      start = end;
    }
  }

  // [begin, begin + n) of the message as references to its slices (no
  // copy of the bytes; a small inlined slice is copied). REQUIRES: in range.
  std::vector<grpc::Slice> SliceRange(size_t begin, size_t n) const {
    std::vector<grpc::Slice> out;
    size_t start = 0;
    for (const grpc::Slice& s : slices_) {
      if (n == 0) break;
      const size_t end = start + s.size();
      if (begin < end) {
        const size_t take = std::min(n, end - begin);
        out.push_back(s.sub(begin - start, begin - start + take));
        begin += take;
        n -= take;
      }
      start = end;
    }
    return out;
  }

 private:
  uint8_t NextByte() {
    while (offset_ >= slices_[slice_].size()) {
      ++slice_;
      offset_ = 0;
    }
    ++pos_;
    return slices_[slice_].begin()[offset_++];
  }
  void Seek(size_t target) {
    // Forward only: walk from the current slice.
    size_t remaining = target - pos_;
    while (remaining > 0) {
      const size_t left = slices_[slice_].size() - offset_;
      if (remaining < left) {
        offset_ += remaining;
        break;
      }
      remaining -= left;
      ++slice_;
      offset_ = 0;
    }
    pos_ = target;
  }

  std::vector<grpc::Slice> slices_;
  size_t size_ = 0;
  size_t pos_ = 0;
  size_t slice_ = 0;   // slice holding pos_ (or the end)
  size_t offset_ = 0;  // within slices_[slice_]
};

// A message read in place: every field but one `bytes` field (`field`, a
// tensor's data) parsed by protobuf into `head` from a copy of their few
// bytes; that field left where it arrived, as the received slices it lies
// in (references, not copies; empty when absent; the last occurrence wins,
// as protobuf's). nullopt for what the in-place reader does not take (a
// group, malformed bytes, a head protobuf refuses): the caller then has
// protobuf parse the whole message, so that a message is accepted exactly
// when protobuf accepts it.
std::optional<std::vector<grpc::Slice>> ParseBytesFieldInPlace(
    const grpc::ByteBuffer& wire, uint64_t field,
    google::protobuf::MessageLite& head);

}  // namespace ferry

#endif  // FERRY_PROTO_RAW_WIRE_H_
