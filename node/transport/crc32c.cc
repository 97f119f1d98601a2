#include "node/transport/crc32c.h"

#include <nmmintrin.h>

#include <array>
#include <cstring>

namespace skipswarm::node {
namespace {

constexpr uint32_t kPolyReflected = 0x82F63B78u;

std::array<uint32_t, 256> MakeTable() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t crc = i;
    for (int bit = 0; bit < 8; ++bit) {
      crc = (crc >> 1) ^ ((crc & 1u) ? kPolyReflected : 0u);
    }
    table[i] = crc;
  }
  return table;
}

__attribute__((target("sse4.2"))) uint32_t ExtendHardware(
    uint32_t crc, absl::string_view data) {
  const char* p = data.data();
  size_t n = data.size();
  uint64_t state = ~crc;
  while (n >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);  // unaligned-safe
    state = _mm_crc32_u64(state, word);
    p += 8;
    n -= 8;
  }
  uint32_t state32 = static_cast<uint32_t>(state);
  while (n > 0) {
    state32 = _mm_crc32_u8(state32, static_cast<uint8_t>(*p));
    ++p;
    --n;
  }
  return ~state32;
}

bool HasSse42() {
  static const bool has = __builtin_cpu_supports("sse4.2");
  return has;
}

}  // namespace

uint32_t Crc32cExtendPortable(uint32_t crc, absl::string_view data) {
  static const std::array<uint32_t, 256> table = MakeTable();
  uint32_t state = ~crc;
  for (unsigned char c : data) {
    state = table[(state ^ c) & 0xFFu] ^ (state >> 8);
  }
  return ~state;
}

uint32_t Crc32cExtend(uint32_t crc, absl::string_view data) {
  if (HasSse42()) return ExtendHardware(crc, data);
  return Crc32cExtendPortable(crc, data);
}

uint32_t Crc32c(const absl::Cord& data) {
  uint32_t crc = 0;
  for (absl::string_view chunk : data.Chunks()) crc = Crc32cExtend(crc, chunk);
  return crc;
}

}  // namespace skipswarm::node
