// float16 weights held halved (CodegenOptions::halfWeights). A network converted to fp16
// computes its convolutions and fully-connected layers on float32 (the graph step
// widen-half-floats: each fp16 Constant operand becomes a float32 Constant, exactly); the
// weights of such a layer are then float32 values that are all float16 values, and are
// stored here as float16, in the kernel's packed layout, for the kernels that widen them as
// they load them (libjit_conv2d_f16w_*, libjit_fc_f16w_*, libjit_fc_row_f16w_*).
#include "Emitter.h"

#include "kiln/Base/Float16.h"

#include <cstring>

namespace kiln::cpu {

namespace {

/// Sets \p h to the float16 bits of \p f and returns true when \p f is a float16 value (its
/// round trip through float16 gives its bits back; a NaN only when it is the canonical
/// quiet one). Normal halves, nearly every weight, by their bits (exponent within float16's
/// normal range, the 13 mantissa bits float16 lacks zero); the others through
/// kiln::float16, so that a network's weights are checked and narrowed at memory speed.
inline bool halfBitsOf(float f, uint16_t &h) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(float));
  const uint32_t exp = (u >> 23) & 0xffu; // float16's normal exponents 1..30: 113..142 here
  if (exp >= 113 && exp <= 142 && (u & 0x1fffu) == 0) {
    h = uint16_t(((u >> 16) & 0x8000u) | ((exp - 112) << 10) | ((u >> 13) & 0x3ffu));
    return true;
  }
  const uint16_t b = float16::fromFloat(f);
  const float back = float16::toFloat(b);
  if (std::memcmp(&back, &f, sizeof(float)) != 0)
    return false;
  h = b;
  return true;
}

/// True when every element of the float32 tensor \p t is a float16 value (halfBitsOf).
bool allHalfValues(const Tensor &t) {
  const float *p = reinterpret_cast<const float *>(t.getUnsafePtr());
  uint16_t h;
  for (size_t i = 0; i < t.size(); i++)
    if (!halfBitsOf(p[i], h))
      return false;
  return true;
}

} // namespace

bool Emitter::storesHalf(const WeightVar *w) {
  if (!opts_.halfWeights || !w || !w->isConstant() || w->getType()->kind != ElemKind::Float)
    return false;
  auto it = halfExact_.find(w);
  if (it != halfExact_.end())
    return it->second;
  // A payload released by an earlier packing (another layout) is not looked at: the
  // caller's constPacked then reports it as it does for float32 weights.
  const Tensor &t = cast<Constant>(w->getOrigin())->getPayload();
  bool half = t.size() > 0 && t.getUnsafePtr() && allHalfValues(t);
  halfExact_[w] = half;
  return half;
}

Expected<uint64_t> Emitter::constPackedHalf(const WeightVar *w, WeightPacking packing,
                                            int64_t groups, int64_t rows, int64_t cols) {
  if (packing != WeightPacking::GemmAHalf && packing != WeightPacking::GemmBHalf &&
      packing != WeightPacking::GemmBTransposedHalf && packing != WeightPacking::NoneHalf)
    return makeError(ErrorCode::Internal, "CPU backend: constant '", w->getName(),
                     "': no float16 form of this weight packing");
  auto key = std::make_tuple(w, packing, groups);
  auto it = constCache_.find(key);
  if (it != constCache_.end())
    return it->second;
  KILN_ASSIGN_OR_RETURN(const Tensor *payload, constPayload(w));
  const float *src = reinterpret_cast<const float *>(payload->getUnsafePtr());
  // Packed as float32 (the layout and zero padding the float32 kernels read), then narrowed;
  // row-major weights are narrowed from the graph's payload directly (a one-row FC's may be
  // hundreds of MB: no float32 copy of them on top).
  std::vector<float> packed;
  if (packing != WeightPacking::NoneHalf) {
    const WeightPacking f32 = packing == WeightPacking::GemmAHalf ? WeightPacking::GemmA
                              : packing == WeightPacking::GemmBHalf
                                  ? WeightPacking::GemmB
                                  : WeightPacking::GemmBTransposed;
    packed.resize(size_t(packedFloats(f32, groups, rows, cols)));
    packFloats(f32, packed.data(), src, groups, rows, cols);
  }
  const float *from = packing == WeightPacking::NoneHalf ? src : packed.data();
  const size_t count = packing == WeightPacking::NoneHalf ? payload->size() : packed.size();
  const uint64_t bytes = uint64_t(count) * 2;
  uint64_t off = alignUp(consts_.size());
  if (!consts_.resize(off + alignUp(std::max<uint64_t>(bytes, 1))))
    return makeError(ErrorCode::OutOfMemory, "CPU backend: cannot grow the constant arena by ",
                     bytes, " bytes");
  auto *dst = reinterpret_cast<uint16_t *>(consts_.data() + off);
  for (size_t i = 0; i < count; i++)
    if (!halfBitsOf(from[i], dst[i])) // storesHalf(w): every value is one (padding: zeros)
      return makeError(ErrorCode::Internal, "CPU backend: constant '", w->getName(),
                       "' has a value that is not a float16");
  constCache_[key] = off;
  releaseIfPacked(w);
  return off;
}

} // namespace kiln::cpu
