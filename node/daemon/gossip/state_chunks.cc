#include "node/daemon/gossip/state_chunks.h"

#include "absl/strings/str_cat.h"
#include "common/crc32c.h"
#include "common/sha256.h"

namespace skipswarm::node {

// Note [Receiving state chunks].
absl::Status StateChunkReceiver::Accept(const proto::StateChunk& chunk) {
  if (chunk.stage() != static_cast<uint32_t>(expect_.stage) ||
      chunk.iteration() != expect_.iteration) {
    return absl::InvalidArgumentError("source sent another stage or iteration");
  }
  if (first_) {
    first_ = false;
    if (expect_.on_first_chunk) expect_.on_first_chunk();
    total_ = chunk.total_bytes();
    if (expect_.max_bytes > 0 && total_ > expect_.max_bytes) {
      // A snapshot cannot be larger than its stage: refused before a byte
      // of it is held (a source claiming 1 TiB was read until the deadline).
      got_->clear();
      sha_->clear();
      return absl::ResourceExhaustedError(absl::StrCat("snapshot of stage ", expect_.stage,
                                                       " claims ", total_, " bytes; at most ",
                                                       expect_.max_bytes, " expected"));
    }
    if (!sha_->empty() && chunk.sha256() != *sha_) {
      // Another snapshot than the bytes held: restart from zero.
      got_->clear();
      *sha_ = chunk.sha256();
      return absl::AbortedError("snapshot differs from the partial one; restarting");
    }
    *sha_ = chunk.sha256();
    *digest_ = chunk.params_digest();
  }
  if (chunk.sha256() != *sha_ || chunk.total_bytes() != total_ || chunk.offset() != got_->size() ||
      got_->size() + chunk.data().size() > total_) {
    got_->clear();
    return absl::DataLossError("chunk out of sequence");
  }
  if (common::Crc32c(chunk.data()) != chunk.crc32c()) {
    return absl::DataLossError(absl::StrCat("chunk at ", chunk.offset(), " fails its CRC"));
  }
  got_->append(chunk.data());
  return absl::OkStatus();
}

absl::Status StateChunkReceiver::Finish() {
  if (first_ || got_->size() != total_) {
    return absl::UnavailableError(absl::StrCat("stream ended at ", got_->size(), "/", total_));
  }
  if (common::Sha256(*got_) != *sha_) {
    got_->clear();
    return absl::DataLossError("SHA-256 of the transferred state does not match");
  }
  return absl::OkStatus();
}

}  // namespace skipswarm::node
