// gRPC plumbing shared by the service fuzz targets: one grpc::Server in the
// process (on loopback TCP) for the whole run that serves one fuzz input at
// a time (a "session"), and raw calls that send arbitrary bytes as the request
// messages of any method (unary or streaming) through a grpc::GenericStub,
// so that the server's own parsing is fuzzed too.
//
// Starting a server costs tens of milliseconds under ASan, far more than a
// whole input's calls, so a target starts one for the process (static,
// never destroyed) and gives every input a fresh core and service behind
// it:
//
//   struct Shared {                  // one per process
//     CallSessions sessions;
//     Forwarder forwarder{&sessions};  // the API's grpc::Service; each
//     LoopbackServer server{&forwarder, &sessions};  // handler forwards to
//   };                               // S through ForwardUnary & co.
//
//   struct UnderTest {               // per input: a fresh core and S
//     std::unique_ptr<Core> core;
//     std::unique_ptr<S> service;
//     std::unique_ptr<CallSessions::Scope> session;  // after them
//   };
//   t->session = std::make_unique<CallSessions::Scope>(&shared.sessions,
//                                                      t->service.get());
//   ... RawCall(shared.server.channel(), ...) ...
//   // ~Scope (destroyed first) waits for every call of the input to end
//   // on the server side (reactors done) before the core and S go.
//
// Every call carries its session's number (metadata set by an interceptor
// on channel()); a call that reaches its handler after its session ended (a
// late dispatch on a loaded machine) is refused, so no call of one input
// ever touches the core of the next. What does persist across inputs is
// gRPC's own state: the server, its channel and transport, thread pools and
// memory allocators.
//
// Every call has a deadline, so no input can hang a target.
//
// Thread safety: LoopbackServer, CallSessions and RawCall are thread-safe
// (each call has its own completion queue); Scope is not (one per input).
#ifndef FERRY_TESTS_FUZZ_GRPC_FUZZ_UTIL_H_
#define FERRY_TESTS_FUZZ_GRPC_FUZZ_UTIL_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/grpcpp.h"
#include "proto/rpc_auth.h"         // RejectUnary, RejectRead, RejectWrite
#include "tests/fuzz/fuzz_input.h"  // FuzzCheck
#include "tests/testing/raw_stream_call.h"

namespace ferry::fuzz {

// Deadline of one call unless a target says otherwise: long enough for a
// loaded machine, short enough that a waiting call does not stall the run.
inline constexpr absl::Duration kCallDeadline = absl::Milliseconds(200);

// How long ending a session waits for the server side of its calls (their
// deadlines are far shorter); past it the target aborts (a hung reactor is
// a finding).
inline constexpr absl::Duration kSessionDrainLimit = absl::Seconds(20);

// The status of a call refused because its session had ended.
grpc::Status StaleCallStatus();

// The sessions of one server: which target (a per-input service) the calls
// of the running session go to, and which of them are still live.
class CallSessions {
 public:
  // Runs one session for its lifetime: calls made meanwhile go to
  // `target`, and the destructor ends the session (see End()). Declare it
  // after the objects `target` uses, so that it ends first.
  class Scope {
   public:
    Scope(CallSessions* sessions, void* target) : sessions_(sessions) {
      sessions_->Begin(target);
    }
    ~Scope() { sessions_->End(); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    CallSessions* const sessions_;
  };

  // Starts a session whose calls go to `target` (not owned; must outlive
  // End()). REQUIRES: no session running.
  void Begin(void* target);

  // Waits until gRPC has released every call admitted in the running
  // session (each reactor's OnDone has returned), then ends it: its calls
  // that reach a handler later are refused. FuzzCheck-fails after
  // kSessionDrainLimit. REQUIRES: a session running.
  void End();

  // For the handlers of a forwarding service: the running session's target
  // when `context`'s call was made in it, else null (the handler must
  // refuse the call, e.g. with StaleCallStatus()). An admitted call is live
  // until Release(context).
  template <typename Target>
  Target* Admit(grpc::CallbackServerContext* context) {
    return static_cast<Target*>(AdmitCall(context));
  }

