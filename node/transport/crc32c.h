// CRC-32C (Castagnoli, iSCSI polynomial 0x1EDC6F41, reflected), the checksum
// carried in TensorMeta.payload_crc32c. Uses the SSE4.2 crc32 instruction
// when the CPU has it and a byte table otherwise; both give the same value.
//
//   uint32_t crc = Crc32c(bytes);
//   crc = Crc32cExtend(crc, more);          // streaming, same as one call
//   uint32_t whole = Crc32c(frame.payload); // absl::Cord, chunk by chunk
//
// Thread rule: pure functions.
#ifndef SKIPSWARM_NODE_TRANSPORT_CRC32C_H_
#define SKIPSWARM_NODE_TRANSPORT_CRC32C_H_

#include <cstdint>

#include "absl/strings/cord.h"
#include "absl/strings/string_view.h"

namespace skipswarm::node {

// CRC of `data` continuing from `crc` (the CRC of the bytes before it).
uint32_t Crc32cExtend(uint32_t crc, absl::string_view data);
inline uint32_t Crc32c(absl::string_view data) { return Crc32cExtend(0, data); }
uint32_t Crc32c(const absl::Cord& data);

// The table implementation, exposed so tests can compare both paths.
uint32_t Crc32cExtendPortable(uint32_t crc, absl::string_view data);

}  // namespace skipswarm::node

#endif  // SKIPSWARM_NODE_TRANSPORT_CRC32C_H_
