#include "server/ps_command.h"

#include "common/status_macros.h"
#include "server/server_flags.h"

namespace ferry {

void AddPsFlags(CLI::App& command, PsCommandLine& line) {
  PsFlags& f = line.flags;
  AddListenFlags(command, f.listen, f.port_file,
                 "; with --partitions K: one HOST:PORT (partition i on "
                 "PORT+i) or K of them, comma-separated");
  const std::string ps = "PS shard";
  command.add_option("--coordinator", f.coordinator, "coordinator HOST:PORT")
      ->group(ps);
  command.add_option("--shard-id", f.shard_id, "this shard's index")
      ->capture_default_str()
      ->group(ps);
  command
      .add_option("--partitions", f.partitions,
                  "logical shards this process serves, each its own PS shard "
                  "on its own port (partition i on PORT+i): the job's --shards "
                  "then lists processes x partitions addresses, process p's "
                  "partition i at position p + i x processes; a sync step "
                  "applies and serves each partition as soon as its pushes "
                  "are in, so pulls overlap the pushes of later partitions "
                  "(BytePS's partitioned model)")
      ->capture_default_str()
      ->check(CLI::Range(1, 64))
      ->group(ps);
  command
      .add_flag("--shard-id-from-hostname", line.shard_id_from_hostname,
                "take the shard index from the -N at the end of $HOSTNAME (a "
                "StatefulSet "
                "pod such as ferry-ps-2); overrides --shard-id")
      ->group(ps);
  command
      .add_option("--connect-timeout", f.connect_timeout_s,
                  "seconds to keep trying to reach the coordinator")
      ->capture_default_str()
      ->group(ps);
  command
      .add_option("--checkpoint-dir", f.checkpoint_dir,
                  "write this shard's checkpoints here (on the coordinator's "
                  "request and at "
                  "SIGTERM) and resume from the newest one at start")
      ->group(ps);
  command
      .add_option(
          "--link-bandwidth", f.link_bandwidth,
          "emulate a link of this rate per direction on push/pull streams, "
          "e.g. "
          "1Gbit, 10Gbit, 25Gbit (bits/s) or 1.5GB/s (bytes/s); empty or 0: "
          "unlimited")
      ->group(ps);
  command
      .add_option(
          "--link-latency", f.link_latency,
          "one-way latency added to every pull message sent (pipelined), e.g. "
          "50us, 1ms; empty or 0: none")
      ->group(ps);
  const std::string limits = "PS shard limits (RESOURCE_EXHAUSTED beyond)";
  command
      .add_option("--max-open-pushes", f.limits.max_open_pushes,
                  "push streams received at once (each holds a buffer the size "
                  "of the slice)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber)
      ->group(limits);
  command
      .add_option("--max-step-pushes", f.limits.max_step_pushes,
                  "sync: pushes (workers) buffered for the open step")
      ->capture_default_str()
      ->check(CLI::PositiveNumber)
      ->group(limits);
  command
      .add_option("--max-async-workers", f.limits.max_async_workers,
                  "async: workers whose last step the shard remembers")
      ->capture_default_str()
      ->check(CLI::PositiveNumber)
      ->group(limits);
  command
      .add_option("--max-pending-pulls", f.limits.max_pending_pulls,
                  "pulls waiting for a newer version")
      ->capture_default_str()
      ->check(CLI::PositiveNumber)
      ->group(limits);
  command
      .add_option("--receive-window", f.limits.receive_window_bytes,
                  "bytes of one push stream read ahead of the shard (HTTP/2 "
                  "stream window, BDP probing off; the transport holds about "
                  "pushing workers x this), e.g. 4194304 where memory is "
                  "tight; 0: gRPC's adaptive window")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30))
      ->group(limits);
  AddOpsFlags(command, line.ops);
}

absl::StatusOr<PsFlags> ResolvePsFlags(const PsCommandLine& line,
                                       const std::string& hostname) {
  PsFlags flags = line.flags;
  if (line.shard_id_from_hostname) {
    ASSIGN_OR_RETURN(flags.shard_id, ShardIdFromHostname(hostname));
  }
  return flags;
}

}  // namespace ferry
