#include "membership/record.h"

#include <openssl/sha.h>

#include <algorithm>
#include <cmath>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "membership/join_work.h"

namespace skipswarm::membership {

std::string DeriveSwarmId(absl::string_view name, absl::string_view secret) {
  if (secret.empty()) return std::string(name);
  // Length-prefixed so ("ab", "c") and ("a", "bc") differ.
  const std::string input = absl::StrCat("skipswarm swarm id v1|", name.size(),
                                         "|", name, "|", secret);
  unsigned char digest[SHA256_DIGEST_LENGTH];
  SHA256(reinterpret_cast<const unsigned char*>(input.data()), input.size(),
         digest);
  return absl::StrCat(
      name, "/",
      absl::BytesToHexString(absl::string_view(
          reinterpret_cast<const char*>(digest), 16)));
}

absl::StatusOr<proto::SignedNodeRecord> SignRecord(const identity::Identity& identity,
                                                   proto::NodeRecord record,
                                                   absl::Time now) {
  record.set_node_id(identity.id().Bytes());
  record.set_public_key(identity.public_key());
  record.set_signed_at_unix_ms(absl::ToUnixMillis(now));
  proto::SignedNodeRecord out;
  if (!record.SerializeToString(out.mutable_record())) {
    return absl::InternalError("cannot serialize node record");
  }
  SS_ASSIGN_OR_RETURN(*out.mutable_signature(), identity.Sign(out.record()));
  return out;
}

std::string OpinionSignedBytes(const proto::MembershipUpdate& update,
                               absl::string_view swarm_id) {
  // Length-prefixed fields: no two distinct opinions share their bytes.
  return absl::StrCat("skipswarm opinion v1|", swarm_id.size(), "|", swarm_id,
                      "|", update.node_id().size(), "|", update.node_id(), "|",
                      static_cast<int>(update.state()), "|",
                      update.incarnation(), "|", update.reporter().size(), "|",
                      update.reporter());
}

absl::Status SignOpinion(const identity::Identity& identity,
                         absl::string_view swarm_id,
                         proto::MembershipUpdate* update) {
  update->set_reporter(identity.id().Bytes());
  SS_ASSIGN_OR_RETURN(*update->mutable_signature(),
                      identity.Sign(OpinionSignedBytes(*update, swarm_id)));
  return absl::OkStatus();
}

absl::Status VerifyOpinion(const proto::MembershipUpdate& update,
                           absl::string_view swarm_id,
                           absl::string_view reporter_public_key) {
  if (update.signature().size() != identity::kSignatureBytes) {
    return absl::UnauthenticatedError("opinion is not signed");
  }
  if (common::NodeId::FromPublicKey(reporter_public_key).Bytes() !=
      update.reporter()) {
    return absl::UnauthenticatedError("opinion's reporter is not the key's owner");
  }
  absl::Status s = identity::VerifySignature(
      reporter_public_key, OpinionSignedBytes(update, swarm_id),
      update.signature());
  if (!s.ok()) {
    return absl::UnauthenticatedError(
        absl::StrCat("forged opinion: ", s.message()));
  }
  return absl::OkStatus();
}

proto::MemberState OwnerState(const proto::NodeRecord& record) {
  return record.state() == proto::MEMBER_STATE_UNSPECIFIED
             ? proto::MEMBER_STATE_ALIVE
             : record.state();
}

absl::StatusOr<proto::NodeRecord> VerifyRecord(
    const proto::SignedNodeRecord& signed_record, const RecordPolicy& policy,
    absl::Time now) {
  if (signed_record.record().size() > kMaxRecordBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "node record is ", signed_record.record().size(), " bytes (limit ",
        kMaxRecordBytes, ")"));
  }
  proto::NodeRecord record;
  if (!record.ParseFromString(signed_record.record())) {
    return absl::InvalidArgumentError("node record does not parse");
  }
  if (record.public_key().size() != identity::kPublicKeyBytes) {
    return absl::UnauthenticatedError("node record has no Ed25519 public key");
  }
  const common::NodeId id = common::NodeId::FromPublicKey(record.public_key());
  if (record.node_id() != id.Bytes()) {
    return absl::UnauthenticatedError(absl::StrCat(
        "node record claims an id that is not the hash of its key (key hashes "
        "to ", id.ShortString(), ")"));
  }
  // Note [Join work]: one hash, before the signature's verify.
  SS_RETURN_IF_ERROR(
      CheckJoinWork(policy.admission, id, record.public_key(), record.join_work()));
  if (absl::Status s = identity::VerifySignature(record.public_key(),
                                       signed_record.record(),
                                       signed_record.signature());
      !s.ok()) {
    return absl::UnauthenticatedError(absl::StrCat(
        "node record of ", id.ShortString(), " is forged: ", s.message()));
  }
  if (record.swarm_id() != policy.swarm_id) {
    return absl::FailedPreconditionError(absl::StrCat(
        "node ", id.ShortString(), " belongs to another swarm"));
  }
  // Note [Admission]: before the record can reach a table.
  SS_RETURN_IF_ERROR(CheckAdmission(policy.admission, id, record.invite(), now));
  if (!policy.model_id.empty() && record.model_id() != policy.model_id) {
    return absl::FailedPreconditionError(absl::StrCat(
        "node ", id.ShortString(), " trains another model (model id '",
        record.model_id(), "', this swarm's '", policy.model_id,
        "'): check --stages and the model flags"));
  }
  if (!policy.averaging_id.empty() && record.averaging_id() != policy.averaging_id) {
    return absl::FailedPreconditionError(absl::StrCat(
        "node ", id.ShortString(), " averages its replicas otherwise (averaging '",
        record.averaging_id(), "', this swarm's '", policy.averaging_id,
        "'): check --outer_every, --avg_codec and --outer_overlap"));
  }
  if (policy.sign_frames && !record.sign_frames()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "node ", id.ShortString(),
        " does not sign its forward frames, and this swarm's manifest says every member does "
        "(--sign_frames)"));
  }
  const absl::Time signed_at = absl::FromUnixMillis(record.signed_at_unix_ms());
  if (signed_at > now + policy.max_future_skew) {
    return absl::InvalidArgumentError(absl::StrCat(
        "node record of ", id.ShortString(), " is signed ",
        absl::FormatDuration(signed_at - now),
        " in the future (is its clock wrong?)"));
  }
  if (signed_at < now - policy.max_age) {
    return absl::InvalidArgumentError(absl::StrCat(
        "node record of ", id.ShortString(), " is stale (signed ",
        absl::FormatDuration(now - signed_at), " ago)"));
  }
  if (record.addresses_size() > kMaxAddresses ||
      record.stages_size() > kMaxStages ||
      record.stage_digests_size() > kMaxStages) {
    return absl::InvalidArgumentError(absl::StrCat(
        "node record of ", id.ShortString(), " has too many addresses/stages"));
  }
  if (record.incarnation() > kMaxIncarnation) {
    return absl::InvalidArgumentError(absl::StrCat(
        "node record of ", id.ShortString(), " has incarnation ",
        record.incarnation(), " (limit ", kMaxIncarnation, ")"));
  }
  const double speed = record.seconds_per_layer_per_sample();
  if (!std::isfinite(speed) || speed < 0 || speed > kMaxSecondsPerLayerPerSample) {
    return absl::InvalidArgumentError(absl::StrCat(
        "node record of ", id.ShortString(), " has a bad compute speed"));
  }
  if (record.memory_slots() > kMaxRecordMemorySlots) {
    return absl::InvalidArgumentError(absl::StrCat(
        "node record of ", id.ShortString(), " claims ", record.memory_slots(),
        " memory slots (limit ", kMaxRecordMemorySlots, ")"));
  }
  for (const std::string& address : record.addresses()) {
    if (address.empty() || address.size() > kMaxAddressBytes ||
        address.find_first_of(" \t\r\n") != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "node record of ", id.ShortString(), " has a malformed address"));
    }
  }
  if (record.relays_size() > kMaxRecordRelays ||
      std::any_of(record.relays().begin(), record.relays().end(),
                  [](const std::string& r) { return r.size() != common::NodeId::kBytes; })) {
    return absl::InvalidArgumentError(absl::StrCat(
        "node record of ", id.ShortString(), " has a malformed relay list"));
  }
  if (record.vouches_size() > kMaxRecordVouches ||
      std::any_of(record.vouches().begin(), record.vouches().end(),
                  [](const std::string& v) { return v.size() != common::NodeId::kBytes; })) {
    return absl::InvalidArgumentError(absl::StrCat(
        "node record of ", id.ShortString(), " has a malformed vouch list"));
  }
  if (record.bans_size() > kMaxRecordBans ||
      std::any_of(record.bans().begin(), record.bans().end(),
                  [](const std::string& b) { return b.size() != common::NodeId::kBytes; })) {
    return absl::InvalidArgumentError(absl::StrCat(
        "node record of ", id.ShortString(), " has a malformed ban list"));
  }
  if (policy.num_stages > 0) {
    auto outside = [&](uint32_t stage) { return stage >= policy.num_stages; };
    bool bad = std::any_of(record.stages().begin(), record.stages().end(), outside);
    for (const auto& [stage, digest] : record.stage_digests()) bad |= outside(stage);
    if (bad) {
      return absl::InvalidArgumentError(absl::StrCat(
          "node record of ", id.ShortString(), " names a stage outside 0..",
          policy.num_stages - 1));
    }
  }
  const proto::MemberState state = OwnerState(record);
  if (state != proto::MEMBER_STATE_ALIVE && state != proto::MEMBER_STATE_LEFT) {
    return absl::InvalidArgumentError(absl::StrCat(
        "node record of ", id.ShortString(),
        " states SUSPECT/DEAD about itself"));
  }
  return record;
}

absl::Status CheckNewer(uint64_t known_incarnation,
                        const proto::NodeRecord& incoming) {
  if (incoming.incarnation() > known_incarnation) return absl::OkStatus();
  if (incoming.incarnation() == known_incarnation) {
    return absl::AlreadyExistsError("duplicate node record");
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "replayed/stale node record: incarnation ", incoming.incarnation(),
      " < known ", known_incarnation));
}

}  // namespace skipswarm::membership