  // The call of `context` is over (called by the server's ContextAllocator
  // after the reactor's OnDone).
  void Release(const grpc::CallbackServerContext* context);

  // The number stamped on calls made now.
  uint64_t current() const;

 private:
  void* AdmitCall(grpc::CallbackServerContext* context);

  mutable absl::Mutex mu_;
  uint64_t session_ ABSL_GUARDED_BY(mu_) = 1;
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  void* target_ ABSL_GUARDED_BY(mu_) = nullptr;
  absl::flat_hash_set<const grpc::CallbackServerContext*> live_
      ABSL_GUARDED_BY(mu_);
};

// Handlers of a forwarding service: pass the call to the running session's
// S (`method` of it, e.g. &PsService::Restore), or refuse it with
// StaleCallStatus() when `context`'s call was made in an earlier session.
template <typename S, typename Request, typename Response>
grpc::ServerUnaryReactor* ForwardUnary(
    CallSessions* sessions,
    grpc::ServerUnaryReactor* (S::*method)(grpc::CallbackServerContext*,
                                           const Request*, Response*),
    grpc::CallbackServerContext* context, const Request* request,
    Response* response) {
  S* s = sessions->Admit<S>(context);
  return s != nullptr ? (s->*method)(context, request, response)
                      : RejectUnary(context, StaleCallStatus());
}

// The same for a client-streaming method.
template <typename S, typename Request, typename Response>
grpc::ServerReadReactor<Request>* ForwardRead(
    CallSessions* sessions,
    grpc::ServerReadReactor<Request>* (S::*method)(grpc::CallbackServerContext*,
                                                   Response*),
    grpc::CallbackServerContext* context, Response* response) {
  S* s = sessions->Admit<S>(context);
  return s != nullptr ? (s->*method)(context, response)
                      : RejectRead<Request>(StaleCallStatus());
}

// The same for a server-streaming method.
template <typename S, typename Request, typename Response>
grpc::ServerWriteReactor<Response>* ForwardWrite(
    CallSessions* sessions,
    grpc::ServerWriteReactor<Response>* (S::*method)(
        grpc::CallbackServerContext*, const Request*),
    grpc::CallbackServerContext* context, const Request* request) {
  S* s = sessions->Admit<S>(context);
  return s != nullptr ? (s->*method)(context, request)
                      : RejectWrite<Response>(StaleCallStatus());
}

// `service` served in this process with ferry's server options
// (ConfigureServerBuilder) on a loopback TCP port (127.0.0.1:0). Turns
// protobuf's log off for the process (it complains about every fuzzed
// string that is not UTF-8). `service` and `sessions` must outlive the
// server; the service's handlers reach the per-input core through
// `sessions`.
class LoopbackServer {
 public:
  LoopbackServer(grpc::Service* service, CallSessions* sessions);
  // Shuts down, cancelling calls still running after a short grace period.
  // (Targets keep theirs for the whole process and never destroy it.)
  ~LoopbackServer();

  LoopbackServer(const LoopbackServer&) = delete;
  LoopbackServer& operator=(const LoopbackServer&) = delete;

  // Calls through it carry the session number current when they start.
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }

 private:
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

// A raw call's outcome: its status, and each response message's bytes in
// order.
using RawCallResult = testutil::RawCallResult;

// Calls `method` (e.g. "/ferry.v1.ParameterServer/Push") with `requests` as
// the raw request messages, half-closes, and reads the responses (at most
// 1024, testutil::RawStreamCall's default; the call is cancelled past
// them) until the status.
// With FERRY_FUZZ_TRACE set in the environment, prints every call (method,
// status, responses, milliseconds) and every session's end to stderr.
RawCallResult RawCall(const std::shared_ptr<grpc::Channel>& channel,
                      const std::string& method,
                      const std::vector<std::string>& requests,
                      absl::Duration deadline = kCallDeadline);

}  // namespace ferry::fuzz

#endif  // FERRY_TESTS_FUZZ_GRPC_FUZZ_UTIL_H_
