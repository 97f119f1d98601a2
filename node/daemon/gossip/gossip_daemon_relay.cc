// GossipDaemon and outbound-only members (node/transport/relay/README.md).
//
// Note [Relayed members]
// A member whose reachability check found it behind NAT marks its record
// outbound_only (Note [Reachability at join]) and attaches to up to
// `relays` reachable members' Relay service, lowest gossip RTT first; its
// record lists them (NodeRecord.relays, best first) and is re-signed
// whenever the set changes, so a lost relay is replaced in the record too.
// Every daemon serves the Relay service (up to --relay_slots attached
// members) and dials each relayed member through a RelayDialer endpoint:
// RoutedView() replaces such a member's addresses with that loopback
// endpoint, and everything that dials members (the pipeline transport's
// address book, the replica group, state transfer) reads RoutedView, so a
// relayed member hosts stages like any other. The connection carries the
// two nodes' own mutual TLS end to end.
// Gossip itself does not go through relays: members do not probe an
// outbound-only member and hear it in its own pings (Note [Outbound-only
// members] in membership_impl.h).
// Planning costs the relayed path: a hop to a relayed member is sender ->
// relay -> member (TrainingMembers' links, Note [Relayed links] in
// training_members.cc).
#include <glog/logging.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "node/daemon/gossip/gossip_daemon_parts.h"

namespace skipswarm::node {
namespace {

// The view's RTT between `a` and `b` (either direction), if measured.
std::optional<absl::Duration> Rtt(const membership::View& view, const common::NodeId& a,
                                  const common::NodeId& b) {
  std::optional<absl::Duration> best;
  for (const membership::LinkInfo& l : view.links) {
    if (!((l.from == a && l.to == b) || (l.from == b && l.to == a))) continue;
    if (l.rtt == absl::InfiniteDuration()) continue;
    if (!best || l.rtt < *best) best = l.rtt;
  }
  return best;
}

// Where `relay` serves (its record's first address), if it is a live,
// reachable member.
std::optional<RelayCandidate> AsRelay(const membership::View& view, const common::NodeId& relay) {
  const membership::MemberInfo* m = view.Find(relay);
  if (m == nullptr || !m->live() || m->outbound_only || m->addresses.empty()) {
    return std::nullopt;
  }
  return RelayCandidate{m->id, m->addresses.front()};
}

}  // namespace

membership::View GossipDaemon::Parts::RoutedView() const {
  membership::View view = gossip->membership()->GetView();
  if (relay_dialer == nullptr) return view;
  for (membership::MemberInfo& m : view.members) {
    // Even with no relay named yet: the endpoint stays the member's address
    // (its connections fail until its record names relays, as they would at
    // its unreachable address), so channels are not re-made on every change.
    if (m.id == self || !m.outbound_only) continue;
    absl::StatusOr<std::string> endpoint = relay_dialer->EndpointFor(m.id);
    if (!endpoint.ok()) {
      LOG_EVERY_N(WARNING, 20) << base().name << ": cannot dial " << m.id
                               << " through its relays: " << endpoint.status();
      continue;
    }
    for (std::string& a : m.addresses) a = *endpoint;
  }
  return view;
}

void GossipDaemon::Parts::SetUpRelaying(grpc::ServerBuilder* builder,
                                        const std::string& swarm_id) {
  if (options.relay_slots > 0) {
    RelayServiceOptions ro;
    ro.self = self;
    ro.credentials = credentials;
    ro.swarm_id = swarm_id;
    ro.max_attached = options.relay_slots;
    ro.quota = quotas.relay;  // Note [Paced bytes]
    ro.clock = clock.get();
    relay_service = std::make_unique<RelayService>(ro);
    builder->RegisterService(relay_service.get());
  }
  // The membership is made after the server starts: look it up per call.
  relay_dialer = std::make_unique<RelayDialer>(
      RelayDialerOptions{self, credentials}, [this](const common::NodeId& target) {
        std::vector<RelayCandidate> out;
        membership::Membership* m = gossip != nullptr ? gossip->membership() : nullptr;
        if (m == nullptr) return out;
        const membership::View view = m->GetView();
        if (const membership::MemberInfo* t = view.Find(target); t != nullptr) {
          for (const common::NodeId& r : t->relays) {
            if (std::optional<RelayCandidate> c = AsRelay(view, r)) out.push_back(*c);
          }
        }
        return out;
      });
}

void GossipDaemon::Parts::StartRelayAttacher() {
  if (relay_attacher != nullptr || options.relays <= 0) return;
  RelayAttacherOptions ao;
  ao.self = self;
  ao.credentials = credentials;
  ao.swarm_id = gossip->swarm_id();
  // Circuits end on our own server: loopback when it listens on every
  // interface, else the address it is bound to.
  std::string host = server->listen_address().substr(0, server->listen_address().rfind(':'));
  if (host.empty() || host == "0.0.0.0" || host == "[::]") host = "127.0.0.1";
  ao.local_address = absl::StrCat(host, ":", server->port());
  ao.relays = options.relays;
  membership::Membership* m = gossip->membership();
  const common::NodeId me = self;
  const absl::Notification* gate = options.relay_attach_gate;
  auto candidates = [m, me, gate] {
    if (gate != nullptr && !gate->HasBeenNotified()) return std::vector<RelayCandidate>{};
    const membership::View view = m->GetView();
    std::vector<std::pair<absl::Duration, RelayCandidate>> ranked;
    for (const membership::MemberInfo* mi : view.Live()) {
      if (mi->id == me) continue;
      std::optional<RelayCandidate> c = AsRelay(view, mi->id);
      if (!c) continue;
      // Lowest RTT first; unmeasured last; then by id (deterministic).
      ranked.push_back({Rtt(view, me, mi->id).value_or(absl::InfiniteDuration()), *c});
    }
    std::sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first < b.first : a.second.id < b.second.id;
    });
    std::vector<RelayCandidate> out;
    for (auto& [rtt, c] : ranked) out.push_back(std::move(c));
    return out;
  };
  Parts* raw = this;
  relay_attacher = std::make_unique<RelayAttacher>(
      ao, clock.get(), candidates, [raw, m](const RelayChange& change) {
        absl::Status signed_ok = m->UpdateLocalRecord([&](proto::NodeRecord* record) {
          record->clear_relays();
          for (const RelayCandidate& r : change.relays) {
            if (record->relays_size() < membership::kMaxRecordRelays) {
              record->add_relays(r.id.Bytes());
            }
          }
        });
        if (!signed_ok.ok()) {
          LOG(WARNING) << raw->base().name << ": cannot name our relays: " << signed_ok;
        }
        raw->metrics.Set("skipswarm_relays", static_cast<double>(change.relays.size()));
        if (change.recovered_after) {
          raw->metrics.Set("skipswarm_relay_recovery_seconds",
                           absl::ToDoubleSeconds(*change.recovered_after));
        }
        const std::string line = absl::StrCat("outbound-only mode, ", change.detail);
        std::printf("%s\n", line.c_str());
        std::fflush(stdout);
        LOG(INFO) << raw->base().name << ": " << line;
      });
}

