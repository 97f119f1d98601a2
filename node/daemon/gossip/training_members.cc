#include "node/daemon/gossip/training_members.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"

namespace skipswarm::node {

std::vector<std::string> EndpointsToAddresses(const DaemonEndpoints& e) {
  return {e.gossip, e.pipeline, e.group, e.state};
}

absl::StatusOr<DaemonEndpoints> EndpointsOf(const membership::MemberInfo& m) {
  if (m.addresses.size() < 4) {
    return absl::InvalidArgumentError(absl::StrCat(
        "member ", m.id.ShortString(), " advertises ", m.addresses.size(),
        " addresses; a daemon advertises gossip, pipeline, group and state"));
  }
  return DaemonEndpoints{m.addresses[0], m.addresses[1], m.addresses[2], m.addresses[3]};
}

namespace {

// TrainsIn for `m` with `stages` and entry iteration `entry` in place of
// its record's (Note [Stage moves]).
bool TrainsAs(const membership::MemberInfo& m, const std::vector<uint32_t>& stages,
              uint64_t entry, uint64_t iteration) {
  if (stages.empty() || m.addresses.size() < 4) return false;
  if (entry == 0) return true;  // a founder
  if (m.state == proto::MEMBER_STATE_LEFT) return true;  // iteration = its exit
  // Note [Entry iteration]: from the entry on; the routing face also waits
  // for the joiner's state (Note [Routed once ready],
  // TakesNoNewRoutesLocked).
  return entry <= iteration;
}

}  // namespace

bool TrainsIn(const membership::MemberInfo& m, uint64_t iteration, TrainingFace face) {
  (void)face;
  return TrainsAs(m, m.stages, m.iteration, iteration);
}

std::vector<common::NodeId> OtherLiveReplicas(const membership::View& view,
                                              const common::NodeId& self, int stage,
                                              uint64_t iteration) {
  std::vector<common::NodeId> out;
  for (const membership::MemberInfo& m : view.members) {
    if (m.id == self || !m.live() || !TrainsIn(m, iteration, TrainingFace::kGroup)) continue;
    if (std::find(m.stages.begin(), m.stages.end(), static_cast<uint32_t>(stage)) !=
        m.stages.end()) {
      out.push_back(m.id);
    }
  }
  return out;
}

std::optional<uint64_t> DataNodeEntersAfter(const membership::View& view, uint64_t iteration) {
  std::optional<uint64_t> earliest;
  for (const membership::MemberInfo& m : view.members) {
    if (!m.live() || m.addresses.size() < 4 || m.iteration <= iteration) continue;
    if (std::find(m.stages.begin(), m.stages.end(), 0u) == m.stages.end()) continue;
    earliest = std::min(earliest.value_or(m.iteration), m.iteration);
  }
  return earliest;
}

std::vector<common::NodeId> StayingReplicas(const membership::View& view,
                                            const common::NodeId& self, int stage,
                                            uint64_t iteration) {
  std::vector<common::NodeId> out;
  for (const common::NodeId& id : OtherLiveReplicas(view, self, stage, iteration)) {
    const membership::MemberInfo* m = view.Find(id);
    if (m == nullptr || m->stopping) continue;
    if (m->leaving && !(self < id)) continue;
    out.push_back(id);
  }
  return out;
}

class TrainingMembers::Face final : public SwarmView {
 public:
  Face(TrainingMembers* owner, TrainingFace face) : owner_(owner), face_(face) {}
  std::vector<PeerInfo> Members() const override { return owner_->MembersOf(face_); }
  bool IsAlive(const common::NodeId& id) const override { return owner_->IsAlive(id, face_); }
  std::vector<common::NodeId> Replicas(int stage) const override {
    return owner_->ReplicasOf(stage, face_);
  }
  void MarkDead(const common::NodeId& id) override { owner_->MarkDead(id, face_); }
  uint64_t version() const override { return owner_->Version(); }
  std::optional<LinkEstimate> Link(const common::NodeId& from,
                                   const common::NodeId& to) const override {
    return owner_->LinkOf(from, to);
  }
  std::optional<uint64_t> StopAfter(const common::NodeId& id) const override {
    return owner_->StopAfterOf(id);
  }
  std::optional<uint64_t> Incarnation(const common::NodeId& id) const override {
    return owner_->IncarnationOf(id);
  }

