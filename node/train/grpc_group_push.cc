// StageService.PushGradients: chunk checks, Note [Push admission], received
// barrier messages and gradient shards, and this node's outgoing pushes.
#include <glog/logging.h>
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cstring>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/real_clock.h"
#include "common/status_macros.h"
#include "node/train/grpc_group_impl.h"
#include "proto/grpc_status.h"
#include "proto/stage.grpc.pb.h"
#include "proto/version.h"

namespace skipswarm::node {

grpc::Status GrpcGroupComm::Impl::PushGradients(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<proto::GradientAck, proto::GradientChunk>* stream) {
  proto::GradientChunk chunk;
  ReduceMessage m;
  std::vector<float> data;
  std::string encoded;  // encoding 1 (Note [Encoded shards])
  uint32_t stage = 0, expected = 0, count = 0, phase = 0, encoding = 0;
  uint64_t total = 0, payload_bytes = 0;
  uint64_t stated_ms = 0;  // a barrier's stated bound (Note [Stated bounds in the daemons])
  common::PeerQuota::StreamSlot slot;  // Note [Peer quotas]: held while reading
  bool over_quota = false;
  while (stream->Read(&chunk)) {
    absl::Status ok =
        CheckChunk(chunk, expected, encoding == 0 ? data.size() : encoded.size());
    if (ok.ok() && expected > 0 &&
        (chunk.encoding() != encoding || chunk.payload_bytes() != payload_bytes)) {
      ok = absl::InvalidArgumentError("chunks of one push disagree on their encoding");
    }
    if (ok.ok() && expected == 0) {
      stage = chunk.stage();
      phase = chunk.phase();
      count = chunk.chunk_count();
      total = chunk.tensor().shape(0);
      encoding = chunk.encoding();
      payload_bytes = chunk.payload_bytes();
      ok = Header(chunk, &m);
      stated_ms = chunk.stated_bound_ms();
      if (ok.ok()) ok = creds().CheckPeer(context->auth_context(), m.from);
      if (ok.ok()) ok = CheckMember(m.from);
      if (ok.ok() && options_.push_quota != nullptr) {
        ok = TakeQuota(*options_.push_quota, m.from,
                       encoding == 1 ? payload_bytes : total * sizeof(float), &slot);
        over_quota = !ok.ok();
      }
      if (ok.ok() && phase != 0) ok = AdmitPush(m, total);
      if (ok.ok() && encoding == 0) data.reserve(total);
      if (ok.ok() && encoding == 1) encoded.reserve(payload_bytes);
    } else if (ok.ok() && (chunk.stage() != stage || chunk.iteration() != m.iteration ||
                           chunk.chunk_count() != count || chunk.phase() != phase ||
                           static_cast<int>(chunk.shard()) != m.shard)) {
      ok = absl::InvalidArgumentError("chunks of one push disagree on their header");
    }
    if (!ok.ok()) {
      // The quota logs its own refusals, one line per interval.
      if (!over_quota) {
        LOG(WARNING) << "refused gradient push from " << context->peer() << ": " << ok;
      }
      return proto::ToGrpcStatus(ok);
    }
    if (encoding == 1) {
      encoded.append(chunk.data());
    } else {
      const size_t n = chunk.data().size() / sizeof(float);
      const size_t at = data.size();
      data.resize(at + n);
      if (n > 0) std::memcpy(data.data() + at, chunk.data().data(), n * sizeof(float));
    }
    ++expected;
  }
  if (expected == count && encoding == 1 && encoded.size() == payload_bytes) {
    absl::StatusOr<std::vector<float>> decoded =
        DecodePush(m, static_cast<int64_t>(total), encoded);
    if (!decoded.ok()) {
      {
        absl::MutexLock lock(&mu_);
        ++stats_pushes_refused_;
      }
      LOG(WARNING) << "refused gradient push from " << context->peer() << ": "
                   << decoded.status();
      return proto::ToGrpcStatus(decoded.status());
    }
    data = std::move(decoded).value();
    m.payload = std::make_shared<const std::string>(std::move(encoded));
  }
  if (expected != count || data.size() != total) {
    absl::Status bad =
        absl::InvalidArgumentError(absl::StrCat("push ended after ", expected, "/", count,
                                                " chunks, ", data.size(), "/", total, " elements"));
    LOG(WARNING) << "refused gradient push from " << context->peer() << ": " << bad;
    return proto::ToGrpcStatus(bad);
  }
  if (phase == 0) {
    ReceiveBarrier(m.iteration, m.from, stated_ms);
  } else {
    m.data = std::make_shared<const std::vector<float>>(std::move(data));
    ReceiveReduce(std::move(m));
  }
  proto::GradientAck ack;
  ack.set_chunk_index(count == 0 ? 0 : count - 1);
  stream->Write(ack);
  return grpc::Status::OK;
}

// The ReduceMessage fields of a push's first chunk (data aside).
absl::Status GrpcGroupComm::Impl::Header(const proto::GradientChunk& c, ReduceMessage* m) {
  m->iteration = c.iteration();
  m->stage = static_cast<int>(c.stage());
  m->from = *common::NodeId::FromBytes(c.from());  // checked by CheckChunk
  m->shard = static_cast<int>(c.shard());
  m->total = static_cast<int64_t>(c.total_elements());
  m->visits = c.visits();
  m->digest = c.params_digest();
  m->digests.assign(c.member_digests().begin(), c.member_digests().end());
  m->bandwidth = c.uplink_bytes_per_second();
  m->norm = c.contribution_norm();
  m->bandwidths.assign(c.member_uplinks().begin(), c.member_uplinks().end());
  m->layout.weights.assign(c.shard_weights().begin(), c.shard_weights().end());
  if (c.phase() == 0) {
    return c.stage() == kBarrierStage && c.tensor().shape(0) == 0
               ? absl::OkStatus()
               : absl::InvalidArgumentError("a barrier message carries no gradient");
  }
  if (c.phase() > 2 || c.stage() == kBarrierStage) {
    return absl::InvalidArgumentError(absl::StrCat("unknown push phase ", c.phase()));
  }
  m->phase = c.phase() == 1 ? ReduceMessage::Phase::kScatter : ReduceMessage::Phase::kGather;
  if (c.members_size() > kMaxMembers || c.shard_weights_size() > kMaxMembers ||
      c.member_uplinks_size() > kMaxMembers || c.member_digests_size() > kMaxMembers ||
      c.excluded_owners_size() > kMaxMembers) {
    return absl::InvalidArgumentError("too many members");
  }
  for (const std::string& b : c.members()) {
    absl::StatusOr<common::NodeId> id = common::NodeId::FromBytes(b);
    if (!id.ok()) return absl::InvalidArgumentError("bad member id");
    m->members.push_back(*id);
  }
  for (const std::string& b : c.excluded_owners()) {  // Note [Banned owners]
    absl::StatusOr<common::NodeId> id = common::NodeId::FromBytes(b);
    if (!id.ok()) return absl::InvalidArgumentError("bad excluded owner id");
    m->excluded.push_back(*id);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> GrpcGroupComm::Impl::DecodePush(const ReduceMessage& m,
                                                                  int64_t n,
                                                                  absl::string_view bytes) const {
  const int members = static_cast<int>(m.members.size());
  SS_RETURN_IF_ERROR(m.layout.Validate(members));
  if (m.shard < 0 || m.shard >= members) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard ", m.shard, " of a round of ", members, " members"));
  }
  const auto [begin, end] = m.layout.Range(m.total, members, m.shard);
  if (end - begin != n) {
    return absl::InvalidArgumentError(absl::StrCat("shard ", m.shard, " of ", n,
                                                   " elements, the round's cut gives ",
                                                   end - begin));
  }
  return DecodeShard(options_.codec, bytes, n, begin, m.total);
}

absl::Status GrpcGroupComm::Impl::CheckChunk(const proto::GradientChunk& chunk, uint32_t expected,
                                             size_t have) const {
  SS_RETURN_IF_ERROR(proto::CheckProtocolVersion(chunk.protocol_version()));
  if (!options_.swarm_id.empty() && chunk.swarm_id() != options_.swarm_id) {
    return absl::PermissionDeniedError("wrong swarm id");
  }
  if (!common::NodeId::FromBytes(chunk.from()).ok()) {
    return absl::InvalidArgumentError("bad sender id");
  }
  if (chunk.chunk_index() != expected || chunk.chunk_count() == 0 ||
      chunk.chunk_index() >= chunk.chunk_count()) {
    return absl::InvalidArgumentError(absl::StrCat("chunk ", chunk.chunk_index(), "/",
                                                   chunk.chunk_count(), ", expected ", expected));
  }
  if (chunk.tensor().shape_size() != 1 || chunk.tensor().shape(0) < 0 ||
      chunk.tensor().shape(0) > options_.max_elements ||
      chunk.total_elements() > static_cast<uint64_t>(options_.max_elements)) {
    return absl::InvalidArgumentError("tensor shape must be [n] within the size limit");
  }
  if (chunk.encoding() > 1 || (chunk.encoding() == 1 && chunk.phase() == 0)) {
    return absl::InvalidArgumentError(absl::StrCat("unknown push encoding ", chunk.encoding()));
  }
  if (chunk.encoding() == 1) {
    // Note [Encoded shards]: bytes, bounded by what the element count allows.
    if (chunk.payload_bytes() == 0 ||
        chunk.payload_bytes() > MaxShardBytes(chunk.tensor().shape(0)) ||
        chunk.offset() != have || chunk.data().size() > (size_t{1} << 20) ||
        have + chunk.data().size() > chunk.payload_bytes()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "encoded chunk at byte ", chunk.offset(), " (", chunk.data().size(), " bytes) of ",
          chunk.payload_bytes(), " for ", chunk.tensor().shape(0), " elements is out of range"));
    }
    return absl::OkStatus();
  }
  if (chunk.offset() != have || chunk.data().size() % sizeof(float) != 0 ||
      chunk.data().size() > (size_t{1} << 20) ||
      have + chunk.data().size() / sizeof(float) > static_cast<uint64_t>(chunk.tensor().shape(0))) {
    return absl::InvalidArgumentError("chunk offset or size out of range");
  }
  return absl::OkStatus();
}

