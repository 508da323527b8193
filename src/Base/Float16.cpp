#include "kiln/Base/Float16.h"

namespace kiln {

uint16_t float16::fromFloat(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000u;
  uint32_t absBits = u & 0x7fffffffu;
  if (absBits > 0x7f800000u) // NaN
    return uint16_t(sign | 0x7e00u);
  if (absBits >= 0x47800000u) // overflow (>= 65536 before rounding) or infinity
    return uint16_t(sign | 0x7c00u);
  if (absBits < 0x38800000u) { // result is subnormal or zero in binary16
    if (absBits < 0x33000000u) // below half the smallest subnormal: zero
      return uint16_t(sign);
    uint32_t exp = absBits >> 23;
    uint32_t mant = (absBits & 0x7fffffu) | 0x800000u;
    // value = mant * 2^(exp-150) = res * 2^-24, so res = mant >> (126 - exp).
    uint32_t shift = 126 - exp; // 14..24
    uint32_t res = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (res & 1u)))
      res++;
    return uint16_t(sign | res);
  }
  // Normal: rebias exponent, round mantissa from 23 to 10 bits (nearest even).
  uint32_t r = absBits - 0x38000000u; // exponent bias 127 -> 15
  uint32_t res = r >> 13;
  uint32_t rem = r & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (res & 1u)))
    res++; // may carry into the exponent, and to infinity: both correct
  return uint16_t(sign | res);
}

float float16::toFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t u;
  if (exp == 0) {
    if (mant == 0) {
      u = sign;
    } else { // subnormal: normalise
      exp = 127 - 15 + 1;
      while (!(mant & 0x400u)) {
        mant <<= 1;
        exp--;
      }
      mant &= 0x3ffu;
      u = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 0x1f) {
    u = sign | 0x7f800000u | (mant << 13);
  } else {
    u = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

} // namespace kiln
