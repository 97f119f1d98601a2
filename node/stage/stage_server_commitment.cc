// Note [Checkable evidence] (node/compute/evidence.h) in the stage server:
// X signs a commitment to the input it received and the output it sends on
// every forward frame it produces (it cannot know which are checked), and
// the hop after checks it before admission, so the output it may later
// keep for a check is the one X signed. X passes the hop before's
// commitment on with its own, which binds it, and the hop after checks
// that its output hash is X's input hash (the input chain) and that both
// sign the route the frame carries up to the hop each sent its output to
// (Note [Signed route prefix] in stage_server.h). A frame refused because
// X's input hash is not the bound, verified hop before's output proves X
// lied: it is kept as a piece against X and condemns X here at once (Note
// [Evidence bans] in evidence_bans.h, KeepFalseInput).
#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "node/compute/evidence.h"
#include "node/stage/stage_server_impl.h"

namespace skipswarm::node {
namespace {

// The hop that produced a forward frame at `hop_index`: the one before, or
// for a tail frame (hop 0, back at the origin) the route's last.
uint32_t ProducerHop(const proto::FrameHeader& h) {
  return h.hop_index() == 0 ? static_cast<uint32_t>(h.route_size()) - 1 : h.hop_index() - 1;
}

bool SameMeta(const proto::TensorMeta& a, const proto::TensorMeta& b) {
  return a.dtype() == b.dtype() && a.codec() == b.codec() &&
         a.payload_bytes() == b.payload_bytes() && a.block_size() == b.block_size() &&
         std::equal(a.shape().begin(), a.shape().end(), b.shape().begin(), b.shape().end());
}

}  // namespace

void StageServer::Impl::CommitOutput(uint32_t hop, const std::string& input_sha256,
                                     Frame* next) {
  // The received frame's commitment is the hop before's: never passed on
  // as ours, but as the commitment to our input, where it names the input
  // we hashed (checked at admission where we check; compared here too).
  std::optional<proto::OutputCommitment> received;
  if (next->header.has_commitment() &&
      next->header.commitment().output_sha256() == input_sha256) {
    received = std::move(*next->header.mutable_commitment());
  }
  PassOnEarlierCommitments(hop, options_.signer == nullptr ? &received : nullptr,
                           &next->header);
  next->header.clear_commitment();
  next->header.clear_input_commitment();
  if (hop == 0) {
    // Stage 0 is never checked, but its output is what hop 1 consumes:
    // the origin commits to it and to the route it sends it on.
    next->header.clear_origin_commitment();
    if (options_.signer != nullptr) SignOriginCommitment(Sha256(next->payload), &next->header);
    return;
  }
  if (options_.signer == nullptr) return;
  proto::OutputCommitment* c = next->header.mutable_commitment();
  if (received.has_value()) {
    c->set_input_commitment_sha256(CommitmentDigest(*received));
    *next->header.mutable_input_commitment() = *std::move(received);
  }
  c->set_swarm_id(next->header.swarm_id());
  c->set_origin(next->header.origin());
  c->set_iteration(next->header.iteration());
  c->set_mb_id(next->header.mb_id());
  c->set_hop_index(hop);
  c->set_input_sha256(input_sha256);
  c->set_output_sha256(Sha256(next->payload));
  // Note [Signed route prefix]: our own hop and the one we send to; a
  // repair of ours that changes the latter re-signs (ResignForRepair).
  c->set_route_sha256(SignedRouteDigest(next->header.route(), hop));
  *c->mutable_output() = next->header.tensor();
  // As SealFrame will declare it (the compute may leave the size unset).
  c->mutable_output()->clear_payload_crc32c();
  c->mutable_output()->set_payload_bytes(next->payload.size());
  if (!SignOrDrop(&next->header)) return;
  absl::MutexLock lock(&mu_);
  ++stats_.commitments_signed;
}

bool StageServer::Impl::SignOrDrop(proto::FrameHeader* h) {
  absl::Status signed_ok = SignCommitment(*options_.signer, h->mutable_commitment());
  if (signed_ok.ok()) return true;
  // Our own key failing: the frame goes without one (a catcher that
  // requires it refuses, as it would an older peer's).
  LOG_EVERY_N(ERROR, 100) << "cannot sign an output commitment: " << signed_ok;
  h->clear_commitment();
  h->clear_input_commitment();
  return false;
}

void StageServer::Impl::ResignForRepair(uint32_t holder, proto::FrameHeader* h) {
  if (options_.signer == nullptr || !h->has_commitment()) return;
  proto::OutputCommitment* c = h->mutable_commitment();
  // Only our own commitment, as the producer of this frame (the holder).
  if (c->producer() != self_bytes_ || c->hop_index() != holder ||
      holder >= static_cast<uint32_t>(h->route_size())) {
    return;
  }
  std::string digest = SignedRouteDigest(h->route(), holder);
  if (digest == c->route_sha256()) return;  // the same next hop
  c->set_route_sha256(std::move(digest));
  if (!SignOrDrop(h)) return;
  absl::MutexLock lock(&mu_);
  ++stats_.commitments_resigned;
}

void StageServer::Impl::PassOnEarlierCommitments(uint32_t hop,
                                                  std::optional<proto::OutputCommitment>* unbound,
                                                  proto::FrameHeader* h) {
  auto* earlier = h->mutable_earlier_commitments();
  if (hop < 2) return earlier->Clear();  // hop 1 passes on none; the origin none
  // The received frame's input commitment (hop - 2's) was the last hop
  // before our input commitment's; where we sign nothing, the hop
  // before's own commitment goes on here too (nothing of ours binds it).
  if (h->has_input_commitment()) *earlier->Add() = std::move(*h->mutable_input_commitment());
  if (unbound != nullptr && unbound->has_value()) *earlier->Add() = *std::move(*unbound);
  // More than an honest chain holds (a sender we do not check): none.
  if (earlier->size() > static_cast<int>(hop) - 1) earlier->Clear();
}

void StageServer::Impl::SignOriginCommitment(std::string output_sha256,
                                             proto::FrameHeader* h) {
  // Only the origin's own key can commit for it (a receiver looks its key
  // up by h->origin()).
  if (options_.signer->id().Bytes() != h->origin()) return h->clear_origin_commitment();
  proto::OriginCommitment* o = h->mutable_origin_commitment();
  o->Clear();
  o->set_swarm_id(h->swarm_id());
  o->set_iteration(h->iteration());
  o->set_mb_id(h->mb_id());
  *o->mutable_route() = h->route();
  o->set_output_sha256(std::move(output_sha256));
  if (absl::Status s = SignOrigin(*options_.signer, o); !s.ok()) {
    LOG_EVERY_N(ERROR, 100) << "cannot sign an origin commitment: " << s;
    h->clear_origin_commitment();
  }
}

std::string StageServer::Impl::CheckOriginCommitment(const Frame& frame, uint32_t producer_hop) {
  const proto::FrameHeader& h = frame.header;
  if (!h.has_origin_commitment()) {
    return CommitmentsRequiredFrom(h.origin()) ? "no origin commitment" : "";
  }
  const proto::OriginCommitment& o = h.origin_commitment();
  if (absl::Status shape = CheckOriginShape(o); !shape.ok()) return std::string(shape.message());
  if (o.origin() != h.origin() || o.swarm_id() != h.swarm_id() ||
      o.iteration() != h.iteration() || o.mb_id() != h.mb_id()) {
    return "the origin commitment does not describe this micro-batch";
  }
  // Repairs keep route[0..holder] and never lengthen a route; the origin
  // re-signs its own (holder 0), so route[0..1] and the length are fixed.
  const int fixed = std::min(2, o.route_size());
  if (h.route_size() < fixed || h.route_size() > o.route_size()) {
    return "the route is not one the origin's planned route can be repaired into";
  }
  for (int i = 0; i < fixed; ++i) {
    if (h.route(i).node_id() != o.route(i).node_id() || h.route(i).stage() != o.route(i).stage()) {
      return "the route's hop 1 is not the one the origin sent the micro-batch to";
    }
  }
  absl::StatusOr<PeerId> origin = PeerId::FromBytes(o.origin());
  std::optional<std::string> key;
  if (origin.ok()) key = options_.public_key_of(*origin);
  if (!key.has_value()) return "no key for the origin";
  if (absl::Status v = VerifyOrigin(o, *key); !v.ok()) {
    return absl::StrCat("origin commitment: ", v.message());
  }
  // Hop 1's input is the origin's output, as received by the hop after
  // the origin (later hops: Hop1InputAsCommitted).
  if (producer_hop == 0 && Sha256(frame.payload) != o.output_sha256()) {
    return "the payload is not the origin's committed output";
  }
  return "";
}

std::string StageServer::Impl::Hop1InputAsCommitted(const proto::FrameHeader& h,
                                                    uint32_t producer_hop) {
  if (!h.has_origin_commitment()) return "";
  // Hop 1's own commitment, or the one the hop after hop 1 passed on.
  const proto::OutputCommitment* hop1 = nullptr;
  if (producer_hop == 1 && h.has_commitment()) hop1 = &h.commitment();
  if (producer_hop == 2 && h.has_input_commitment()) hop1 = &h.input_commitment();
  if (hop1 != nullptr && hop1->input_sha256() != h.origin_commitment().output_sha256()) {
    return "hop 1's input hash is not the origin's committed output";
  }
  return "";
}

void StageServer::Impl::StripForwardEvidence(proto::FrameHeader* h) {
  h->clear_commitment();
  h->clear_input_commitment();
  h->clear_origin_commitment();
  h->clear_earlier_commitments();
}

bool StageServer::Impl::CommitmentsRequiredFrom(const std::string& node_id) const {
  if (options_.require_commitments) return true;
  absl::StatusOr<PeerId> member = PeerId::FromBytes(node_id);
  return options_.commitments_required_from && member.ok() &&
         options_.commitments_required_from(*member);
}

std::string StageServer::Impl::CheckInputCommitment(const proto::FrameHeader& h,
                                                     uint32_t producer_hop, bool* false_input) {
  const proto::OutputCommitment& c = h.commitment();
  const bool bound = !c.input_commitment_sha256().empty();
  if (producer_hop == 1) {
    if (bound || h.has_input_commitment()) return "an input commitment on hop 1 (stage 0 signs none)";
    return "";
  }
  const std::string& before = h.route(producer_hop - 1).node_id();
  if (!bound && !h.has_input_commitment()) {
    // Only where both X and the hop before sign (an older peer on either
    // side leaves X nothing to pass on).
    if (CommitmentsRequiredFrom(h.route(producer_hop).node_id()) && CommitmentsRequiredFrom(before)) {
      return "no input commitment";
    }
    return "";
  }
  if (!bound || !h.has_input_commitment() ||
      CommitmentDigest(h.input_commitment()) != c.input_commitment_sha256()) {
    return "the input commitment is not the one the producer signed";
  }
  const proto::OutputCommitment& in = h.input_commitment();
  absl::StatusOr<PeerId> before_id = PeerId::FromBytes(before);
  std::optional<std::string> key;
  if (before_id.ok()) key = options_.public_key_of(*before_id);
  if (absl::Status shape = CheckCommitmentShape(in); !shape.ok()) {
    return absl::StrCat("input ", shape.message());
  }
  if (in.producer() != before || in.hop_index() != producer_hop - 1 || in.origin() != h.origin() ||
      in.iteration() != h.iteration() || in.mb_id() != h.mb_id() || in.swarm_id() != h.swarm_id()) {
    return "the input commitment does not describe the hop before's visit";
  }
  if (!key.has_value()) return "no key for the hop before";
  if (absl::Status v = VerifyCommitment(in, *key); !v.ok()) {
    return absl::StrCat("input commitment: ", v.message());
  }
  if (in.output_sha256() != c.input_sha256()) {
    *false_input = true;
    return "the producer's input hash is not the hop before's committed output";
  }
  // It names the producer as the hop it sent its output to.
  if (in.route_sha256() != SignedRouteDigest(h.route(), producer_hop - 1)) {
    return "the route up to the producer is not the one the hop before signed";
  }
  return "";
}

std::string StageServer::Impl::CheckEarlierCommitments(const proto::FrameHeader& h,
                                                        uint32_t producer_hop) {
  const auto& earlier = h.earlier_commitments();
  if (earlier.empty() && producer_hop < 3) return "";
  // Hop order, each hop once, before the producer; every hop up to the
  // input commitment's that must sign is there (hop p - 1 is the input
  // commitment's to require, CheckInputCommitment).
  uint32_t covered = 0;
  for (const proto::OutputCommitment& c : earlier) {
    const uint32_t j = c.hop_index();
    if (j <= covered || j >= producer_hop) return "earlier commitments out of hop order";
    for (uint32_t gap = covered + 1; gap < j; ++gap) {
      if (CommitmentsRequiredFrom(h.route(gap).node_id())) {
        return absl::StrCat("no commitment of hop ", gap);
      }
    }
    covered = j;
  }
  for (uint32_t gap = covered + 1; gap + 1 < producer_hop; ++gap) {
    if (CommitmentsRequiredFrom(h.route(gap).node_id())) {
      return absl::StrCat("no commitment of hop ", gap);
    }
  }
  // Each names its hop's node and this micro-batch, and signs the route
  // as this frame carries it up to the hop after; then the signatures.
  for (const proto::OutputCommitment& c : earlier) {
    const uint32_t j = c.hop_index();
    if (absl::Status shape = CheckCommitmentShape(c); !shape.ok()) {
      return absl::StrCat("earlier ", shape.message());
    }
    if (c.producer() != h.route(j).node_id() || c.origin() != h.origin() ||
        c.iteration() != h.iteration() || c.mb_id() != h.mb_id() ||
        c.swarm_id() != h.swarm_id()) {
      return absl::StrCat("the commitment of hop ", j, " does not describe its visit");
    }
    if (c.route_sha256() != SignedRouteDigest(h.route(), j)) {
      return absl::StrCat("the route up to hop ", j + 1, " is not the one hop ", j, " signed");
    }
  }
  for (const proto::OutputCommitment& c : earlier) {
    absl::StatusOr<PeerId> signer = PeerId::FromBytes(c.producer());
    std::optional<std::string> key;
    if (signer.ok()) key = options_.public_key_of(*signer);
    if (!key.has_value()) return absl::StrCat("no key for hop ", c.hop_index());
    if (absl::Status v = VerifyCommitment(c, *key); !v.ok()) {
      return absl::StrCat("commitment of hop ", c.hop_index(), ": ", v.message());
    }
  }
  return "";
}

absl::Status StageServer::Impl::CheckCommitment(const Frame& frame) {
  if (!options_.public_key_of) return absl::OkStatus();
  const proto::FrameHeader& h = frame.header;
  if (h.route_size() == 0 || h.hop_index() >= static_cast<uint32_t>(h.route_size())) {
    return absl::OkStatus();  // Admit refuses it
  }
  const uint32_t producer_hop = ProducerHop(h);
  std::string why;
  bool false_input = false;
  if (h.earlier_commitments_size() > std::max(0, static_cast<int>(producer_hop) - 1)) {
    // Bounded before anything is hashed or verified: at most one per hop
    // between stage 0 and the producer.
    why = absl::StrCat(h.earlier_commitments_size(), " earlier commitments for a producer at hop ",
                       producer_hop);
  } else if (h.hop_index() == 0 && producer_hop > 0 && !TailStartsAsSent(h)) {
    // The route is the sender's word, and the input chain reads it: a
    // producer past hop 1 that drops the hops before it from a tail's route
    // claims hop 1, whose input stage 0 never signs, and so owes no input
    // commitment. Only the origin knows hop 1 (repairs after it never
    // change it: CheckRepair).
    why = "the route's hop 1 is not the node this origin sent the micro-batch to";
  } else if (why = CheckOriginCommitment(frame, producer_hop); !why.empty()) {
    // Refused below.
  } else if (producer_hop == 0) {
    if (!h.has_commitment() && !h.has_input_commitment() && h.earlier_commitments().empty()) {
      return absl::OkStatus();  // stage 0's
    }
    why = "a commitment on stage 0's output";
  } else if (!h.has_commitment()) {
    if (!CommitmentsRequiredFrom(h.route(producer_hop).node_id())) {
      // A producer that signs nothing: the hops before that did still bind
      // their names.
      if (why = CheckEarlierCommitments(h, producer_hop); why.empty()) return absl::OkStatus();
    } else {
      why = "no output commitment";
    }
  } else {
    const proto::OutputCommitment& c = h.commitment();
    absl::StatusOr<PeerId> producer = PeerId::FromBytes(h.route(producer_hop).node_id());
    std::optional<std::string> key;
    if (producer.ok()) key = options_.public_key_of(*producer);
    if (absl::Status shape = CheckCommitmentShape(c); !shape.ok()) {
      why = std::string(shape.message());
    } else if (c.producer() != h.route(producer_hop).node_id() || c.hop_index() != producer_hop ||
               c.origin() != h.origin() || c.iteration() != h.iteration() ||
               c.mb_id() != h.mb_id() || c.swarm_id() != h.swarm_id() ||
               !SameMeta(c.output(), h.tensor())) {
      why = "the commitment does not describe this frame";
    } else if (!key.has_value()) {
      why = "no key for the producer";
    } else if (absl::Status v = VerifyCommitment(c, *key); !v.ok()) {
      why = absl::StrCat("commitment: ", v.message());
    } else if (Sha256(frame.payload) != c.output_sha256()) {
      why = "the payload is not the committed output";
    } else if (c.route_sha256() != SignedRouteDigest(h.route(), producer_hop)) {
      why = "the route up to the producer's next hop is not the one it signed";
    } else if (why = CheckInputCommitment(h, producer_hop, &false_input); !why.empty()) {
      if (false_input) KeepFalseInput(h, *producer);
    } else if (why = CheckEarlierCommitments(h, producer_hop); !why.empty()) {
      // Refused below.
    } else if (why = Hop1InputAsCommitted(h, producer_hop); why.empty()) {
      absl::MutexLock lock(&mu_);
      ++stats_.commitments_checked;
      return absl::OkStatus();
    }
  }
  {
    absl::MutexLock lock(&mu_);
    ++stats_.commitments_refused;
  }
  absl::Status refused = Refuse(absl::StatusCode::kInvalidArgument, h, why);
  LOG_EVERY_N(WARNING, 100) << "refused a forward frame: " << refused;
  return refused;
}

void StageServer::Impl::KeepFalseInput(const proto::FrameHeader& h, const PeerId& producer) {
  // Note [Evidence bans]: X's own signatures contradict each other, so the
  // piece convicts X anywhere whatever its trust, and here it condemns X
  // at once (trusted or not: it is a proof, not a strike or a dispute). In
  // the bounded store the mismatches use.
  checks_.KeepProvenPiece(producer, Evidence{h.commitment(), absl::Cord(), proto::SketchAnswer(),
                                             h.input_commitment()});
  {
    absl::MutexLock lock(&mu_);
    ++stats_.false_inputs_kept;
  }
  LOG(WARNING) << "verified compute: " << producer.ShortString()
               << " signed an input hash other than the hop before's signed output; "
                  "kept as evidence";
  if (options_.on_false_input) {
    options_.on_false_input(producer);
  } else if (options_.on_check_verdict) {
    options_.on_check_verdict(producer, false);
  }
}

bool StageServer::Impl::TailStartsAsSent(const proto::FrameHeader& h) const {
  MbKey key = MbKey::Of(h);
  key.hop = 0;
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(key);
  if (it == entries_.end() || !it->second.forward_done) return true;  // Admit refuses it
  const proto::FrameHeader& sent = it->second.header;
  if (sent.route_size() < 2 || h.route_size() < 2) return sent.route_size() == h.route_size();
  return sent.route(1).node_id() == h.route(1).node_id() &&
         sent.route(1).stage() == h.route(1).stage();
}

std::vector<Evidence> StageServer::EvidenceAgainst(const PeerId& member) const {
  std::vector<Evidence> out = impl_->checks_.EvidenceAgainst(member);
  for (Evidence& e : impl_->trusted_checks_.EvidenceAgainst(member)) out.push_back(std::move(e));
  return out;
}

}  // namespace skipswarm::node