// Note [Push admission]: the iteration window, the stage's known size
// and the early-shard budget, checked at a push's first chunk.
absl::Status GrpcGroupComm::Impl::AdmitPush(const ReduceMessage& m, uint64_t elements) {
  absl::MutexLock lock(&mu_);
  if (reached_any_ && m.iteration > reached_ && m.iteration - reached_ > kMaxIterationsAhead) {
    ++stats_pushes_refused_;
    return absl::FailedPreconditionError(
        absl::StrCat("push for iteration ", m.iteration, " while this node is at ", reached_));
  }
  if (reached_any_ && m.iteration + options_.keep_iterations < reached_) {
    ++stats_pushes_refused_;
    return absl::FailedPreconditionError(
        absl::StrCat("push for iteration ", m.iteration, ", long over (now ", reached_, ")"));
  }
  auto size = stage_elements_.find(m.stage);
  if (size != stage_elements_.end() &&
      (elements > size->second || static_cast<uint64_t>(m.total) > size->second)) {
    ++stats_pushes_refused_;
    return absl::InvalidArgumentError(
        absl::StrCat("push of ", elements, " elements for stage ", m.stage, " of ", size->second));
  }
  if (reduces_.count({m.iteration, m.stage}) == 0 &&
      early_bytes_ + elements * sizeof(float) > EarlyBudgetLocked()) {
    ++stats_pushes_refused_;
    return absl::ResourceExhaustedError("too many gradient shards waiting already");
  }
  return absl::OkStatus();
}

