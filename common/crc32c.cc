#include "common/crc32c.h"

#include <nmmintrin.h>

#include <array>
#include <cstring>

namespace skipswarm::common {
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

// The crc32 instruction has a 3-cycle latency but issues every cycle, so
// long inputs run three independent lanes of kLane bytes and merge them:
// for the raw CRC register, update(s, X‖Y) = shift_|Y|(update(s, X)) ^
// update(0, Y), where shift_L (multiply by x^(8L) mod P) is linear and so
// is tabulated per byte of the register.
constexpr size_t kLane = 8192;

struct ShiftTable {
  uint32_t t[4][256];
  uint32_t Apply(uint32_t s) const {
    return t[0][s & 0xFF] ^ t[1][(s >> 8) & 0xFF] ^ t[2][(s >> 16) & 0xFF] ^
           t[3][s >> 24];
  }
};

__attribute__((target("sse4.2"))) ShiftTable MakeShiftTable(size_t bytes) {
  ShiftTable table;
  for (int byte = 0; byte < 4; ++byte) {
    for (uint32_t v = 0; v < 256; ++v) {
      uint64_t state = v << (8 * byte);
      for (size_t i = 0; i < bytes; i += 8) state = _mm_crc32_u64(state, 0);
      table.t[byte][v] = static_cast<uint32_t>(state);
    }
  }
  return table;
}

__attribute__((target("sse4.2"))) uint32_t ExtendHardware(
    uint32_t crc, absl::string_view data) {
  const char* p = data.data();
  size_t n = data.size();
  uint64_t state = ~crc;
  if (n >= 3 * kLane) {
    static const ShiftTable shift1 = MakeShiftTable(kLane);
    static const ShiftTable shift2 = MakeShiftTable(2 * kLane);
    while (n >= 3 * kLane) {
      uint64_t a = state, b = 0, c = 0;
      for (size_t i = 0; i < kLane; i += 8) {
        uint64_t wa, wb, wc;
        std::memcpy(&wa, p + i, 8);
        std::memcpy(&wb, p + kLane + i, 8);
        std::memcpy(&wc, p + 2 * kLane + i, 8);
        a = _mm_crc32_u64(a, wa);
        b = _mm_crc32_u64(b, wb);
        c = _mm_crc32_u64(c, wc);
      }
      state = shift2.Apply(static_cast<uint32_t>(a)) ^
              shift1.Apply(static_cast<uint32_t>(b)) ^ static_cast<uint32_t>(c);
      p += 3 * kLane;
      n -= 3 * kLane;
    }
  }
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

}  // namespace skipswarm::common
