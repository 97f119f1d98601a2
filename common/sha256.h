// SHA-256 (OpenSSL's EVP), 32 raw bytes: the one digest function for
// commitments, evidence and state transfers.
//
//   std::string d = common::Sha256(bytes);          // contiguous bytes
//   std::string e = common::Sha256(payload_cord);   // every chunk, in order
//
// Thread rule: pure functions.
#ifndef SKIPSWARM_COMMON_SHA256_H_
#define SKIPSWARM_COMMON_SHA256_H_

#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/string_view.h"

namespace skipswarm::common {

std::string Sha256(absl::string_view bytes);
std::string Sha256(const absl::Cord& payload);

}  // namespace skipswarm::common

#endif  // SKIPSWARM_COMMON_SHA256_H_