uint64_t GrpcGroupComm::Impl::EarlyBudgetLocked() const {
  if (stage_elements_.empty()) return kUnknownEarlyBytes;
  uint64_t known = 0;
  for (const auto& [stage, n] : stage_elements_) known += n * sizeof(float);
  return std::max(kUnknownEarlyBytes, kEarlyRounds * 2 * known);
}

// Note [Entry in the group]
// A member that re-enters the swarm (Note [Revived members], [Data node
// behind], [Behind on any stage] in node/daemon) keeps its group comm, and
// the push window above stood at the iteration it was stuck in. Its entry
// is announced a lead after its source's iteration; in a fast swarm its
// new replicas finish that and push their gradients for the entry before
// its trainer starts it. Those pushes were refused as far ahead, the
// pushers marked it dead and averaged without it, and it re-entered a
// second time after a silent deadline, the data nodes' micro-batches lost
// meanwhile (node/daemon/README.md). The member knows its entry before
// anyone routes or averages with it, so the window moves there first: it
// stands at entry - 1 (as its stage server does, Note [Entry iteration]),
// admitting the entry and the next one, the same bound as for any member,
// and the early-shard budget still caps what is held. Pushes of the
// iterations it skipped are long over and refused as such.
void GrpcGroupComm::EnterAt(uint64_t entry) {
  if (entry == 0) return;
  absl::MutexLock lock(&impl_->mu_);
  impl_->ReachedLocked(entry - 1);
}

