// CRC-32C (Castagnoli), the checksum of wire payloads (proto TensorMeta
// payload_crc32c) and checkpoints. Uses the SSE4.2 instruction when the CPU
// has it, a table otherwise; both give the same value.
//
//   uint32_t crc = Crc32c(bytes.data(), bytes.size());
//   crc = Crc32cExtend(crc, more.data(), more.size());   // streaming
//
// Thread rule: pure functions.
#ifndef SKIPSWARM_MODEL_CRC32C_H_
#define SKIPSWARM_MODEL_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace skipswarm::model {

// CRC of data[0, n) continuing from `crc` (the CRC of the bytes before).
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n);
inline uint32_t Crc32c(const void* data, size_t n) { return Crc32cExtend(0, data, n); }

// The portable table implementation (exposed for tests).
uint32_t Crc32cExtendPortable(uint32_t crc, const void* data, size_t n);

}  // namespace skipswarm::model

#endif  // SKIPSWARM_MODEL_CRC32C_H_
