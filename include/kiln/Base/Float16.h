/// \file
/// 16-bit floating-point storage types. Arithmetic converts to float, computes, and rounds
/// back (round to nearest even), which is how the Interpreter defines float16 and bfloat16
/// results: every operation is rounded once, like a device without 16-bit accumulation.
#ifndef KILN_BASE_FLOAT16_H
#define KILN_BASE_FLOAT16_H

#include <cstdint>
#include <cstring>

namespace kiln {

/// IEEE 754 binary16.
class float16 {
public:
  float16() = default;
  float16(float f) : bits_(fromFloat(f)) {}
  operator float() const { return toFloat(bits_); }
  uint16_t bits() const { return bits_; }
  static float16 fromBits(uint16_t b) {
    float16 h;
    h.bits_ = b;
    return h;
  }
  static uint16_t fromFloat(float f);
  static float toFloat(uint16_t h);

private:
  uint16_t bits_ = 0;
};

/// bfloat16: the upper 16 bits of an IEEE binary32, rounded to nearest even.
class bfloat16 {
public:
  bfloat16() = default;
  bfloat16(float f) : bits_(fromFloat(f)) {}
  operator float() const { return toFloat(bits_); }
  uint16_t bits() const { return bits_; }
  static bfloat16 fromBits(uint16_t b) {
    bfloat16 h;
    h.bits_ = b;
    return h;
  }
  static uint16_t fromFloat(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) // NaN: keep it quiet, keep the sign.
      return uint16_t((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1u);
    return uint16_t(u >> 16);
  }
  static float toFloat(uint16_t b) {
    uint32_t u = uint32_t(b) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }

private:
  uint16_t bits_ = 0;
};

} // namespace kiln

#endif // KILN_BASE_FLOAT16_H