void GrpcGroupComm::Impl::ReachedLocked(uint64_t iteration) {
  if (!reached_any_ || iteration > reached_) reached_ = iteration;
  reached_any_ = true;
}

// GrpcGroupOptions::members_only.
absl::Status GrpcGroupComm::Impl::CheckMember(const common::NodeId& from) const {
  if (!options_.members_only) return absl::OkStatus();
  for (const PeerInfo& p : view_->Members()) {
    if (p.id == from) return absl::OkStatus();
  }
  return absl::PermissionDeniedError(
      absl::StrCat("node ", from.ShortString(), " is not a member of this swarm"));
}

void GrpcGroupComm::Impl::ReceiveBarrier(uint64_t iteration, const common::NodeId& from,
                                         uint64_t stated_ms) {
  // Note [Stated bounds in the daemons]: a peer's word, capped; only a
  // data node's counts (the map holds at most the data nodes seen).
  const bool data_node = stated_ms > 0 && [&] {
    for (const common::NodeId& d : view_->Replicas(0)) {
      if (d == from) return true;
    }
    return false;
  }();
  {
    absl::MutexLock lock(&mu_);
    arrived_[iteration].insert(from);
    if (data_node) {
      const uint64_t cap_ms = static_cast<uint64_t>(
          std::max<int64_t>(0, absl::ToInt64Milliseconds(options_.max_stated_bound)));
      const absl::Duration bound =
          absl::Milliseconds(static_cast<int64_t>(std::min(stated_ms, cap_ms)));
      Stated& s = stated_[from];
      // Note [Stated pace]: the span since its last release ends here.
      const absl::Duration now = clock_->SteadyNow();
      s.pace.Arrived(now);
      if (passed_barrier_.has_value() && iteration <= *passed_barrier_ &&
          barrier_waiters_.count(iteration) == 0) {
        // This node is past that barrier already: the bound counts from now.
        s.released = StatedBound{s.pace.Limit(bound, options_.stated_pace), now};
        s.pace.Released(s.released->bound, now);
        s.pending.reset();
      } else {
        s.pending = std::make_pair(iteration, bound);
      }
    }
  }
  Sweep();
}

