// Fuzz target: ferry.v1.ParameterServer (ps/ps_service.h over a real
// PsShard and PsCheckpointer on an in-memory file system), called over a
// loopback gRPC channel.
//
// Input: byte 0 picks the mode.
//  - byte 0 < 0x80, raw mode: method = byte 0 % 9 (Push, Pull, FinalizeStep,
//    ShardInfo, Checkpoint, Restore, Fence, PullRows, ReadTables: every
//    method of the service). Push: the rest is split into frames
//    (FuzzInput::Frame), each sent as one raw request message; the other
//    methods get the rest as their one request message.
//  - byte 0 >= 0x80, structured mode: byte 1 picks the shard's layout,
//    optimizer and consistency; the rest is a program of up to kMaxOps
//    operations (pushes with a header naming the job and fuzzed worker,
//    step, generation, chunks and encodings; finalizes; pulls, some left
//    waiting in the background; shard info; checkpoints; restores; corrupt
//    checkpoint files; raw calls), so the fuzzer reaches the shard's logic.
//
// One server (loopback TCP) serves the whole run (grpc_fuzz_util.h); every
// input gets a fresh file system, shard, checkpointer and service behind
// it, and waits for the server side of all its calls to end before they
// go, so inputs are independent and replay alone. Oracles beyond "no
// crash": a successful pull streams every owned chunk once, in order, with
// 4 * length bytes, all of one version >= the one asked for; ShardInfo
// reports the shard's own version and owned chunk ids, in order; a push
// whose stream holds a message that does not parse fails.
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/file_system.h"
#include "common/gradient_codec.h"
#include "common/sharding.h"
#include "ferry/v1/ps.grpc.pb.h"
#include "ferry/v1/ps.pb.h"
#include "ps/ps_checkpointer.h"
#include "ps/ps_service.h"
#include "ps/ps_shard.h"
#include "tests/fuzz/fuzz_input.h"
#include "tests/fuzz/grpc_fuzz_util.h"

