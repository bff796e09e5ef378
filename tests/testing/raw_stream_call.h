// RawStreamCall: a client-streaming call made with raw bytes (a
// grpc::GenericStub), as a peer that does not use ferry's clients could
// make it, for tests of how a service treats messages that do not parse.
// Header-only: any test folder may include it.
#ifndef FERRY_TESTS_TESTING_RAW_STREAM_CALL_H_
#define FERRY_TESTS_TESTING_RAW_STREAM_CALL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "proto/rpc_util.h"

namespace ferry::testutil {

struct RawCallResult {
  grpc::Status status;
  std::vector<std::string> responses;  // each response message's bytes
};

namespace internal {
inline bool Await(grpc::CompletionQueue& cq) {
  void* tag = nullptr;
  bool ok = false;
  return cq.Next(&tag, &ok) && ok;
}
}  // namespace internal

// Streams `messages` (raw bytes each) to `method` (e.g.
// "/ferry.v1.RingPeer/Exchange") over `channel`, half-closes, and reads the
// responses (at most `max_responses`; the call is cancelled past them) and
// the status. Stops writing once the server has finished the call. The
// call has `deadline`. Works for any kind of method: a unary request is a
// stream of one message.
inline RawCallResult RawStreamCall(
    const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
    const std::vector<std::string>& messages,
    absl::Duration deadline = absl::Seconds(20), size_t max_responses = 1024) {
  using internal::Await;
  RawCallResult result;
  grpc::GenericStub stub(channel);
  grpc::ClientContext context;
  SetDeadline(context, deadline);
  grpc::CompletionQueue cq;
  auto call = stub.PrepareCall(&context, method, &cq);
  void* const tag = call.get();
  call->StartCall(tag);
  if (Await(cq)) {
    for (const std::string& bytes : messages) {
      grpc::Slice slice(bytes);
      call->Write(grpc::ByteBuffer(&slice, 1), tag);
      if (!Await(cq)) break;  // the server finished the call
    }
    call->WritesDone(tag);
    Await(cq);
    grpc::ByteBuffer response;
    for (;;) {
      call->Read(&response, tag);
      if (!Await(cq)) break;
      if (result.responses.size() == max_responses) {
        context.TryCancel();
        continue;  // drain until the read fails
      }
      std::vector<grpc::Slice> slices;
      std::string bytes;
      if (!response.Dump(&slices).ok()) break;
      for (const grpc::Slice& s : slices) {
        bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
      }
      result.responses.push_back(bytes);
    }
  }
  call->Finish(&result.status, tag);
  Await(cq);
  cq.Shutdown();
  void* ignored_tag;
  bool ignored_ok;
  while (cq.Next(&ignored_tag, &ignored_ok)) {
  }
  return result;
}

// The same to the server at 127.0.0.1:`port`, on a channel of its own.
inline RawCallResult RawStreamCall(
    int port, const std::string& method,
    const std::vector<std::string>& messages,
    absl::Duration deadline = absl::Seconds(20)) {
  return RawStreamCall(MakeChannel(absl::StrCat("127.0.0.1:", port)), method,
                       messages, deadline);
}

}  // namespace ferry::testutil

#endif  // FERRY_TESTS_TESTING_RAW_STREAM_CALL_H_
