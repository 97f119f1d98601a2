#include "common/node_id.h"

#include <openssl/sha.h>

#include <cstring>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace skipswarm::common {

NodeId NodeId::FromPublicKey(absl::string_view public_key) {
  NodeId id;
  SHA256(reinterpret_cast<const unsigned char*>(public_key.data()),
         public_key.size(), id.bytes_.data());
  return id;
}

absl::StatusOr<NodeId> NodeId::FromBytes(absl::string_view bytes) {
  if (bytes.size() != kBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "node id must be ", kBytes, " bytes, got ", bytes.size()));
  }
  NodeId id;
  std::memcpy(id.bytes_.data(), bytes.data(), kBytes);
  return id;
}

absl::StatusOr<NodeId> NodeId::FromHex(absl::string_view hex) {
  if (hex.size() != 2 * kBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "node id must be ", 2 * kBytes, " hex characters, got ", hex.size()));
  }
  for (char c : hex) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) {
      return absl::InvalidArgumentError(
          absl::StrCat("node id has a non-hex character '", std::string(1, c),
                       "'"));
    }
  }
  return FromBytes(absl::HexStringToBytes(hex));
}

NodeId NodeId::ForName(absl::string_view name) {
  return FromPublicKey(absl::StrCat("sim:", name));
}

bool NodeId::IsZero() const {
  for (uint8_t b : bytes_) {
    if (b != 0) return false;
  }
  return true;
}

std::string NodeId::Bytes() const {
  return std::string(reinterpret_cast<const char*>(bytes_.data()), kBytes);
}

std::string NodeId::Hex() const { return absl::BytesToHexString(Bytes()); }

std::string NodeId::ShortString() const { return Hex().substr(0, 8); }

}  // namespace skipswarm::common
