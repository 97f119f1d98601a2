// A node's identity in the swarm: the SHA-256 hash of its public key.
//
//   NodeId id = NodeId::FromPublicKey(der_bytes);
//   LOG(INFO) << "I am " << id.ShortString();   // "a1b2c3d4"
//
// Peers check that the key a node authenticates with hashes to the id it
// claims, so an id cannot be borrowed. Value type; thread-compatible.
#ifndef SKIPSWARM_COMMON_NODE_ID_H_
#define SKIPSWARM_COMMON_NODE_ID_H_

#include <array>
#include <cstdint>
#include <ostream>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace skipswarm::common {

class NodeId {
 public:
  static constexpr size_t kBytes = 32;

  // The all-zero id: "no node". Never the hash of a real key.
  NodeId() { bytes_.fill(0); }

  // SHA-256 of `public_key` (any encoding; the daemon uses raw Ed25519 keys).
  static NodeId FromPublicKey(absl::string_view public_key);
  // Parses exactly kBytes raw bytes (as carried on the wire).
  static absl::StatusOr<NodeId> FromBytes(absl::string_view bytes);
  // Parses the 64-character lowercase or uppercase hex form.
  static absl::StatusOr<NodeId> FromHex(absl::string_view hex);
  // A deterministic id for tests and simulated nodes: hash of "sim:<name>".
  static NodeId ForName(absl::string_view name);

  bool IsZero() const;
  std::string Bytes() const;
  std::string Hex() const;
  // First 8 hex characters: enough to tell nodes apart in logs.
  std::string ShortString() const;

  friend bool operator==(const NodeId& a, const NodeId& b) {
    return a.bytes_ == b.bytes_;
  }
  friend bool operator!=(const NodeId& a, const NodeId& b) { return !(a == b); }
  friend bool operator<(const NodeId& a, const NodeId& b) {
    return a.bytes_ < b.bytes_;
  }
  template <typename H>
  friend H AbslHashValue(H h, const NodeId& id) {
    return H::combine_contiguous(std::move(h), id.bytes_.data(), kBytes);
  }
  friend std::ostream& operator<<(std::ostream& os, const NodeId& id) {
    return os << id.ShortString();
  }

 private:
  std::array<uint8_t, kBytes> bytes_;
};

}  // namespace skipswarm::common

#endif  // SKIPSWARM_COMMON_NODE_ID_H_
