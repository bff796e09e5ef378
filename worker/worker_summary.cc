#include "ring/ring_peer_service.h"
#include "worker/distributed_worker.h"

namespace ferry {

void WorkerSummary::AddTotals(GradientExchange& exchange,
                              const CommittedStepsObserver* committed,
                              const PeerEndpoint& peer,
                              const TransferBytes& coordinator) {
  ps_bytes = exchange.bytes().ps;
  if (committed != nullptr)
    rollback_copies_moved = committed->undo_state_moves();
  if (const ByteCounter* counter = peer.counter(); counter != nullptr) {
    peer_bytes = counter->Get();
  }
  coordinator_bytes = coordinator;
  link_stats = peer.link_stats();
}

nlohmann::json WorkerSummary::ToJson() const {
  const auto bytes = [](const TransferBytes& b) {
    return nlohmann::json{{"sent", b.sent}, {"received", b.received}};
  };
  nlohmann::json out = {
      {"worker_id", worker_id},
      {"job_id", job_id},
      {"device", device},
      {"end_reason", end_reason},
      {"steps", steps},
      {"samples", samples},
      {"abandoned_steps", abandoned_steps},
      {"rollback_copies_moved", rollback_copies_moved},
      {"train_loss", samples > 0 ? loss_sum / samples : 0.0},
      {"train_accuracy",
       samples > 0 ? static_cast<double>(correct) / samples : 0.0},
      {"wall_seconds", wall_seconds},
      {"compute_seconds", compute_seconds},
      {"comm_seconds", comm_seconds},
      {"link",
       {{"bytes_per_second", link.bytes_per_second},
        {"latency_seconds", absl::ToDoubleSeconds(link.latency)},
        {"delay_seconds", absl::ToDoubleSeconds(link_stats.send_delay +
                                                link_stats.receive_delay)},
        {"send_delay_seconds", absl::ToDoubleSeconds(link_stats.send_delay)},
        {"receive_delay_seconds",
         absl::ToDoubleSeconds(link_stats.receive_delay)}}},
      {"bytes",
       {{"ps", bytes(ps_bytes)},
        {"coordinator", bytes(coordinator_bytes)},
        {kRingPeerRole, bytes(peer_bytes)}}}};
  if (trainer.is_object()) {
    for (const auto& [key, value] : trainer.items()) out[key] = value;
  }
  return out;
}

}  // namespace ferry
