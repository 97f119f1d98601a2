// StageServer, part 2: sending frames to the next hop, their acks, route
// repair through the injected RouteRepairer, and dropping visits (Notes in
// stage_server.h). Part 1 is stage_server.cc.
#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "node/stage/stage_server_impl.h"

namespace skipswarm::node {

void StageServer::Impl::SendFrame(Frame frame, std::vector<PeerId> failed) {
  const std::string& to_bytes = frame.header.route(frame.header.hop_index()).node_id();
  absl::StatusOr<PeerId> to = PeerId::FromBytes(to_bytes);
  if (!to.ok()) {
    LOG(ERROR) << "bad node id in our own route: " << DescribeFrame(frame.header);
    Drop(MbKey::Of(frame.header), to.status(), "bad_route");
    return;
  }
  frame.header.set_deadline_ms(static_cast<uint32_t>(
      std::max<int64_t>(1, absl::ToInt64Milliseconds(hops_.Deadline(*to)))));
  if (frame.header.direction() == proto::DIRECTION_BACKWARD) StripForwardEvidence(&frame.header);
  SealFrame(frame);
  std::weak_ptr<Impl> weak = weak_from_this();
  if (*to == self_) {
    // Local hop: admit as if it had arrived, acknowledge asynchronously.
    bool runnable = false;
    absl::Status admitted = Receive(self_, frame, &runnable);
    clock_->RunAfter(absl::ZeroDuration(), [weak, frame = std::move(frame), to = *to,
                                            failed = std::move(failed), admitted]() mutable {
      if (auto self = weak.lock()) {
        self->OnAck(std::move(frame), to, std::move(failed), admitted);
        self->MaybeDispatch();
      }
    });
    return;
  }
  const bool tried = std::find(failed.begin(), failed.end(), *to) != failed.end();
  if (IsForward(frame.header) && frame.header.hop_index() != 0 && !tried &&
      !view_->IsAlive(*to)) {
    // Note [Hop failures]: the view already gave up on it; re-route without
    // waiting for the transport to find out. (Backward frames and the tail
    // have nowhere else to go: they are always sent, and so is a forward
    // that cannot be re-routed, in case the verdict was wrong.)
    clock_->RunAfter(absl::ZeroDuration(), [weak, frame = std::move(frame), to = *to,
                                            failed = std::move(failed)]() mutable {
      if (auto self = weak.lock()) {
        self->OnAck(std::move(frame), to, std::move(failed), absl::UnavailableError(kMarkedDead));
      }
    });
    return;
  }
  {
    absl::MutexLock lock(&mu_);
    stats_.bytes_sent += frame.payload.size();
  }
  hops_.RecordSent(*to, static_cast<int64_t>(frame.payload.size()));
  Frame copy = frame;  // kept for a repair; the Cord shares the bytes
  const absl::Duration sent = clock_->SteadyNow();
  transport_->Send(*to, std::move(frame),
                   [weak, copy = std::move(copy), to = *to, failed = std::move(failed),
                    sent](absl::Status ack) mutable {
                     if (auto self = weak.lock()) {
                       if (ack.ok()) self->hops_.RecordAck(to, self->clock_->SteadyNow() - sent);
                       self->OnAck(std::move(copy), to, std::move(failed), std::move(ack));
                     }
                   });
}

void StageServer::Impl::OnAck(Frame frame, PeerId to, std::vector<PeerId> failed,
                              absl::Status ack) {
  if (ack.ok()) {
    if (IsForward(frame.header)) {
      const proto::FrameHeader& h = frame.header;
      MbKey mine = MbKey::Of(h);
      mine.hop = h.hop_index() == 0 ? h.route_size() - 1 : h.hop_index() - 1;
      absl::MutexLock lock(&mu_);
      auto it = entries_.find(mine);
      if (it != entries_.end()) {
        it->second.next_admitted = to;
        // The route as admitted, repairs included (Note [Who may abort]).
        *it->second.header.mutable_route() = h.route();
      }
    }
    return;
  }
  proto::FrameHeader& h = frame.header;
  if (absl::IsUnavailable(ack)) view_->MarkDead(to);
  failed.push_back(to);
  const bool forward = IsForward(h);
  LOG(WARNING) << "hop to " << to << " failed: " << DescribeFrame(h) << ": " << ack;
  absl::Status repair = absl::FailedPreconditionError("not a forward hop that can be re-routed");
  if (forward && h.hop_index() != 0 && IsRetryElsewhere(ack)) {
    repair = static_cast<int>(h.reroutes()) < options_.max_reroutes
                 ? Repair(h, failed)
                 : absl::AbortedError(absl::StrCat("re-routed ", h.reroutes(), " times already"));
  }
  if (repair.ok()) {
    const char* reason = RerouteReason(ack);
    {
      absl::MutexLock lock(&mu_);
      ++stats_.rerouted;
      ++stats_.rerouted_by_reason[reason];
      if (stats_.first_reroute_at == absl::InfiniteDuration()) {
        stats_.first_reroute_at = clock_->SteadyNow();
      }
    }
    LOG(INFO) << "re-routed (" << reason << "): " << DescribeFrame(h) << " now to hop "
              << h.hop_index();
    SendFrame(std::move(frame), std::move(failed));
    return;
  }
  if (absl::StartsWith(ack.message(), kMarkedDead)) {
    // Only the view's verdict, nothing sent yet: try the peer after all.
    LOG(WARNING) << "no other route for " << DescribeFrame(h) << " (" << repair.message()
                 << "); sending to " << to.ShortString() << " although the view calls it dead";
    SendFrame(std::move(frame), std::move(failed));
    return;
  }
  // Cannot be repaired: this node drops what it holds of the MB and tells
  // the hops before (Note [Abort notices]).
  absl::Status why(ack.code(), absl::StrCat("next hop ", to.ShortString(), " failed: ",
                                            ack.message(), "; not re-routed: ", repair.message()));
  if (forward) {
    // Note [Stopping refusals]: the origin re-runs it or pauses.
    if (std::optional<proto::AbortCause> c = StoppingRefusalCause(ack, to, h.iteration())) {
      why = WithStoppingCause(std::move(why), *c);
    }
  }
  MbKey mine = MbKey::Of(h);
  const uint32_t n = static_cast<uint32_t>(h.route_size());
  if (forward) {
    mine.hop = h.hop_index() == 0 ? n - 1 : h.hop_index() - 1;
    Drop(mine, why, "unrepairable");
    if (mine.hop > 0) SendAbort(h, mine.hop - 1, why);
    return;
  }
  if (h.hop_index() + 1 == n) {
    // The origin's tail could not send its gradient: end the MB here and
    // free hops n-2..1.
    mine.hop = 0;
    Drop(mine, why, "backward_hop_lost");
    if (n >= 3) SendAbort(h, n - 2, why);
    return;
  }
  // Our own visit already ended with the backward; the hops before the
  // dead one still hold the MB.
  {
    absl::MutexLock lock(&mu_);
    ++stats_.dropped;
    ++stats_.dropped_by_reason["backward_hop_lost"];
  }
  if (h.hop_index() > 0) SendAbort(h, h.hop_index() - 1, why);
}

absl::Status StageServer::Impl::Repair(proto::FrameHeader& h, const std::vector<PeerId>& failed) {
  RepairRequest r;
  r.iteration = h.iteration();
  r.mb = h.mb_id();
  r.holder = static_cast<int>(h.hop_index()) - 1;
  r.failed = failed;
  r.allow_shorter = options_.allow_skip;
  for (const proto::Hop& hop : h.route()) {
    absl::StatusOr<PeerId> id = PeerId::FromBytes(hop.node_id());
    if (!id.ok()) return id.status();
    r.route.push_back({*id, static_cast<int>(hop.stage())});
  }
  absl::StatusOr<std::vector<RouteHop>> fixed = repairer_->Repair(r, *view_);
  if (!fixed.ok()) return fixed.status();
  absl::Status checked = CheckRepair(r, *view_, *fixed);
  if (!checked.ok()) return checked;
  h.clear_route();
  for (const RouteHop& hop : *fixed) {
    proto::Hop* p = h.add_route();
    p->set_node_id(hop.node.Bytes());
    p->set_stage(static_cast<uint32_t>(hop.stage));
  }
  // Everything after the holder skipped: straight to the tail at the origin.
  const uint32_t next = static_cast<uint32_t>(r.holder) + 1;
  h.set_hop_index(next < fixed->size() ? next : 0);
  h.set_reroutes(h.reroutes() + 1);
  if (r.holder == 0 && h.has_origin_commitment() && options_.signer != nullptr) {
    // The origin's own repair changes hop 1: it commits to the new route
    // (Note [Checkable evidence]; later repairs keep route[0..1]).
    SignOriginCommitment(h.origin_commitment().output_sha256(), &h);
  }
  // Note [Signed route prefix]: our commitment names the hop we send to;
  // a repair that changes it (another replica, completion or a skip)
  // re-signs for the new one.
  if (r.holder > 0) ResignForRepair(static_cast<uint32_t>(r.holder), &h);
  return absl::OkStatus();
}

void StageServer::Impl::Drop(const MbKey& key, const absl::Status& why, const char* reason) {
  std::vector<std::pair<StageCompute*, uint64_t>> discards;
  std::vector<std::pair<MbKey, absl::Status>> finished;
  {
    absl::MutexLock lock(&mu_);
    DropLocked(key, why, reason, discards, finished);
  }
  Finish(discards, finished);
}

void StageServer::Impl::DropLocked(const MbKey& key, const absl::Status& why, const char* reason,
                                   std::vector<std::pair<StageCompute*, uint64_t>>& discards,
                                   std::vector<std::pair<MbKey, absl::Status>>& finished) {
  auto it = entries_.find(key);
  if (it == entries_.end()) return;
  if (it->second.holds_slot) --slots_in_use_;
  discards.emplace_back(ComputeFor(it->second.stage), it->second.local_id);
  entries_.erase(it);
  ++stats_.dropped;
  ++stats_.dropped_by_reason[reason];
  VLOG(1) << "dropped visit (" << reason << ") of mb " << key.mb << " it " << key.iteration
          << " hop " << key.hop << ": " << why;
  if (key.origin == self_bytes_ && key.hop == 0) finished.emplace_back(key, why);
}

namespace {
constexpr absl::string_view kAbortCauseUrl = "type.skipswarm/skipswarm.proto.AbortCause";
constexpr absl::string_view kDeliveredByUrl = "type.skipswarm/skipswarm.AbortDeliveredBy";
}  // namespace

absl::Status WithStoppingCause(absl::Status why, const proto::AbortCause& cause) {
  why.SetPayload(kAbortCauseUrl, absl::Cord(cause.SerializeAsString()));
  return why;
}

absl::Status WithDeliveredBy(absl::Status why, const PeerId& from) {
  why.SetPayload(kDeliveredByUrl, absl::Cord(from.Bytes()));
  return why;
}

std::optional<proto::AbortCause> StoppingRefusalCause(const absl::Status& ack, const PeerId& to,
                                                      uint64_t iteration) {
  if (!absl::IsResourceExhausted(ack)) return std::nullopt;
  const std::string prefix = absl::StrCat(kStoppingNode, " after iteration ");
  const size_t at = ack.message().find(prefix);
  if (at == absl::string_view::npos) return std::nullopt;
  proto::AbortCause c;
  c.set_kind(proto::AbortCause::ABORT_CAUSE_STOPPING);
  c.set_node(to.Bytes());
  // Its last iteration as the refusal states it; failing that, the one
  // before the refused frame's (it refuses that one and every later one).
  absl::string_view rest = ack.message().substr(at + prefix.size());
  const size_t digits = rest.find_first_not_of("0123456789");
  uint64_t last = 0;
  if (!absl::SimpleAtoi(rest.substr(0, digits), &last) || last >= iteration) {
    last = iteration == 0 ? 0 : iteration - 1;
  }
  c.set_stop_after(last);
  return c;
}

std::optional<proto::AbortCause> AbortCauseOf(const absl::Status& why) {
  auto payload = why.GetPayload(kAbortCauseUrl);  // absl::optional<absl::Cord>
  if (!payload.has_value()) return std::nullopt;
  proto::AbortCause c;
  if (!c.ParseFromString(std::string(*payload)) ||
      c.kind() != proto::AbortCause::ABORT_CAUSE_STOPPING) {
    return std::nullopt;
  }
  return c;
}

std::optional<StoppingCause> StoppingCauseOf(const absl::Status& status) {
  std::optional<proto::AbortCause> c = AbortCauseOf(status);
  if (!c.has_value()) return std::nullopt;
  absl::StatusOr<PeerId> node = PeerId::FromBytes(c->node());
  if (!node.ok()) return std::nullopt;
  StoppingCause out{*node, c->stop_after()};
  if (auto by = status.GetPayload(kDeliveredByUrl); by.has_value()) {
    absl::StatusOr<PeerId> from = PeerId::FromBytes(std::string(*by));
    if (!from.ok()) return std::nullopt;
    out.delivered_by = *from;
  }
  return out;
}

}  // namespace skipswarm::node