namespace ferry::fuzz {
namespace {

constexpr char kJob[] = "job";
constexpr char kCheckpointDir[] = "/ckpt";
constexpr int kMaxOps = 24;
constexpr int kWorkers = 4;
const char* const kMethods[] = {"Push",      "Pull",       "FinalizeStep",
                                "ShardInfo", "Checkpoint", "Restore",
                                "Fence",     "PullRows",   "ReadTables"};
constexpr int kNumMethods = static_cast<int>(std::size(kMethods));

std::string Method(int index) {
  return std::string("/ferry.v1.ParameterServer/") +
         kMethods[index % kNumMethods];
}

struct Layout {
  std::vector<int64_t> tensor_sizes;
  int64_t max_chunk_elements;
  int32_t num_shards;
  int32_t shard_id;
};

// Small models: a shard of several chunks, a single-chunk shard, a shard
// that owns nothing (more shards than elements) and uneven splits.
const Layout kLayouts[] = {
    {{5, 3}, 2, 2, 1}, {{7}, 7, 1, 0},    {{4, 0, 9}, 3, 3, 2},
    {{1}, 1, 3, 2},    {{2, 2}, 1, 2, 0},
};

// ferry.v1.ParameterServer for the whole process: forwards every call to
// the running input's PsService, or refuses a call of an earlier input.
class PsForwarder final
    : public v1::ParameterServer::WithRawCallbackMethod_Push<
          v1::ParameterServer::WithRawCallbackMethod_Pull<
              v1::ParameterServer::CallbackService>> {
 public:
  explicit PsForwarder(CallSessions* sessions) : sessions_(sessions) {}

  grpc::ServerReadReactor<grpc::ByteBuffer>* Push(
      grpc::CallbackServerContext* context,
      grpc::ByteBuffer* response) override {
    return ForwardRead(sessions_, &PsService::Push, context, response);
  }
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Pull(
      grpc::CallbackServerContext* context,
      const grpc::ByteBuffer* request) override {
    return ForwardWrite(sessions_, &PsService::Pull, context, request);
  }
  grpc::ServerUnaryReactor* FinalizeStep(
      grpc::CallbackServerContext* context,
      const v1::FinalizeStepRequest* request,
      v1::FinalizeStepResponse* response) override {
    return ForwardUnary(sessions_, &PsService::FinalizeStep, context, request,
                        response);
  }
  grpc::ServerUnaryReactor* ShardInfo(
      grpc::CallbackServerContext* context, const v1::ShardInfoRequest* request,
      v1::ShardInfoResponse* response) override {
    return ForwardUnary(sessions_, &PsService::ShardInfo, context, request,
                        response);
  }
  grpc::ServerUnaryReactor* Checkpoint(
      grpc::CallbackServerContext* context,
      const v1::CheckpointRequest* request,
      v1::CheckpointResponse* response) override {
    return ForwardUnary(sessions_, &PsService::Checkpoint, context, request,
                        response);
  }
  grpc::ServerUnaryReactor* Restore(grpc::CallbackServerContext* context,
                                    const v1::RestoreRequest* request,
                                    v1::RestoreResponse* response) override {
    return ForwardUnary(sessions_, &PsService::Restore, context, request,
                        response);
  }
  grpc::ServerUnaryReactor* Fence(grpc::CallbackServerContext* context,
                                  const v1::FenceRequest* request,
                                  v1::FenceResponse* response) override {
    return ForwardUnary(sessions_, &PsService::Fence, context, request,
                        response);
  }
  grpc::ServerUnaryReactor* PullRows(grpc::CallbackServerContext* context,
                                     const v1::PullRowsRequest* request,
                                     v1::PullRowsResponse* response) override {
    return ForwardUnary(sessions_, &PsService::PullRows, context, request,
                        response);
  }
  grpc::ServerWriteReactor<v1::ReadTablesChunk>* ReadTables(
      grpc::CallbackServerContext* context,
      const v1::ReadTablesRequest* request) override {
    return ForwardWrite(sessions_, &PsService::ReadTables, context, request);
  }

 private:
  CallSessions* const sessions_;
};

// The server of the whole process; never destroyed.
struct SharedServer {
  CallSessions sessions;
  PsForwarder forwarder{&sessions};
  LoopbackServer server{&forwarder, &sessions};
};

SharedServer& Shared() {
  static SharedServer* const shared = new SharedServer;
  return *shared;
}

// One input's shard with its service, behind the shared server. Members are
// destroyed in reverse order: the session first (it waits for the input's
// calls to end on the server), the file system last.
struct PsUnderTest {
  InMemoryFileSystem fs;
  std::unique_ptr<PsShard> shard;
  std::unique_ptr<PsCheckpointer> checkpointer;
  std::unique_ptr<PsService> service;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<CallSessions::Scope> session;
  std::set<int64_t> checkpointed;  // versions the harness wrote
};

std::unique_ptr<PsUnderTest> Start(uint8_t config_byte) {
  const Layout& layout = kLayouts[config_byte % std::size(kLayouts)];
  PsShardConfig config;
  config.job_id = kJob;
  config.shard_id = layout.shard_id;
  config.num_shards = layout.num_shards;
  config.tensor_sizes = layout.tensor_sizes;
  config.max_chunk_elements = layout.max_chunk_elements;
  config.optimizer.kind = static_cast<OptimizerKind>((config_byte >> 3) % 4);
  config.optimizer.lr = 0.1;
  config.consistency =
      (config_byte & 0x20) ? PsConsistency::kAsync : PsConsistency::kSync;
  int64_t total = 0;
  for (int64_t n : layout.tensor_sizes) total += n;
  const FlatRange range = ShardRange(total, layout.num_shards, layout.shard_id);
  config.initial_slice.assign(static_cast<size_t>(range.size()), 0.5f);
  auto shard = PsShard::Create(std::move(config));
  FuzzCheck(shard.ok(), "PsShard::Create failed on a fixed layout");
  auto ps = std::make_unique<PsUnderTest>();
  ps->shard = *std::move(shard);
  ps->checkpointer = std::make_unique<PsCheckpointer>(ps->shard.get(), &ps->fs,
                                                      kCheckpointDir);
  ps->service =
      std::make_unique<PsService>(ps->shard.get(), ps->checkpointer.get());
  SharedServer& shared = Shared();
  ps->channel = shared.server.channel();
  ps->session = std::make_unique<CallSessions::Scope>(&shared.sessions,
                                                      ps->service.get());
  return ps;
}

// Raw mode: bytes straight to one method.
void RunRaw(PsUnderTest& ps, FuzzInput& in, uint8_t selector) {
  const int method = selector % kNumMethods;
  std::vector<std::string> requests;
  if (method == 0) {
    while (!in.empty() && requests.size() < 64) requests.push_back(in.Frame());
  } else {
    requests.push_back(in.Rest());
  }
  RawCall(ps.channel, Method(method), requests);
}

int64_t PickStep(FuzzInput& in, int64_t version) {
  switch (in.Byte() % 8) {
    case 0:
      return version - 1;
    case 1:
      return version + 1;
    case 2:
      return in.Int<int64_t>();
    default:
      return version;
  }
}

std::string PickJob(FuzzInput& in) {
  return in.Byte() == 0xff ? in.Frame() : std::string(kJob);
}

// The bytes of one chunk of `length` elements in `encoding`: well formed
// most of the time (values drawn from the input), else raw.
std::string ChunkData(FuzzInput& in, GradientEncoding encoding,
                      int64_t length) {
  if (in.Byte() == 0xff) return in.Frame();
  std::vector<float> values(static_cast<size_t>(length));
  for (float& v : values) v = in.Byte() == 0xfe ? in.Float() : in.Byte() / 16.f;
  const int valid = static_cast<int>(encoding);
  if (valid < 0 || valid > 3) return in.Frame();
  std::string out;
  Encode(encoding, values.data(), length, (in.Byte() % 4 + 1) / 4.0, &out);
  return out;
}

struct PushRecord {
  int64_t step = 0;
  int64_t num_samples = 0;
};

void PushOp(PsUnderTest& ps, FuzzInput& in,
            std::map<std::string, PushRecord>& pushed) {
  const uint8_t flags = in.Byte();
  const std::string worker = "w" + std::to_string(in.Byte() % kWorkers);
  v1::PushRequest first;
  v1::PushHeader* h = first.mutable_header();
  h->set_job_id(PickJob(in));
  h->set_worker_id(flags & 0x80 ? in.Frame() : worker);
  h->set_generation(in.Range(-1, 6));
  h->set_step(PickStep(in, ps.shard->version()));
  h->set_num_samples(in.Range(-1, 14));
  h->set_base_version(flags & 0x40 ? in.Int<int64_t>()
                                   : ps.shard->version() - in.Range(0, 2));
  std::vector<std::string> requests;
  if (!(flags & 0x01)) requests.push_back(first.SerializeAsString());
  std::vector<Chunk> chunks = ps.shard->owned_chunks();
  if (flags & 0x02 && chunks.size() > 1) std::swap(chunks[0], chunks[1]);
  if (flags & 0x04 && !chunks.empty()) chunks.pop_back();
  if (flags & 0x08 && !chunks.empty()) chunks.push_back(chunks.front());
  for (const Chunk& chunk : chunks) {
    v1::PushRequest message;
    const uint8_t mutate = in.Byte();
    message.set_chunk_id(mutate == 0xf0 ? in.Int<int32_t>() : chunk.id);
    auto encoding = static_cast<GradientEncoding>(
        mutate == 0xf1 ? in.Int<int32_t>() : in.Byte() % 4);
    message.set_encoding(static_cast<v1::GradientEncoding>(encoding));
    message.set_data(ChunkData(in, encoding, chunk.length));
    if (mutate == 0xf2) *message.mutable_header() = first.header();
    requests.push_back(message.SerializeAsString());
  }
  // A last message that does not parse (data claims 16 bytes, has 3): the
  // push must fail however good the rest was (ps_service.h).
  const bool unparsable_tail = flags & 0x10;
  if (unparsable_tail)
    requests.push_back(
        std::string("\x1a\x10"
                    "abc",
                    5));
  const RawCallResult result = RawCall(ps.channel, Method(0), requests);
  FuzzCheck(!(unparsable_tail && result.status.ok()),
            "push: a stream with a message that does not parse was accepted");
  if (result.status.ok()) {
    pushed[h->worker_id()] = PushRecord{h->step(), h->num_samples()};
  }
}

void FinalizeOp(PsUnderTest& ps, FuzzInput& in,
                const std::map<std::string, PushRecord>& pushed) {
  v1::FinalizeStepRequest request;
  request.set_job_id(PickJob(in));
  request.set_step(PickStep(in, ps.shard->version()));
  request.set_generation(in.Range(-1, 6));
  const uint8_t mask = in.Byte();
  for (int w = 0; w < 8; ++w) {
    if (!(mask & (1 << w))) continue;
    const std::string worker = "w" + std::to_string(w % kWorkers);
    v1::Contributor* c = request.add_contributors();
    c->set_worker_id(worker);
    auto it = pushed.find(worker);
    const bool exact = it != pushed.end() && in.Byte() != 0xff;
    c->set_num_samples(exact ? it->second.num_samples : in.Range(-1, 14));
  }
  RawCall(ps.channel, Method(2), {request.SerializeAsString()});
}

// Checks a pull's stream against the contract in ps_service.h.
void CheckPull(const PsShard& shard, int64_t min_version,
               const RawCallResult& result) {
  if (!result.status.ok()) return;
  const std::vector<Chunk>& chunks = shard.owned_chunks();
  FuzzCheck(result.responses.size() == chunks.size(),
            "pull: not one message per owned chunk");
  int64_t version = -1;
  for (size_t i = 0; i < result.responses.size(); ++i) {
    v1::PullResponse response;
    FuzzCheck(response.ParseFromString(result.responses[i]),
              "pull: response does not parse");
    FuzzCheck(response.chunk_id() == chunks[i].id, "pull: wrong chunk order");
    FuzzCheck(response.data().size() ==
                  static_cast<size_t>(chunks[i].length) * sizeof(float),
              "pull: wrong chunk size");
    FuzzCheck(response.version() >= min_version, "pull: version too old");
    FuzzCheck(version < 0 || response.version() == version,
              "pull: mixed versions");
    version = response.version();
  }
}

void PullOp(PsUnderTest& ps, FuzzInput& in, std::vector<std::thread>& waits) {
  v1::PullRequest request;
  request.set_job_id(PickJob(in));
  request.set_worker_id("w0");
  const uint8_t how = in.Byte();
  const int64_t version = ps.shard->version();
  request.set_min_version(how % 8 == 0 ? in.Int<int64_t>()
                                       : version - (how % 3) + 1);
  const std::string bytes = request.SerializeAsString();
  PsUnderTest* const p = &ps;
  auto pull = [p, bytes, request](absl::Duration deadline) {
    CheckPull(*p->shard, request.min_version(),
              RawCall(p->channel, Method(1), {bytes}, deadline));
  };
  if (request.min_version() > version && waits.size() < 4) {
    // Left waiting: a later finalize or restore ends it, or the shard's
    // Shutdown() at the end of the input (or the deadline).
    waits.emplace_back(pull, absl::Milliseconds(50));
  } else {
    pull(absl::Milliseconds(request.min_version() > version ? 5 : 200));
  }
}

void InfoOp(PsUnderTest& ps) {
  const int64_t before = ps.shard->version();
  const RawCallResult result = RawCall(ps.channel, Method(3), {std::string()});
  if (!result.status.ok()) return;
  v1::ShardInfoResponse info;
  FuzzCheck(
      result.responses.size() == 1 && info.ParseFromString(result.responses[0]),
      "info: no parsable response");
  FuzzCheck(info.version() >= before && info.version() <= ps.shard->version(),
            "info: version is not the shard's");
  const std::vector<Chunk>& chunks = ps.shard->owned_chunks();
  bool same_ids = info.chunk_ids_size() == static_cast<int>(chunks.size());
  for (size_t i = 0; same_ids && i < chunks.size(); ++i) {
    same_ids = info.chunk_ids(static_cast<int>(i)) == chunks[i].id;
  }
  FuzzCheck(same_ids, "info: wrong chunk ids");
}

void CheckpointOp(PsUnderTest& ps, FuzzInput& in) {
  v1::CheckpointRequest request;
  request.set_job_id(PickJob(in));
  const uint8_t how = in.Byte();
  request.set_version(how % 4 == 0   ? in.Int<int64_t>()
                      : how % 4 == 1 ? -1
                                     : ps.shard->version());
  const RawCallResult result =
      RawCall(ps.channel, Method(4), {request.SerializeAsString()});
  if (result.status.ok()) ps.checkpointed.insert(ps.shard->version());
}

void RestoreOp(PsUnderTest& ps, FuzzInput& in) {
  v1::RestoreRequest request;
  request.set_job_id(PickJob(in));
  const uint8_t how = in.Byte();
  int64_t version = ps.shard->version();
  if (how % 4 == 0) {
    version = in.Int<int64_t>();
  } else if (how % 4 == 1 && !ps.checkpointed.empty()) {
    version = *ps.checkpointed.begin();
  }
  request.set_version(version);
  request.set_generation(in.Range(-1, 6));
  RawCall(ps.channel, Method(5), {request.SerializeAsString()});
}

// Replaces a checkpoint file the harness wrote with fuzzed bytes, or with a
// copy cut or with one byte flipped, for a later restore to read.
void CorruptOp(PsUnderTest& ps, FuzzInput& in) {
  if (ps.checkpointed.empty()) return;
  const int64_t version = *ps.checkpointed.rbegin();
  const std::string path =
      CheckpointPath(kCheckpointDir, ps.shard->config().shard_id, version);
  absl::StatusOr<std::string> bytes = ps.fs.ReadFile(path);
  std::string contents = bytes.ok() ? *bytes : std::string();
  const uint8_t how = in.Byte();
  if (how % 3 == 0 || contents.empty()) {
    contents = in.Frame();
  } else if (how % 3 == 1) {
    contents.resize(in.Int<uint16_t>() % contents.size());
  } else {
    contents[in.Int<uint16_t>() % contents.size()] ^=
        static_cast<char>(in.Byte() | 1);
  }
  ps.fs.SetFileContents(path, contents);
}

void RunStructured(PsUnderTest& ps, FuzzInput& in) {
  std::map<std::string, PushRecord> pushed;
  std::vector<std::thread> waits;
  for (int op = 0; op < kMaxOps && !in.empty(); ++op) {
    switch (in.Byte() % 9) {
      case 0:
      case 1:
        PushOp(ps, in, pushed);
        break;
      case 2:
        FinalizeOp(ps, in, pushed);
        break;
      case 3:
        PullOp(ps, in, waits);
        break;
      case 4:
        InfoOp(ps);
        break;
      case 5:
        CheckpointOp(ps, in);
        break;
      case 6:
        RestoreOp(ps, in);
        break;
      case 7:
        CorruptOp(ps, in);
        break;
      default: {
        const uint8_t method = in.Byte();
        RawCall(ps.channel, Method(method), {in.Frame()});
      }
    }
  }
  // Pulls still waiting end now (UNAVAILABLE) rather than at their
  // deadlines; one that has not reached the shard yet is refused at once.
  ps.shard->Shutdown();
  for (std::thread& t : waits) t.join();
}

}  // namespace
}  // namespace ferry::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ferry::fuzz;
  FuzzInput in(data, size);
  const uint8_t selector = in.Byte();
  if (selector < 0x80) {
    auto ps = Start(0);
    RunRaw(*ps, in, selector);
  } else {
    auto ps = Start(in.Byte());
    RunStructured(*ps, in);
  }
  return 0;
}