 private:
  TrainingMembers* const owner_;
  const TrainingFace face_;
};

namespace {

PeerInfo ToPeer(const membership::MemberInfo& m) {
  PeerInfo p;
  p.id = m.id;
  for (uint32_t s : m.stages) p.stages.push_back(static_cast<int>(s));
  p.subnetwork = m.subnetwork;
  p.verify_frames = m.verify_frames;  // Note [Sending checks]
  p.memory_slots = static_cast<int>(m.memory_slots);
  p.sec_per_layer_sample = m.seconds_per_layer_per_sample;  // 0 until published
  p.bans = m.bans;  // Note [Gossiped bans]
  if (m.addresses.size() >= 4) {
    p.address = m.addresses[1];
    p.group_address = m.addresses[2];
  }
  return p;
}

}  // namespace

TrainingMembers::TrainingMembers(common::NodeId self)
    : self_(self),
      group_(std::make_unique<Face>(this, TrainingFace::kGroup)),
      routing_(std::make_unique<Face>(this, TrainingFace::kRouting)) {}

TrainingMembers::~TrainingMembers() = default;

SwarmView* TrainingMembers::group() { return group_.get(); }
SwarmView* TrainingMembers::routing() { return routing_.get(); }

void TrainingMembers::Update(membership::View view) {
  std::vector<PeerInfo> to_dial;
  std::function<void(const PeerInfo&)> listener;
  {
    absl::MutexLock lock(&mu_);
    // Snapshots may arrive out of order from different threads.
    if (view.version < view_.version && !view_.members.empty()) return;
    // Note [Stage moves]: a member that trained one stage and now announces
    // another from a later entry keeps the old one until then.
    for (const membership::MemberInfo& m : view.members) {
      const membership::MemberInfo* old = view_.Find(m.id);
      if (old == nullptr || old->stages.empty() || old->stages == m.stages ||
          old->incarnation >= m.incarnation || m.iteration == 0 ||
          old->iteration >= m.iteration || m.state == proto::MEMBER_STATE_LEFT ||
          old->addresses.size() < 4) {
        continue;
      }
      moves_[m.id] = Move{old->stages, old->iteration, m.iteration};
    }
    view_ = std::move(view);
    ++version_;
    {
      // Built under mu_ (one view at a time; a few hundred bytes a member),
      // swapped in under keys_mu_ for the per-frame readers.
      absl::flat_hash_map<common::NodeId, FrameKey> keys;
      keys.reserve(view_.members.size());
      for (const membership::MemberInfo& m : view_.members) {
        keys[m.id] = FrameKey{m.public_key, m.sign_frames};
      }
      absl::MutexLock keys_lock(&keys_mu_);
      frame_keys_.swap(keys);
    }
    RecomputeTrustLocked();
    for (const membership::MemberInfo& m : view_.members) {
      if (m.id == self_ || m.addresses.size() < 4) continue;
      auto [it, inserted] = dialed_.try_emplace(m.id, m.addresses[1]);
      if (inserted || it->second != m.addresses[1]) {
        it->second = m.addresses[1];
        to_dial.push_back(ToPeer(m));
      }
    }
    listener = address_listener_;
  }
  if (listener) {
    for (const PeerInfo& p : to_dial) listener(p);
  }
}

void TrainingMembers::SetIteration(uint64_t iteration) {
  absl::MutexLock lock(&mu_);
  iteration_ = iteration;
  ++version_;
}

uint64_t TrainingMembers::iteration() const {
  absl::MutexLock lock(&mu_);
  return iteration_;
}

void TrainingMembers::SetAddressListener(std::function<void(const PeerInfo&)> listener) {
  std::vector<PeerInfo> known;
  {
    absl::MutexLock lock(&mu_);
    address_listener_ = listener;
    for (const membership::MemberInfo& m : view_.members) {
      if (m.id != self_ && m.addresses.size() >= 4) known.push_back(ToPeer(m));
    }
  }
  for (const PeerInfo& p : known) listener(p);
}

membership::View TrainingMembers::view() const {
  absl::MutexLock lock(&mu_);
  return view_;
}

const std::vector<uint32_t>* TrainingMembers::StagesAsOfLocked(const membership::MemberInfo& m,
                                                               TrainingFace face,
                                                               uint64_t* entry) const {
  const std::vector<uint32_t>* stages = &m.stages;
  *entry = m.iteration;
  auto move = moves_.find(m.id);
  if (move != moves_.end() && move->second.switch_at == m.iteration) {
    if (iteration_ < move->second.switch_at) {
      stages = &move->second.stages;  // still the old stage (Note [Stage moves])
      *entry = move->second.entry;
    } else if (face == TrainingFace::kRouting && iteration_ == move->second.switch_at) {
      return nullptr;  // averages the new stage from its switch, routed one later
    }
  }
  if (!TrainsAs(m, *stages, *entry, iteration_)) return nullptr;
  return stages;
}

// A leaver, a paused member, and a joiner or mover still fetching its
// state take no new routes (Notes [Leaving], [Paused members], [Routed
// once ready]); nor does a last replica that stops (record.stopping) in
// the iterations after its last one (Note [Stopping last replica] in
// training_members.h). `entering` speaks of the stages the record names,
// from its entry on: a mover before its switch is still routed in its old stage
// (Note [Stage moves]); a joiner is in no face before its entry anyway.
bool TrainingMembers::TakesNoNewRoutesLocked(const membership::MemberInfo& m) const {
  if (m.state == proto::MEMBER_STATE_LEFT || m.paused) return true;
  // Note [Stopping last replica]: in no plan after its last iteration.
  if (m.stopping && iteration_ > m.stop_after) return true;
  return m.entering && iteration_ >= m.iteration;
}

std::optional<membership::MemberInfo> TrainingMembers::AsOfLocked(const membership::MemberInfo& m,
                                                                 TrainingFace face) const {
  uint64_t entry = 0;
  const std::vector<uint32_t>* stages = StagesAsOfLocked(m, face, &entry);
  if (stages == nullptr) return std::nullopt;
  membership::MemberInfo e = m;
  if (stages != &m.stages) e.stages = *stages;
  e.iteration = entry;
  return e;
}

std::vector<PeerInfo> TrainingMembers::MembersOf(TrainingFace face) const {
  absl::MutexLock lock(&mu_);
  std::vector<PeerInfo> out;
  for (const membership::MemberInfo& m : view_.members) {  // sorted by id
    if (face == TrainingFace::kRouting && TakesNoNewRoutesLocked(m)) continue;
    std::optional<membership::MemberInfo> e = AsOfLocked(m, face);
    if (!e.has_value()) continue;
    if (face == TrainingFace::kRouting && roots_.has_value() && !trusted_.contains(m.id)) {
      // Note [Newcomer probation]: only the stages a trusted replica covers.
      std::vector<uint32_t> kept;
      for (uint32_t stage : e->stages) {
        if (RoutableForLocked(m, stage)) kept.push_back(stage);
      }
      if (kept.empty()) continue;
      e->stages = std::move(kept);
    }
    out.push_back(ToPeer(*e));
    // Note [Newcomer weight] (node/train/robust_sum.h): the group face's
    // shard owners weigh its parts.
    out.back().on_probation = roots_.has_value() && !trusted_.contains(m.id);
    // Note [Entering members] (node/train/grpc_group.h): its rounds close
    // without it until its state is loaded.
    out.back().entering = m.entering && iteration_ >= m.iteration;
  }
  return out;
}

bool TrainingMembers::IsAlive(const common::NodeId& id, TrainingFace face) const {
  absl::MutexLock lock(&mu_);
  return IsAliveLocked(id, face);
}

bool TrainingMembers::IsAliveLocked(const common::NodeId& id, TrainingFace face) const {
  const membership::MemberInfo* m = view_.Find(id);
  uint64_t entry = 0;
  if (m == nullptr || StagesAsOfLocked(*m, face, &entry) == nullptr) return false;
  if (id == self_) return true;
  // Note [Leaving]. A local verdict does not cut a draining member out of
  // the group: routing to it fails by design (it takes no new work), and
  // it still finishes its exit iteration's barrier and averaging.
  if (m->state == proto::MEMBER_STATE_LEFT) {
    auto gone = group_dead_.find(id);
    if (gone != group_dead_.end() && gone->second >= m->incarnation) return false;
    return iteration_ <= m->iteration;
  }
  auto dead = dead_.find(id);
  if (dead != dead_.end() && dead->second >= m->incarnation) return false;
  return m->live();
}

std::vector<common::NodeId> TrainingMembers::ReplicasOf(int stage, TrainingFace face) const {
  absl::MutexLock lock(&mu_);
  std::vector<common::NodeId> out;
  for (const membership::MemberInfo& m : view_.members) {
    if (face == TrainingFace::kRouting && TakesNoNewRoutesLocked(m)) continue;
    uint64_t entry = 0;
    const std::vector<uint32_t>* stages = StagesAsOfLocked(m, face, &entry);
    if (stages == nullptr || std::find(stages->begin(), stages->end(),
                                       static_cast<uint32_t>(stage)) == stages->end()) {
      continue;
    }
    if (face == TrainingFace::kRouting && !RoutableForLocked(m, static_cast<uint32_t>(stage))) {
      continue;  // Note [Newcomer probation]
    }
    if (IsAliveLocked(m.id, face)) out.push_back(m.id);
  }
  return out;
}

void TrainingMembers::SetProbation(absl::flat_hash_set<common::NodeId> roots) {
  absl::MutexLock lock(&mu_);
  roots_ = std::move(roots);
  RecomputeTrustLocked();
  ++version_;
}

bool TrainingMembers::Trusted(const common::NodeId& id) const {
  absl::MutexLock lock(&mu_);
  return !roots_.has_value() || trusted_.contains(id);
}

int TrainingMembers::OnProbation() const {
  absl::MutexLock lock(&mu_);
  if (!roots_.has_value()) return 0;
  int n = 0;
  for (const membership::MemberInfo& m : view_.members) {
    const bool hosts_pipeline_stage =
        std::any_of(m.stages.begin(), m.stages.end(), [](uint32_t s) { return s > 0; });
    n += m.live() && hosts_pipeline_stage && !trusted_.contains(m.id);
  }
  return n;
}

std::vector<common::NodeId> TrainingMembers::Untrusted() const {
  absl::MutexLock lock(&mu_);
  std::vector<common::NodeId> out;
  if (!roots_.has_value()) return out;
  for (const membership::MemberInfo& m : view_.members) {
    if (!trusted_.contains(m.id)) out.push_back(m.id);
  }
  return out;
}

void TrainingMembers::RecomputeTrustLocked() {
  trusted_.clear();
  if (!roots_.has_value()) return;
  trusted_ = *roots_;
  // Vouches of trusted members, to a fixpoint (each pass adds someone or
  // ends, so at most one pass per member).
  for (bool grew = true; grew;) {
    grew = false;
    for (const membership::MemberInfo& m : view_.members) {
      if (!trusted_.contains(m.id)) continue;
      for (const common::NodeId& v : m.vouches) grew |= trusted_.insert(v).second;
    }
  }
}

bool TrainingMembers::RoutableForLocked(const membership::MemberInfo& m, uint32_t stage) const {
  if (!roots_.has_value() || stage == 0 || trusted_.contains(m.id)) return true;
  for (const membership::MemberInfo& t : view_.members) {
    if (t.id == m.id || !trusted_.contains(t.id) || TakesNoNewRoutesLocked(t)) continue;
    uint64_t entry = 0;
    const std::vector<uint32_t>* stages = StagesAsOfLocked(t, TrainingFace::kRouting, &entry);
    if (stages != nullptr && std::find(stages->begin(), stages->end(), stage) != stages->end() &&
        IsAliveLocked(t.id, TrainingFace::kRouting)) {
      return true;
    }
  }
  return false;
}

// Note [Relayed verdicts]
// A failed hop or a broken pipeline stream to a relayed member (outbound-
// only, its record naming relays; Note [Relayed members] in
// gossip_daemon_relay.cc) is not a local dead verdict: it says more about
// the relay that carried the connection than about the member, which
// re-attaches to another relay within tens of milliseconds and re-signs.
// Such verdicts used to stick: the transport keeps failing sends while it
// backs off from the broken stream, and a verdict made after the re-sign
// arrived named the new incarnation. The data node then left the member
// out of its barrier while the member's replica still waited for it in
// the averaging, and the swarm stalled. The failed hop is re-routed
// anyway (StageServer); the member's liveness comes from gossip (its own
// pings: DEAD when they stop) and from the replica group's verdicts
// (failed pushes, probes through its relays, silence), which still count.
void TrainingMembers::MarkDead(const common::NodeId& id, TrainingFace face) {
  absl::MutexLock lock(&mu_);
  if (id == self_) return;
  const membership::MemberInfo* m = view_.Find(id);
  if (face == TrainingFace::kRouting && m != nullptr && m->outbound_only && !m->relays.empty()) {
    return;  // Note [Relayed verdicts]
  }
  const uint64_t incarnation = m == nullptr ? 0 : m->incarnation;
  for (auto* verdicts : {&dead_, face == TrainingFace::kGroup ? &group_dead_ : nullptr}) {
    if (verdicts == nullptr) continue;
    auto [it, inserted] = verdicts->try_emplace(id, incarnation);
    if (inserted || it->second < incarnation) {
      it->second = incarnation;
      ++version_;
    }
  }
}

void TrainingMembers::ForgetLocalVerdicts() {
  absl::MutexLock lock(&mu_);
  if (dead_.empty() && group_dead_.empty()) return;
  dead_.clear();
  group_dead_.clear();
  ++version_;
}

namespace {

// The view's sample of from -> to, if any (view.links is sorted by (from,
// to), one sample per pair).
const membership::LinkInfo* SampleOf(const membership::View& view, const common::NodeId& from,
                                     const common::NodeId& to) {
  auto it = std::lower_bound(view.links.begin(), view.links.end(), std::tie(from, to),
                             [](const membership::LinkInfo& l, const auto& key) {
                               return std::tie(l.from, l.to) < key;
                             });
  if (it == view.links.end() || it->from != from || it->to != to) return nullptr;
  return &*it;
}

// One leg of a relayed path, from what either end measured: the larger RTT
// and the smaller throughput (Note [Planning from measured links]).
struct Leg {
  absl::Duration rtt = absl::InfiniteDuration();
  double bytes_per_second = 0;
};
Leg LegOf(const membership::View& view, const common::NodeId& a, const common::NodeId& b) {
  Leg leg;
  bool rtt_known = false;
  for (const membership::LinkInfo* l : {SampleOf(view, a, b), SampleOf(view, b, a)}) {
    if (l == nullptr) continue;
    if (l->rtt != absl::InfiniteDuration()) {
      leg.rtt = rtt_known ? std::max(leg.rtt, l->rtt) : l->rtt;
      rtt_known = true;
    }
    if (l->bytes_per_second > 0) {
      leg.bytes_per_second = leg.bytes_per_second > 0
                                 ? std::min(leg.bytes_per_second, l->bytes_per_second)
                                 : l->bytes_per_second;
    }
  }
  return leg;
}

}  // namespace

// Note [Relayed links]
// Connections to an outbound-only member go through its first relay R
// (Note [Relayed members] in gossip_daemon_relay.cc), or through `from`'s
// own Relay service when `from` is one of its relays, so the link from ->
// to, for a relayed `to`, is the path from -> R -> to (direct from any of
// its relays): its RTT is the sum of the two legs' RTTs (each leg from
// what either end measured), and its throughput the smaller of the legs'
// unless `from` measured the hop itself (its pipeline hops to `to` already
// cross the relay). Without this the pair would take the member's own
// pings, which go out directly and make the relayed direction look as
// short as a direct link. The other direction (to -> from) is direct: the
// member dials out itself.
std::optional<uint64_t> TrainingMembers::StopAfterOf(const common::NodeId& id) const {
  absl::MutexLock lock(&mu_);
  for (const membership::MemberInfo& m : view_.members) {
    if (m.id != id) continue;
    if (m.stopping) return m.stop_after;
    // Note [Confirmed stopping] (node/train/data_node_driver.h): a replica
    // that stops where another stays signs LEFT with its exit iteration
    // (Note [Leaving]) instead of record.stopping, and its server refuses
    // later iterations all the same; a refusal of its, relayed to a data
    // node, is confirmed by that signed record too, or the micro-batch is
    // dropped where it should be re-run.
    if (m.state == proto::MEMBER_STATE_LEFT) return m.iteration;
    return std::nullopt;
  }
  return std::nullopt;
}

std::optional<uint64_t> TrainingMembers::IncarnationOf(const common::NodeId& id) const {
  absl::MutexLock lock(&mu_);
  for (const membership::MemberInfo& m : view_.members) {
    if (m.id == id) return m.incarnation;
  }
  return std::nullopt;
}

std::optional<std::string> TrainingMembers::PublicKeyOf(const common::NodeId& id) const {
  absl::MutexLock lock(&keys_mu_);
  auto it = frame_keys_.find(id);
  if (it == frame_keys_.end()) return std::nullopt;
  return it->second.public_key;
}

bool TrainingMembers::SignsFrames(const common::NodeId& id) const {
  absl::MutexLock lock(&keys_mu_);
  auto it = frame_keys_.find(id);
  return it != frame_keys_.end() && it->second.sign_frames;
}

std::optional<LinkEstimate> TrainingMembers::LinkOf(const common::NodeId& from,
                                                    const common::NodeId& to) const {
  absl::MutexLock lock(&mu_);
  const membership::LinkInfo* sample = SampleOf(view_, from, to);
  std::optional<LinkEstimate> e;
  if (sample != nullptr) {
    e.emplace();
    e->rtt = sample->rtt;
    e->bytes_per_second = sample->bytes_per_second;
    e->throughput_measured_at = sample->throughput_measured_at;
  }
  const membership::MemberInfo* target = view_.Find(to);
  if (target == nullptr || !target->outbound_only || target->relays.empty()) return e;
  // Any of its relays carries its own connections to it (Note [Own relay
  // first] in node/transport/relay/relay_dialer.cc): that leg is direct.
  if (std::find(target->relays.begin(), target->relays.end(), from) != target->relays.end()) {
    return e;
  }
  const common::NodeId& relay = target->relays.front();
  const Leg first = LegOf(view_, from, relay);
  const Leg second = LegOf(view_, relay, to);
  const bool rtts = first.rtt != absl::InfiniteDuration() && second.rtt != absl::InfiniteDuration();
  const bool throughputs = first.bytes_per_second > 0 && second.bytes_per_second > 0;
  if (!rtts && !throughputs) return e;
  if (!e) e.emplace();
  if (rtts) e->rtt = first.rtt + second.rtt;
  if (e->bytes_per_second <= 0 && throughputs) {
    e->bytes_per_second = std::min(first.bytes_per_second, second.bytes_per_second);
  }
  return e;
}

uint64_t TrainingMembers::Version() const {
  absl::MutexLock lock(&mu_);
  return version_;
}

}  // namespace skipswarm::node
