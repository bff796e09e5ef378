#include "tests/fuzz/grpc_fuzz_util.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "google/protobuf/stubs/logging.h"
#include "grpcpp/support/client_interceptor.h"
#include "proto/rpc_util.h"

namespace ferry::fuzz {
namespace {

// FERRY_FUZZ_TRACE set: every call and session end is printed with its time.
bool Tracing() {
  static const bool trace = std::getenv("FERRY_FUZZ_TRACE") != nullptr;
  return trace;
}

// Carries the session number in every call's metadata.
constexpr char kSessionKey[] = "ferry-fuzz-session";

class SessionStamp final : public grpc::experimental::Interceptor {
 public:
  explicit SessionStamp(uint64_t session) : session_(session) {}

  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::
                PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->emplace(kSessionKey,
                                                 absl::StrCat(session_));
    }
    methods->Proceed();
  }

 private:
  const uint64_t session_;
};

class SessionStampFactory final
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit SessionStampFactory(const CallSessions* sessions)
      : sessions_(sessions) {}

  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo*) override {
    return new SessionStamp(sessions_->current());
  }

 private:
  const CallSessions* const sessions_;
};

// Tells the sessions when gRPC is done with a call (after its reactor's
// OnDone). Contexts are gRPC's own (nullptr: allocate as usual); gRPC 1.51
// releases those through the server's allocator too.
class ReleaseNotifier final : public grpc::ContextAllocator {
 public:
  explicit ReleaseNotifier(CallSessions* sessions) : sessions_(sessions) {}

  void Release(grpc::CallbackServerContext* context) override {
    sessions_->Release(context);
  }

 private:
  CallSessions* const sessions_;
};

}  // namespace

grpc::Status StaleCallStatus() {
  return grpc::Status(grpc::StatusCode::ABORTED,
                      "a call of an earlier fuzz input");
}

void CallSessions::Begin(void* target) {
  absl::MutexLock lock(&mu_);
  FuzzCheck(!running_, "CallSessions::Begin: a session is running");
  running_ = true;
  target_ = target;
}

void CallSessions::End() {
  absl::MutexLock lock(&mu_);
  FuzzCheck(running_, "CallSessions::End: no session running");
  const auto drained = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return live_.empty();
  };
  const absl::Time start = absl::Now();
  FuzzCheck(mu_.AwaitWithTimeout(absl::Condition(&drained), kSessionDrainLimit),
            "a call of the input still runs on the server long after its "
            "deadline");
  if (Tracing()) {
    std::fprintf(stderr, "fuzz session %llu ended, drained in %.2f ms\n",
                 static_cast<unsigned long long>(session_),
                 absl::ToDoubleMilliseconds(absl::Now() - start));
  }
  running_ = false;
  target_ = nullptr;
  ++session_;
}

void* CallSessions::AdmitCall(grpc::CallbackServerContext* context) {
  const auto& metadata = context->client_metadata();
  const auto it = metadata.find(kSessionKey);
  uint64_t session = 0;
  if (it == metadata.end() ||
      !absl::SimpleAtoi(absl::string_view(it->second.data(), it->second.size()),
                        &session)) {
    return nullptr;
  }
  absl::MutexLock lock(&mu_);
  if (!running_ || session != session_) return nullptr;
  live_.insert(context);
  return target_;
}

void CallSessions::Release(const grpc::CallbackServerContext* context) {
  absl::MutexLock lock(&mu_);
  live_.erase(context);
}

uint64_t CallSessions::current() const {
  absl::MutexLock lock(&mu_);
  return session_;
}

LoopbackServer::LoopbackServer(grpc::Service* service, CallSessions* sessions) {
  // Protobuf logs an error for every string field that is not UTF-8, which
  // fuzzed requests are all the time; the log costs more than the call.
  google::protobuf::SetLogHandler(nullptr);
  grpc::ServerBuilder builder;
  ConfigureServerBuilder(builder);
  builder.SetContextAllocator(std::make_unique<ReleaseNotifier>(sessions));
  builder.RegisterService(service);
  // Loopback TCP, not gRPC's in-process transport: Debian's gRPC 1.51 keeps
  // about 20 KB per call over the in-process transport for the life of the
  // channel (measured with the replay driver: 20 MB over 780 Exchange calls
  // in process, 0.7 MB over TCP), which took the service targets to
  // libFuzzer's 2 GB limit after ~27k inputs.
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(),
                           &port);
  server_ = builder.BuildAndStart();
  FuzzCheck(server_ != nullptr && port > 0, "fuzz server did not start");
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  std::vector<
      std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
      interceptors;
  interceptors.push_back(std::make_unique<SessionStampFactory>(sessions));
  channel_ = grpc::experimental::CreateCustomChannelWithInterceptors(
      absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials(),
      args, std::move(interceptors));
}

LoopbackServer::~LoopbackServer() {
  server_->Shutdown(std::chrono::system_clock::now() +
                    std::chrono::milliseconds(100));
  server_->Wait();
}

RawCallResult RawCall(const std::shared_ptr<grpc::Channel>& channel,
                      const std::string& method,
                      const std::vector<std::string>& requests,
                      absl::Duration deadline) {
  const bool trace = Tracing();
  const absl::Time start = trace ? absl::Now() : absl::InfinitePast();
  RawCallResult result =
      testutil::RawStreamCall(channel, method, requests, deadline);
  if (trace) {
    std::fprintf(stderr, "fuzz call %s: %d (%s), %zu responses, %.2f ms\n",
                 method.c_str(), static_cast<int>(result.status.error_code()),
                 result.status.error_message().c_str(), result.responses.size(),
                 absl::ToDoubleMilliseconds(absl::Now() - start));
  }
  return result;
}

}  // namespace ferry::fuzz