void GrpcGroupComm::Impl::ReceiveReduce(ReduceMessage m) {
  std::vector<OutgoingReduce> out;
  const common::NodeId from = m.from;
  bool poisoned = false;
  {
    absl::MutexLock lock(&mu_);
    // Counted under the lock that holds what it is taken into.
    ++stats_messages_received_;
    const std::pair<uint64_t, int> key{m.iteration, m.stage};
    auto it = reduces_.find(key);
    if (it == reduces_.end()) {
      // Before our own AllReduce for it: kept until then.
      // Bounded (Note [Push admission]): admitted at the first chunk,
      // checked again now that the bytes are here.
      const uint64_t bytes = m.data->size() * sizeof(float);
      auto& early = early_[key];
      if (early.size() < 4 * kMaxMembers && early_bytes_ + bytes <= EarlyBudgetLocked()) {
        early_bytes_ += bytes;
        early.push_back(std::move(m));
      }
      while (early_.size() > 64) EraseEarlyLocked(early_.begin());
      return;
    }
    ShardedReduce& r = *it->second.reduce;
    VLOG(1) << options_.self.ShortString() << ": shard " << m.shard << " phase "
            << static_cast<int>(m.phase) << " from " << m.from.ShortString() << " for a round of "
            << m.members.size() << " (ours " << r.members().size() << ", done " << r.done()
            << ", delivered " << it->second.delivered << ")";
    absl::StatusOr<std::vector<OutgoingReduce>> more = r.Receive(std::move(m));
    if (!more.ok()) {
      LOG(WARNING) << "refused a gradient shard from " << from.ShortString() << ": "
                   << more.status();
      poisoned = absl::IsDataLoss(more.status());
    } else {
      out.insert(out.end(), std::make_move_iterator(more->begin()),
                 std::make_move_iterator(more->end()));
    }
  }
  if (poisoned) {
    // Note [Robust averaging]: a shard owner that sent a reduced shard that
    // cannot be right leaves the group; the round is redone without it.
    LOG(WARNING) << "dropping " << from.ShortString()
                 << " from the group: it sent a poisoned reduced shard";
    view_->MarkDead(from);
  }
  Send(std::move(out));
  Sweep();
}

void GrpcGroupComm::Impl::EraseEarlyLocked(
    std::map<std::pair<uint64_t, int>, std::vector<ReduceMessage>>::iterator it) {
  for (const ReduceMessage& m : it->second) {
    early_bytes_ -= m.data != nullptr ? m.data->size() * sizeof(float) : 0;
  }
  early_.erase(it);
}

void GrpcGroupComm::Impl::Send(std::vector<OutgoingReduce> out) {
  for (OutgoingReduce& o : out) {
    const uint32_t phase = o.message.phase == ReduceMessage::Phase::kScatter ? 1 : 2;
    Push(o.to, phase, o.message.iteration, static_cast<uint32_t>(o.message.stage),
         std::make_shared<const ReduceMessage>(std::move(o.message)));
  }
}

