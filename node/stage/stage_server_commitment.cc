// Note [Checkable evidence] (node/compute/evidence.h) in the stage server:
// X signs a commitment to the input it received and the output it sends on
// every forward frame it produces (it cannot know which are checked), and
// the hop after checks it before admission, so the output it may later
// keep for a check is the one X signed.
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
  // as ours.
  next->header.clear_commitment();
  if (options_.signer == nullptr || hop == 0) return;  // stage 0 is never checked
  proto::OutputCommitment* c = next->header.mutable_commitment();
  c->set_swarm_id(next->header.swarm_id());
  c->set_origin(next->header.origin());
  c->set_iteration(next->header.iteration());
  c->set_mb_id(next->header.mb_id());
  c->set_hop_index(hop);
  c->set_input_sha256(input_sha256);
  c->set_output_sha256(Sha256(next->payload));
  *c->mutable_output() = next->header.tensor();
  // As SealFrame will declare it (the compute may leave the size unset).
  c->mutable_output()->clear_payload_crc32c();
  c->mutable_output()->set_payload_bytes(next->payload.size());
  absl::Status signed_ok = SignCommitment(*options_.signer, c);
  if (!signed_ok.ok()) {
    // Our own key failing: the frame goes without one (a catcher that
    // requires it refuses, as it would an older peer's).
    LOG_EVERY_N(ERROR, 100) << "cannot sign an output commitment: " << signed_ok;
    next->header.clear_commitment();
    return;
  }
  absl::MutexLock lock(&mu_);
  ++stats_.commitments_signed;
}

absl::Status StageServer::Impl::CheckCommitment(const Frame& frame) {
  if (!options_.public_key_of) return absl::OkStatus();
  const proto::FrameHeader& h = frame.header;
  if (h.route_size() == 0 || h.hop_index() >= static_cast<uint32_t>(h.route_size())) {
    return absl::OkStatus();  // Admit refuses it
  }
  const uint32_t producer_hop = ProducerHop(h);
  std::string why;
  if (producer_hop == 0) {
    if (!h.has_commitment()) return absl::OkStatus();  // the origin's stage 0
    why = "a commitment on stage 0's output";
  } else if (!h.has_commitment()) {
    absl::StatusOr<PeerId> producer = PeerId::FromBytes(h.route(producer_hop).node_id());
    const bool required = options_.require_commitments ||
                          (options_.commitments_required_from && producer.ok() &&
                           options_.commitments_required_from(*producer));
    if (!required) return absl::OkStatus();  // an older peer
    why = "no output commitment";
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
    } else {
      absl::MutexLock lock(&mu_);
      ++stats_.commitments_checked;
      return absl::OkStatus();
    }
  }
  {
    absl::MutexLock lock(&mu_);
    ++stats_.commitments_refused;
  }
  return Refuse(absl::StatusCode::kInvalidArgument, h, why);
}

std::vector<Evidence> StageServer::EvidenceAgainst(const PeerId& member) const {
  std::vector<Evidence> out = impl_->checks_.EvidenceAgainst(member);
  for (Evidence& e : impl_->trusted_checks_.EvidenceAgainst(member)) out.push_back(std::move(e));
  return out;
}

}  // namespace skipswarm::node
