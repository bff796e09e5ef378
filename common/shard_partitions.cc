#include "common/shard_partitions.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ferry {

absl::Status CheckPartitions(int logical_shards, int partitions) {
  if (partitions < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--partitions must be >= 1, got ", partitions));
  }
  if (logical_shards < partitions || logical_shards % partitions != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the job's ", logical_shards,
        " shard addresses are not a multiple of --partitions ", partitions,
        " (a job of S shard processes with K partitions each lists S x K "
        "addresses)"));
  }
  return absl::OkStatus();
}

std::vector<int> ShardsOfProcess(int process, int processes, int partitions) {
  std::vector<int> shards;
  shards.reserve(partitions);
  for (int i = 0; i < partitions; ++i)
    shards.push_back(process + i * processes);
  return shards;
}

std::vector<std::string> LogicalShardAddresses(
    const std::vector<std::vector<std::string>>& per_process) {
  std::vector<std::string> logical;
  if (per_process.empty()) return logical;
  const size_t partitions = per_process.front().size();
  for (size_t i = 0; i < partitions; ++i) {
    for (const std::vector<std::string>& process : per_process) {
      logical.push_back(process[i]);
    }
  }
  return logical;
}

absl::StatusOr<std::vector<std::string>> PartitionListenAddresses(
    absl::string_view listen, int partitions) {
  std::vector<std::string> list = absl::StrSplit(listen, ',');
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("--listen '", listen, "': ", why));
  };
  for (const std::string& address : list) {
    const size_t colon = address.rfind(':');
    int port = 0;
    if (colon == std::string::npos ||
        !absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 0 ||
        port > 65535) {
      return bad(absl::StrCat("'", address, "' is not HOST:PORT"));
    }
  }
  if (list.size() == static_cast<size_t>(partitions)) return list;
  if (list.size() != 1) {
    return bad(absl::StrCat("lists ", list.size(), " addresses for ",
                            partitions,
                            " partitions (give one HOST:PORT, or "
                            "one per partition)"));
  }
  const size_t colon = list[0].rfind(':');
  const std::string host = list[0].substr(0, colon);
  int port = 0;
  (void)absl::SimpleAtoi(list[0].substr(colon + 1), &port);
  if (port != 0 && port + partitions - 1 > 65535) {
    return bad(absl::StrCat("ports ", port, "..", port + partitions - 1,
                            " go beyond 65535"));
  }
  std::vector<std::string> out;
  for (int i = 0; i < partitions; ++i) {
    out.push_back(absl::StrCat(host, ":", port == 0 ? 0 : port + i));
  }
  return out;
}

}  // namespace ferry
