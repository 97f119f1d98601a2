// CRC-32C (Castagnoli, iSCSI polynomial 0x1EDC6F41, reflected), the checksum
// carried in TensorMeta.payload_crc32c. Uses the SSE4.2 crc32 instruction
// when the CPU has it and a byte table otherwise; both give the same value.
//
//   uint32_t crc = Crc32c(bytes);
//   crc = Crc32cExtend(crc, more);          // streaming, same as one call
//   uint32_t whole = Crc32c(frame.payload); // absl::Cord, chunk by chunk
//
// Thread rule: pure functions.
#ifndef SKIPSWARM_COMMON_CRC32C_H_
#define SKIPSWARM_COMMON_CRC32C_H_

#include <cstddef>
#include <cstdint>

#include "absl/strings/cord.h"
#include "absl/strings/string_view.h"

namespace skipswarm::common {

// CRC of `data` continuing from `crc` (the CRC of the bytes before it).
uint32_t Crc32cExtend(uint32_t crc, absl::string_view data);
inline uint32_t Crc32c(absl::string_view data) { return Crc32cExtend(0, data); }
uint32_t Crc32c(const absl::Cord& data);
// Pointer-and-length forms, for raw buffers (tensors, checkpoint files).
inline uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n) {
  return Crc32cExtend(crc, absl::string_view(static_cast<const char*>(data), n));
}
inline uint32_t Crc32c(const void* data, size_t n) { return Crc32cExtend(0, data, n); }

// The table implementation, exposed so tests can compare both paths.
uint32_t Crc32cExtendPortable(uint32_t crc, absl::string_view data);

}  // namespace skipswarm::common

#endif  // SKIPSWARM_COMMON_CRC32C_H_
