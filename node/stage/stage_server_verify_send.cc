// The stage server as the hop before replica X in verified compute
// (tests/adversarial/README.md, "Verified compute"): sampling which of its
// forward frames also go, verify-only, to a second replica Y, and telling
// the owner each verdict judged here.
#include "node/stage/stage_server_impl.h"
#include "node/stage/verify_pick.h"

namespace skipswarm::node {

// Note [Sending checks]
// Every forward frame this node sends to a hop h > 0 (OnForwardDone: a
// started micro-batch's first hop, or a relay's next) is offered here
// before it is sealed. With options_.verify_rate > 0 (verify_trusted_rate
// for a trusted X: Note [Trusted disputes] in verify_trust.h), X = route[h]
// not this node, and PickVerifier (Note [Verify sampling]) naming a trusted,
// alive replica Y of route[h]'s stage (not this node, not X) for this
// frame, a copy goes to Y: route[h] names Y, header.verify holds the seed
// and X (Note [Verify-only frames]); the payload Cord is shared, so the
// copy costs the upload, not memory. Sent once and never re-routed: a
// refusal (Y full, at another iteration) or a failed send only costs that
// check (verify_send_failed). The copy follows X's frame's route as it is
// now: when X's hop is re-routed later, Y's answer names X and goes to the
// old hop after, where no output of X arrives, and expires unjudged (Note
// [Pending output checks]).
// The members come from the server's view (Members(), alive ones only),
// read per frame, only with a non-zero rate. Y must say it answers
// verify-only frames (PeerInfo::verify_frames, from NodeRecord.verify_frames):
// a build older than them would admit the copy as an ordinary forward and
// train on it; a hop after X that is older refuses the answer (no
// direction it knows), which only loses the check.
void StageServer::Impl::MaybeSendVerify(const Frame& frame) {
  if (!(options_.verify_rate > 0) && !(options_.verify_trusted_rate > 0)) return;
  const proto::FrameHeader& h = frame.header;
  if (!IsForward(h) || h.hop_index() == 0 ||
      h.hop_index() >= static_cast<uint32_t>(h.route_size())) {
    return;
  }
  const int stage = static_cast<int>(h.route(h.hop_index()).stage());
  absl::StatusOr<PeerId> x = PeerId::FromBytes(h.route(h.hop_index()).node_id());
  if (stage == 0 || !x.ok() || *x == self_) return;
  std::optional<PeerInfo> x_info;
  std::vector<PeerInfo> replicas;
  for (PeerInfo& p : view_->Members()) {
    if (p.id == *x) x_info = p;
    if (p.id != self_ && view_->IsAlive(p.id)) replicas.push_back(std::move(p));
  }
  if (!x_info.has_value()) return;
  std::optional<VerifyPick> pick;
  {
    absl::MutexLock lock(&mu_);
    pick = PickVerifier(*x_info, stage, replicas, options_.verify_rate, verify_rng_,
                        options_.verify_trusted_rate);
  }
  if (!pick.has_value()) return;
  Frame copy = frame;  // shares the payload
  copy.header.mutable_route(static_cast<int>(h.hop_index()))->set_node_id(pick->verifier.Bytes());
  copy.header.mutable_verify()->set_seed(pick->seed);
  copy.header.mutable_verify()->set_checked(x->Bytes());
  copy.header.set_deadline_ms(static_cast<uint32_t>(
      std::max<int64_t>(1, absl::ToInt64Milliseconds(hops_.Deadline(pick->verifier)))));
  SealFrame(copy);
  {
    absl::MutexLock lock(&mu_);
    ++stats_.verify_sent;
    stats_.verify_bytes_sent += static_cast<int64_t>(copy.payload.size());
  }
  VLOG(1) << "verify-only copy of " << DescribeFrame(h) << " to "
          << pick->verifier.ShortString() << " (checks " << x->ShortString() << ")";
  std::weak_ptr<Impl> weak = weak_from_this();
  transport_->Send(pick->verifier, std::move(copy), [weak](absl::Status ack) {
    auto self = weak.lock();
    if (!self || ack.ok()) return;
    VLOG(1) << "verify-only copy refused: " << ack;
    absl::MutexLock lock(&self->mu_);
    ++self->stats_.verify_send_failed;
  });
}

void StageServer::Impl::OnVerdict(const PeerId& checked, const PeerId& verifier, bool trusted,
                                  const std::optional<model::SketchVerdict>& verdict) {
  if (!verdict.has_value()) return;
  if (!verdict->match) {
    LOG(WARNING) << "verified compute: " << (trusted ? "trusted " : "")
                 << checked.ShortString() << "'s output does not match "
                 << verifier.ShortString() << "'s sketch: " << verdict->reason;
  }
  if (!trusted && options_.on_check_verdict) options_.on_check_verdict(checked, verdict->match);
  if (trusted && options_.on_trusted_verdict) {
    options_.on_trusted_verdict(checked, verifier, verdict->match);
  }
}

}  // namespace skipswarm::node
