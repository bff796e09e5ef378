#include "coordinator/membership.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ferry {

Membership::Member& Membership::Add(const v1::RegisterRequest& info,
                                    absl::Time now) {
  Member member;
  member.join_seq = next_worker_seq_++;
  member.id = absl::StrCat("w", member.join_seq);
  member.info = info;
  member.last_heartbeat = now;
  member.joined = now;
  ++generation_;
  ++workers_seen_;
  const std::string id = member.id;
  Member& added = members_[id];
  added = std::move(member);
  return added;
}

Membership::Member* Membership::Find(const std::string& id) {
  auto it = members_.find(id);
  return it == members_.end() ? nullptr : &it->second;
}

const Membership::Member* Membership::Find(const std::string& id) const {
  auto it = members_.find(id);
  return it == members_.end() ? nullptr : &it->second;
}

absl::Status Membership::Heartbeat(const std::string& id, absl::Time now) {
  Member* member = Find(id);
  if (member == nullptr) {
    return absl::NotFoundError(absl::StrCat(
        "worker ", id, " is not a member (evicted or never registered)"));
  }
  member->last_heartbeat = now;
  return absl::OkStatus();
}

std::vector<std::string> Membership::Expired(absl::Time now,
                                             absl::Duration timeout) const {
  std::vector<std::string> dead;
  for (const auto& [id, m] : members_) {
    if (now - m.last_heartbeat > timeout) dead.push_back(id);
  }
  return dead;
}

bool Membership::Remove(const std::string& id) {
  auto it = members_.find(id);
  if (it == members_.end()) return false;
  departed_bytes_[id] = it->second.bytes;
  departed_peer_bytes_[id] = it->second.peer_bytes;
  members_.erase(it);
  ++generation_;
  return true;
}

std::vector<const Membership::Member*> Membership::Ranked() const {
  std::vector<const Member*> ranked;
  for (const auto& [id, m] : members_) ranked.push_back(&m);
  std::sort(ranked.begin(), ranked.end(), [](const Member* a, const Member* b) {
    return a->join_seq < b->join_seq;
  });
  return ranked;
}

void Membership::SaveTo(v1::CoordinatorState& s) const {
  s.set_generation(generation_);
  s.set_next_worker_seq(next_worker_seq_);
  s.set_workers_seen(workers_seen_);
  for (const auto& [id, m] : members_) {
    v1::MemberState* ms = s.add_members();
    ms->set_id(id);
    ms->set_join_seq(m.join_seq);
    *ms->mutable_info() = m.info;
    ms->set_tasks_done(m.tasks_done);
    *ms->mutable_bytes() = m.bytes;
    *ms->mutable_peer_bytes() = m.peer_bytes;
    ms->set_applied_any(m.applied_any);
    ms->set_evaluates(m.evaluates);
    ms->mutable_held_ranges()->Add(m.held_ranges.begin(), m.held_ranges.end());
  }
  for (const auto& [id, b] : departed_bytes_)
    (*s.mutable_departed_bytes())[id] = b;
  for (const auto& [id, b] : departed_peer_bytes_)
    (*s.mutable_departed_peer_bytes())[id] = b;
}

void Membership::LoadFrom(const v1::CoordinatorState& s, absl::Time now) {
  generation_ = s.generation();
  next_worker_seq_ = s.next_worker_seq();
  workers_seen_ = s.workers_seen();
  members_.clear();
  for (const v1::MemberState& ms : s.members()) {
    Member m;
    m.id = ms.id();
    m.join_seq = ms.join_seq();
    m.info = ms.info();
    m.tasks_done = ms.tasks_done();
    m.bytes = ms.bytes();
    m.peer_bytes = ms.peer_bytes();
    m.applied_any = ms.applied_any();
    m.evaluates = ms.evaluates();
    m.held_ranges.assign(ms.held_ranges().begin(), ms.held_ranges().end());
    m.last_heartbeat = now;  // a heartbeat timeout to come back
    m.joined = now;
    members_[m.id] = std::move(m);
  }
  departed_bytes_.clear();
  departed_peer_bytes_.clear();
  for (const auto& [id, b] : s.departed_bytes()) departed_bytes_[id] = b;
  for (const auto& [id, b] : s.departed_peer_bytes())
    departed_peer_bytes_[id] = b;
}

}  // namespace ferry