// Pushes `m` (null: a barrier message) to `to` on its push thread; a
// failed push marks `to` dead (its rounds restart without it).
//
// Note [Retried pushes]
// A push to a relayed member (Note [Relayed members] in
// node/daemon/gossip/gossip_daemon_relay.cc) that was in flight when the
// relay carrying it died fails UNAVAILABLE while the member is fine: it
// re-attaches elsewhere within tens of milliseconds. Marking it dead at
// once dropped it from this round, which this node then finished without
// it, while the member, back in everyone's view after its re-sign, waited
// for this node's part of that round (a stall until the silent deadline,
// Note [Silent members]). So such a push is sent again (a new connection,
// through the relays its record names by then) every push_retry_every, up
// to push_retries times, while the view still lists it alive; only then is
// it a verdict. Parts are idempotent at the receiver (a repeated one
// replaces the same part). Other members' failed pushes stay verdicts at
// once: their connection is the member itself.
void GrpcGroupComm::Impl::Push(const common::NodeId& to, uint32_t phase, uint64_t iteration,
                               uint32_t stage, std::shared_ptr<const ReduceMessage> m,
                               int attempt, uint64_t owed) {
  const uint64_t bytes = m == nullptr           ? 0
                         : m->payload != nullptr ? m->payload->size()
                                                 : m->data->size() * sizeof(float);
  if (m != nullptr && owed == 0) owed = Owe(to, iteration, static_cast<int>(stage), bytes);
  const std::string address = AddressOf(to);
  std::weak_ptr<Impl> weak = weak_from_this();
  PostFor(to, [weak, to, address, phase, iteration, stage, m, attempt, owed, bytes] {
    auto self = weak.lock();
    if (!self) return;
    if (bytes > 0) self->uplink_.Begin(self->clock_->SteadyNow());
    absl::Status s = self->PushNow(address, to, phase, iteration, stage, m.get());
    if (bytes > 0) self->uplink_.End(self->clock_->SteadyNow(), bytes, s.ok());
    if (!s.ok()) {
      const GrpcGroupOptions& o = self->options_;
      if (absl::IsUnavailable(s) && attempt < o.push_retries && o.retry_pushes_to &&
          o.retry_pushes_to(to) && self->view_->IsAlive(to)) {
        LOG(WARNING) << "gradient push to " << to << " (" << address << ") failed: " << s
                     << "; trying again (" << attempt + 1 << "/" << o.push_retries << ")";
        // Still owed while the retry waits.
        self->clock_->RunAfter(o.push_retry_every, [weak, to, phase, iteration, stage, m,
                                                    attempt, owed] {
          if (auto again = weak.lock()) {
            again->Push(to, phase, iteration, stage, m, attempt + 1, owed);
          }
        });
        return;
      }
      self->Settle(owed);
      // Note [Refused late pushes].
      if (m != nullptr && absl::IsFailedPrecondition(s) &&
          self->RoundOver(iteration, static_cast<int>(stage))) {
        LOG(INFO) << "gradient push to " << to << " (" << address << ") for iteration "
                  << iteration << ", a round this node is done with, refused: " << s;
        return;
      }
      LOG(WARNING) << "gradient push to " << to << " (" << address << ") failed: " << s;
      self->view_->MarkDead(to);
      self->Sweep();
      return;
    }
    self->Settle(owed);
  });
}

// Note [Refused late pushes]
// A member closed out of an outer sync (Note [Late members] in
// sharded_reduce.h) is done with the round once its peers' reduced shards
// reach it, while its own parts of the round may still be on its slow
// uplink; they arrive after its peers moved on and are refused as long
// over (FAILED_PRECONDITION, Note [Push admission]). Marking the receiver
// dead for that dropped the late member's only peer from its group: it
// then averaged alone, its parameters apart from its peer's without a
// digest check noticing (a one-member round agrees with itself), until a
// later late round compared anchors and re-synced (measured: 56
// iterations apart in tools/experiments/slow_sync.sh's tight mode). A
// push for a round this node is done with carries nothing this node
// waits for, so its refusal is no verdict on the receiver: a receiver
// really gone fails its probes (Note [Group liveness]) and one far behind
// is a missing member of this node's next round (Note [Silent members]).
bool GrpcGroupComm::Impl::RoundOver(uint64_t iteration, int stage) {
  absl::MutexLock lock(&mu_);
  auto it = reduces_.find({iteration, stage});
  return it == reduces_.end() || it->second.delivered ||
         (it->second.reduce != nullptr && it->second.reduce->done());
}

