// The boilerplate every service method repeats, written once:
//  - HandleUnary: a unary method: the caller's authorization for `method`
//    (proto/rpc_auth.h AuthorizeCall: the shared token or its role),
//    the body (an absl::Status; it fills the response), the byte counts of
//    the call, and Finish with the status converted in one place
//    (ToGrpcStatus);
//  - AuthorizedUnary / AuthorizedRead / AuthorizedWrite: the token check in
//    front of a method whose reactor finishes later (a long poll, a client
//    or server stream): the reactor `start()` makes, or one that finishes
//    with UNAUTHENTICATED at once.
// Header-only templates; thread safety is that of the body and the counter.
#ifndef FERRY_PROTO_UNARY_HANDLER_H_
#define FERRY_PROTO_UNARY_HANDLER_H_

#include <cstdint>
#include <functional>
#include <utility>

#include "absl/status/status.h"
#include "grpcpp/grpcpp.h"
#include "proto/rpc_auth.h"
#include "proto/rpc_util.h"

namespace ferry {

// Adds a call's bytes to a counter: `sent` is the response's size (0 when
// the call failed), `received` the request's.
using CountCallBytes = std::function<void(int64_t sent, int64_t received)>;

// Checks the token (UNAUTHENTICATED without running `body`), runs
// `body()` -> absl::Status, counts the bytes with `count` (may be empty:
// not counted) and finishes the call with the body's status.
template <typename Request, typename Response, typename Body>
grpc::ServerUnaryReactor* HandleUnary(grpc::CallbackServerContext* context,
                                      RpcMethod method, const Request& request,
                                      const Response& response,
                                      const CountCallBytes& count,
                                      Body&& body) {
  if (grpc::Status auth = AuthorizeCall(context, method); !auth.ok()) {
    return RejectUnary(context, auth);
  }
  const absl::Status status = std::forward<Body>(body)();
  if (count) {
    count(status.ok() ? static_cast<int64_t>(response.ByteSizeLong()) : 0,
          static_cast<int64_t>(request.ByteSizeLong()));
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

// A unary method that finishes its reactor later: `start()` ->
// grpc::ServerUnaryReactor*, run only when the token is right.
template <typename Start>
grpc::ServerUnaryReactor* AuthorizedUnary(grpc::CallbackServerContext* context,
                                          RpcMethod method, Start&& start) {
  if (grpc::Status auth = AuthorizeCall(context, method); !auth.ok()) {
    return RejectUnary(context, auth);
  }
  return std::forward<Start>(start)();
}

// A client-streaming method: `start()` -> grpc::ServerReadReactor<Request>*.
template <typename Request, typename Start>
grpc::ServerReadReactor<Request>* AuthorizedRead(
    grpc::CallbackServerContext* context, RpcMethod method, Start&& start) {
  if (grpc::Status auth = AuthorizeCall(context, method); !auth.ok()) {
    return RejectRead<Request>(auth);
  }
  return std::forward<Start>(start)();
}

// A server-streaming method: `start()` -> grpc::ServerWriteReactor<Response>*.
template <typename Response, typename Start>
grpc::ServerWriteReactor<Response>* AuthorizedWrite(
    grpc::CallbackServerContext* context, RpcMethod method, Start&& start) {
  if (grpc::Status auth = AuthorizeCall(context, method); !auth.ok()) {
    return RejectWrite<Response>(auth);
  }
  return std::forward<Start>(start)();
}

}  // namespace ferry

#endif  // FERRY_PROTO_UNARY_HANDLER_H_