// Note [Relayed entry]
// An outbound-only joiner announces its entry iteration (Note [Entry
// iteration] in training_members.h) only once its record names its relays.
// Entry, outbound_only and relays then travel in one signed record, so a
// member whose view has the entry (and puts the joiner in its faces from
// it) can also dial it: every record version that carries the entry
// carries relays. Before, the joiner announced while its attacher was
// still attaching; a replica that had the entry but no relays failed its
// first gradient push to it ("no relay carried a connection"), dropped it
// from that round, and the joiner waited at its entry iteration for good.
// A relay change later re-signs the record (Note [Relayed members]); the
// entry stays in it.
absl::Status GossipDaemon::Parts::AwaitOwnRelays(absl::Duration deadline) {
  bool logged = false;
  while (true) {
    const membership::View view = gossip->membership()->GetView();
    const membership::MemberInfo* me = view.Find(self);
    if (me == nullptr || !me->outbound_only || !me->relays.empty()) return absl::OkStatus();
    if (!logged) {
      LOG(INFO) << base().name << ": behind NAT; entering once our record names a relay";
      logged = true;
    }
    SS_RETURN_IF_ERROR(JoinWaitEnds("while waiting for a relay"));
    if (clock->SteadyNow() > deadline) {
      return absl::DeadlineExceededError(
          "behind NAT and no relay took this node: no reachable member with a free relay slot "
          "(--relay_slots) accepted its attach");
    }
    clock->SleepFor(absl::Milliseconds(50));
  }
}

}  // namespace skipswarm::node