absl::Status GrpcGroupComm::Impl::PushNow(const std::string& address, const common::NodeId& to,
                                          uint32_t phase, uint64_t iteration, uint32_t stage,
                                          const ReduceMessage* m) {
  if (address.empty()) return absl::UnavailableError("no StageService address");
  auto channel = ChannelFor(address, to);
  auto stub = proto::StageService::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(common::SystemDeadlineAfter(options_.push_deadline));
  auto stream = stub->PushGradients(&context);
  static const std::vector<float> kEmpty;
  const std::vector<float>& data = m != nullptr ? *m->data : kEmpty;
  const size_t n = data.size();
  // Note [Encoded shards]: the codec's bytes, else the floats.
  const std::string* encoded = m != nullptr ? m->payload.get() : nullptr;
  const size_t unit = encoded != nullptr ? 1 : sizeof(float);
  const size_t length = encoded != nullptr ? encoded->size() : n;
  const size_t per_chunk = (size_t{1} << 20) / unit;
  const uint32_t count =
      static_cast<uint32_t>(std::max<size_t>(1, (length + per_chunk - 1) / per_chunk));
  std::optional<absl::Duration> stated;
  if (phase == 0) {
    absl::MutexLock lock(&mu_);
    auto it = own_stated_.find(iteration);
    if (it != own_stated_.end()) stated = it->second;
  }
  for (uint32_t i = 0; i < count; ++i) {
    proto::GradientChunk chunk;
    chunk.set_protocol_version(proto::kProtocolVersion);
    chunk.set_swarm_id(options_.swarm_id);
    chunk.set_from(options_.self.Bytes());
    chunk.set_stage(stage);
    chunk.set_iteration(iteration);
    chunk.set_phase(phase);
    if (phase == 0 && stated.has_value()) {  // Note [Stated bounds in the daemons]
      chunk.set_stated_bound_ms(static_cast<uint64_t>(
          std::max<int64_t>(1, absl::ToInt64Milliseconds(*stated))));
    }
    if (m != nullptr) {
      chunk.set_visits(static_cast<uint32_t>(m->visits));
      chunk.set_params_digest(m->digest);
      chunk.set_shard(static_cast<uint32_t>(m->shard));
      chunk.set_total_elements(static_cast<uint64_t>(m->total));
      chunk.set_uplink_bytes_per_second(m->bandwidth);
      chunk.set_contribution_norm(m->norm);
      if (i == 0) {
        for (const common::NodeId& id : m->members) chunk.add_members(id.Bytes());
        for (uint64_t d : m->digests) chunk.add_member_digests(d);
        for (uint32_t w : m->layout.weights) chunk.add_shard_weights(w);
        for (uint64_t b : m->bandwidths) chunk.add_member_uplinks(b);
        for (const common::NodeId& id : m->excluded) chunk.add_excluded_owners(id.Bytes());
      }
    }
    chunk.set_chunk_index(i);
    chunk.set_chunk_count(count);
    const size_t begin = std::min(length, i * per_chunk);
    const size_t end = std::min(length, begin + per_chunk);
    chunk.set_offset(begin);
    chunk.mutable_tensor()->set_dtype(proto::DTYPE_FLOAT32);
    chunk.mutable_tensor()->set_codec(proto::CODEC_RAW_FP32);
    chunk.mutable_tensor()->add_shape(static_cast<int64_t>(n));
    if (encoded != nullptr) {
      chunk.set_encoding(1);
      chunk.set_payload_bytes(encoded->size());
      chunk.set_data(encoded->data() + begin, end - begin);
    } else {
      chunk.set_data(reinterpret_cast<const char*>(data.data() + begin),
                     (end - begin) * sizeof(float));
    }
    pushed_bytes_ += chunk.data().size();
    if (pacer_ != nullptr && end > begin) {
      // Blocks this push thread (its peer's pushes queue behind it, as
      // on a link) on a clock timer.
      absl::Notification slot;
      clock_->RunAfter(pacer_->Reserve(chunk.data().size(), clock_->SteadyNow()),
                       [&slot] { slot.Notify(); });
      slot.WaitForNotification();
    }
    if (!stream->Write(chunk)) break;
  }
  stream->WritesDone();
  proto::GradientAck ack;
  stream->Read(&ack);
  return proto::ToAbslStatus(stream->Finish());
}

}  // namespace skipswarm::node
