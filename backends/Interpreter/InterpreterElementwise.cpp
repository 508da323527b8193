// Element-wise kernels of the Interpreter: activations, unary math, binary arithmetic,
// comparisons and Select. Float16 and BFloat16 are computed in float and rounded once;
// int8 quantized Add/Sub/Mul/Max/Min/Relu go through real values (double) and requantize
// to the result's scale and offset; integer arithmetic wraps; integer division truncates
// toward zero and reports division by zero as an Error.

#include "InterpreterUtil.h"

#include "kiln/Graph/FusedActivation.h"

#include <algorithm>
#include <cmath>

namespace kiln {

using namespace interp;

namespace {

// ------------------------------------------------------------------ unary

/// Applies \p fn (float -> float) to every element of a float-kind tensor.
template <typename Fn>
Error mapFloat(InterpreterRun &R, const Instruction *I, const Value *dest, const Value *src,
               Fn fn) {
  Tensor &out = R.getTensor(dest);
  const Tensor &in = R.getTensor(src);
  KILN_RETURN_IF_ERR(checkSameKind(I, out, in));
  KILN_RETURN_IF_ERR(checkSameSize(I, out, in));
  return dispatchFloat(I, in.getElementType(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *x = elems<T>(in);
    T *y = elems<T>(out);
    for (size_t i = 0, e = in.size(); i < e; i++)
      y[i] = T(fn(float(x[i])));
    return Error::success();
  });
}

/// Applies \p fn to every element of a float or integer tensor; \p fn receives float for
/// float kinds and the integer itself for int32/int64.
template <typename Fn>
Error mapNumeric(InterpreterRun &R, const Instruction *I, const Value *dest, const Value *src,
                 Fn fn) {
  Tensor &out = R.getTensor(dest);
  const Tensor &in = R.getTensor(src);
  KILN_RETURN_IF_ERR(checkSameKind(I, out, in));
  KILN_RETURN_IF_ERR(checkSameSize(I, out, in));
  return dispatchNumeric(I, in.getElementType(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *x = elems<T>(in);
    T *y = elems<T>(out);
    for (size_t i = 0, e = in.size(); i < e; i++) {
      if constexpr (std::is_integral_v<T>)
        y[i] = fn(x[i]);
      else
        y[i] = T(fn(float(x[i])));
    }
    return Error::success();
  });
}

float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

/// NaN stays NaN (std::max/std::min would drop it depending on the argument order).
float clip(float x, float lo, float hi) {
  if (std::isnan(x))
    return x;
  return std::min(std::max(x, lo), hi);
}

// ------------------------------------------------------------------ binary

/// Binary operators: onFloat for float kinds; onInt (wrapping; false on an invalid operand)
/// for int32/int64 where kIntegers; onReal for int8 quantized where kQuantized.
struct AddOp {
  static constexpr bool kIntegers = true, kQuantized = true;
  static float onFloat(float a, float b) { return a + b; }
  template <typename T> static bool onInt(T a, T b, T &r) {
    r = wrapAdd(a, b);
    return true;
  }
  static double onReal(double a, double b) { return a + b; }
};

struct SubOp {
  static constexpr bool kIntegers = true, kQuantized = true;
  static float onFloat(float a, float b) { return a - b; }
  template <typename T> static bool onInt(T a, T b, T &r) {
    r = wrapSub(a, b);
    return true;
  }
  static double onReal(double a, double b) { return a - b; }
};

struct MulOp {
  static constexpr bool kIntegers = true, kQuantized = true;
  static float onFloat(float a, float b) { return a * b; }
  template <typename T> static bool onInt(T a, T b, T &r) {
    r = wrapMul(a, b);
    return true;
  }
  static double onReal(double a, double b) { return a * b; }
};

/// Integer division truncates toward zero; MIN / -1 wraps to MIN (it traps on x86 if
/// computed directly); division by zero is reported.
struct DivOp {
  static constexpr bool kIntegers = true, kQuantized = false;
  static float onFloat(float a, float b) { return a / b; }
  template <typename T> static bool onInt(T a, T b, T &r) {
    if (b == 0)
      return false;
    r = b == -1 ? wrapNeg(a) : T(a / b);
    return true;
  }
};

/// Max and Min propagate NaN (like numpy.maximum and torch.maximum).
struct MaxOp {
  static constexpr bool kIntegers = true, kQuantized = true;
  static float onFloat(float a, float b) {
    if (std::isnan(a) || std::isnan(b))
      return std::nanf("");
    return std::max(a, b);
  }
  template <typename T> static bool onInt(T a, T b, T &r) {
    r = std::max(a, b);
    return true;
  }
  static double onReal(double a, double b) { return std::max(a, b); }
};

struct MinOp {
  static constexpr bool kIntegers = true, kQuantized = true;
  static float onFloat(float a, float b) {
    if (std::isnan(a) || std::isnan(b))
      return std::nanf("");
    return std::min(a, b);
  }
  template <typename T> static bool onInt(T a, T b, T &r) {
    r = std::min(a, b);
    return true;
  }
  static double onReal(double a, double b) { return std::min(a, b); }
};

/// Integer powers are exact (wrapping); a negative exponent gives the truncated
/// reciprocal power, 1 / a^-b: 1 for a == 1, +-1 for a == -1, 0 otherwise; 0^negative is
/// an error.
struct PowOp {
  static constexpr bool kIntegers = true, kQuantized = false;
  static float onFloat(float a, float b) { return std::pow(a, b); }
  template <typename T> static bool onInt(T a, T b, T &r) {
    if (b < 0) {
      if (a == 0)
        return false;
      r = a == 1 ? T(1) : a == -1 ? T((b % 2) ? -1 : 1) : T(0);
      return true;
    }
    T acc = 1, base = a;
    for (T e = b; e > 0; e >>= 1) {
      if (e & 1)
        acc = wrapMul(acc, base);
      base = wrapMul(base, base);
    }
    r = acc;
    return true;
  }
};

/// PRelu as a binary operator of (Input, Slope).
struct PReluOp {
  static constexpr bool kIntegers = false, kQuantized = false;
  static float onFloat(float x, float slope) { return x >= 0.0f ? x : slope * x; }
};

/// int8 quantized binary operator: dequantize both operands with their own parameters,
/// combine the real values, quantize with the result's.
template <typename Op>
Error quantizedBinary(const Tensor &lhs, const Tensor &rhs, Tensor &out) {
  const Type &lt = lhs.getType(), &rt = rhs.getType(), &ot = out.getType();
  const int8_t *a = elems<int8_t>(lhs), *b = elems<int8_t>(rhs);
  int8_t *y = elems<int8_t>(out);
  for (size_t i = 0, e = out.size(); i < e; i++) {
    double r = Op::onReal(dequantizeValue(a[i], lt.scale, lt.offset),
                          dequantizeValue(b[i], rt.scale, rt.offset));
    y[i] = quantizeValue<int8_t>(r, ot.scale, ot.offset);
  }
  return Error::success();
}

template <typename Op>
Error binary(InterpreterRun &R, const Instruction *I, const Value *dest, const Value *lhsV,
             const Value *rhsV) {
  Tensor &out = R.getTensor(dest);
  const Tensor &lhs = R.getTensor(lhsV);
  const Tensor &rhs = R.getTensor(rhsV);
  KILN_RETURN_IF_ERR(checkSameKind(I, out, lhs));
  KILN_RETURN_IF_ERR(checkSameKind(I, out, rhs));
  KILN_RETURN_IF_ERR(checkSameSize(I, out, lhs));
  KILN_RETURN_IF_ERR(checkSameSize(I, out, rhs));
  ElemKind k = out.getElementType();
  if constexpr (Op::kQuantized) {
    if (k == ElemKind::Int8Q)
      return quantizedBinary<Op>(lhs, rhs, out);
  }
  return dispatchNumeric(I, k, [&](auto tag) -> Error {
    using T = typename decltype(tag)::type;
    const T *a = elems<T>(lhs), *b = elems<T>(rhs);
    T *y = elems<T>(out);
    if constexpr (std::is_integral_v<T>) {
      if constexpr (!Op::kIntegers) {
        return unsupportedKinds(I);
      } else {
        for (size_t i = 0, e = out.size(); i < e; i++)
          if (!Op::onInt(a[i], b[i], y[i]))
            return makeError(ErrorCode::InvalidArgument, I->getKindName(), " '", I->getName(),
                             "': integer division by zero at element ", i, " (", a[i], " / ",
                             b[i], ")");
      }
    } else {
      for (size_t i = 0, e = out.size(); i < e; i++)
        y[i] = T(Op::onFloat(float(a[i]), float(b[i])));
    }
    return Error::success();
  });
}

/// Writes the Bool result of comparing LHS and RHS element-wise with \p cmp (float kinds
/// compare as float, so NaN compares false).
template <typename Cmp>
Error compare(InterpreterRun &R, const Instruction *I, const Value *dest, const Value *lhsV,
              const Value *rhsV, Cmp cmp) {
  Tensor &out = R.getTensor(dest);
  const Tensor &lhs = R.getTensor(lhsV);
  const Tensor &rhs = R.getTensor(rhsV);
  if (out.getElementType() != ElemKind::Bool)
    return unsupportedKinds(I);
  KILN_RETURN_IF_ERR(checkSameKind(I, lhs, rhs));
  KILN_RETURN_IF_ERR(checkSameSize(I, out, lhs));
  KILN_RETURN_IF_ERR(checkSameSize(I, out, rhs));
  return dispatchNumeric(I, lhs.getElementType(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *a = elems<T>(lhs), *b = elems<T>(rhs);
    bool *y = elems<bool>(out);
    for (size_t i = 0, e = out.size(); i < e; i++) {
      if constexpr (std::is_integral_v<T>)
        y[i] = cmp(a[i], b[i]);
      else
        y[i] = cmp(float(a[i]), float(b[i]));
    }
    return Error::success();
  });
}

} // namespace

// ------------------------------------------------------------------ activations

Error InterpreterRun::fwdRelu(const ReluInst *I) {
  Tensor &out = getTensor(I->getDest());
  const Tensor &in = getTensor(I->getInput());
  if (in.getElementType() == ElemKind::Int8Q && out.getElementType() == ElemKind::Int8Q) {
    KILN_RETURN_IF_ERR(checkSameSize(I, out, in));
    const Type &it = in.getType(), &ot = out.getType();
    const int8_t *x = elems<int8_t>(in);
    int8_t *y = elems<int8_t>(out);
    for (size_t i = 0, e = in.size(); i < e; i++)
      y[i] = quantizeValue<int8_t>(std::max(dequantizeValue(x[i], it.scale, it.offset), 0.0),
                                   ot.scale, ot.offset);
    return Error::success();
  }
  return mapFloat(*this, I, I->getDest(), I->getInput(),
                  [](float x) { return std::isnan(x) ? x : std::max(x, 0.0f); });
}

Error InterpreterRun::fwdSigmoid(const SigmoidInst *I) {
  return mapFloat(*this, I, I->getDest(), I->getInput(), sigmoid);
}

Error InterpreterRun::fwdTanh(const TanhInst *I) {
  return mapFloat(*this, I, I->getDest(), I->getInput(), [](float x) { return std::tanh(x); });
}

Error InterpreterRun::fwdGelu(const GeluInst *I) {
  if (I->getApproximate()) {
    const float kSqrt2OverPi = 0.7978845608028654f;
    return mapFloat(*this, I, I->getDest(), I->getInput(), [=](float x) {
      return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
    });
  }
  const float kSqrtHalf = 0.7071067811865476f;
  return mapFloat(*this, I, I->getDest(), I->getInput(),
                  [=](float x) { return 0.5f * x * (1.0f + std::erf(x * kSqrtHalf)); });
}

Error InterpreterRun::fwdHardSwish(const HardSwishInst *I) {
  return mapFloat(*this, I, I->getDest(), I->getInput(),
                  [](float x) { return x * clip(x + 3.0f, 0.0f, 6.0f) / 6.0f; });
}

Error InterpreterRun::fwdSwish(const SwishInst *I) {
  return mapFloat(*this, I, I->getDest(), I->getInput(), [](float x) { return x * sigmoid(x); });
}

Error InterpreterRun::fwdClip(const ClipInst *I) {
  float lo = I->getMin(), hi = I->getMax();
  return mapFloat(*this, I, I->getDest(), I->getInput(),
                  [=](float x) { return clip(x, lo, hi); });
}

Error InterpreterRun::fwdLeakyRelu(const LeakyReluInst *I) {
  float alpha = I->getAlpha();
  return mapFloat(*this, I, I->getDest(), I->getInput(),
                  [=](float x) { return x >= 0.0f ? x : alpha * x; });
}

Error InterpreterRun::fwdPRelu(const PReluInst *I) {
  return binary<PReluOp>(*this, I, I->getDest(), I->getInput(), I->getSlope());
}

// ------------------------------------------------------------------ unary math

Error InterpreterRun::fwdNeg(const NegInst *I) {
  return mapNumeric(*this, I, I->getDest(), I->getInput(), [](auto x) {
    if constexpr (std::is_integral_v<decltype(x)>)
      return wrapNeg(x);
    else
      return -x;
  });
}

/// |MIN| of an integer kind wraps to MIN, as in numpy.
Error InterpreterRun::fwdAbs(const AbsInst *I) {
  return mapNumeric(*this, I, I->getDest(), I->getInput(), [](auto x) {
    if constexpr (std::is_integral_v<decltype(x)>)
      return x < 0 ? wrapNeg(x) : x;
    else
      return std::fabs(x);
  });
}

Error InterpreterRun::fwdExp(const ExpInst *I) {
  return mapFloat(*this, I, I->getDest(), I->getInput(), [](float x) { return std::exp(x); });
}

Error InterpreterRun::fwdLog(const LogInst *I) {
  return mapFloat(*this, I, I->getDest(), I->getInput(), [](float x) { return std::log(x); });
}

Error InterpreterRun::fwdSqrt(const SqrtInst *I) {
  return mapFloat(*this, I, I->getDest(), I->getInput(), [](float x) { return std::sqrt(x); });
}

Error InterpreterRun::fwdRsqrt(const RsqrtInst *I) {
  return mapFloat(*this, I, I->getDest(), I->getInput(),
                  [](float x) { return 1.0f / std::sqrt(x); });
}

Error InterpreterRun::fwdReciprocal(const ReciprocalInst *I) {
  return mapFloat(*this, I, I->getDest(), I->getInput(), [](float x) { return 1.0f / x; });
}

Error InterpreterRun::fwdErf(const ErfInst *I) {
  return mapFloat(*this, I, I->getDest(), I->getInput(), [](float x) { return std::erf(x); });
}

Error InterpreterRun::fwdFloor(const FloorInst *I) {
  return mapFloat(*this, I, I->getDest(), I->getInput(), [](float x) { return std::floor(x); });
}

Error InterpreterRun::fwdCeil(const CeilInst *I) {
  return mapFloat(*this, I, I->getDest(), I->getInput(), [](float x) { return std::ceil(x); });
}

Error InterpreterRun::fwdRound(const RoundInst *I) {
  return mapFloat(*this, I, I->getDest(), I->getInput(),
                  [](float x) { return float(roundHalfEven(x)); });
}

// ------------------------------------------------------------------ arithmetic

Error InterpreterRun::fwdAdd(const AddInst *I) {
  return binary<AddOp>(*this, I, I->getDest(), I->getLHS(), I->getRHS());
}

Error InterpreterRun::fwdSub(const SubInst *I) {
  return binary<SubOp>(*this, I, I->getDest(), I->getLHS(), I->getRHS());
}

Error InterpreterRun::fwdMul(const MulInst *I) {
  return binary<MulOp>(*this, I, I->getDest(), I->getLHS(), I->getRHS());
}

Error InterpreterRun::fwdDiv(const DivInst *I) {
  return binary<DivOp>(*this, I, I->getDest(), I->getLHS(), I->getRHS());
}

Error InterpreterRun::fwdMax(const MaxInst *I) {
  return binary<MaxOp>(*this, I, I->getDest(), I->getLHS(), I->getRHS());
}

Error InterpreterRun::fwdMin(const MinInst *I) {
  return binary<MinOp>(*this, I, I->getDest(), I->getLHS(), I->getRHS());
}

Error InterpreterRun::fwdPow(const PowInst *I) {
  return binary<PowOp>(*this, I, I->getDest(), I->getLHS(), I->getRHS());
}

// ------------------------------------------------------------------ ONNX breadth

Error InterpreterRun::fwdSin(const SinInst *I) {
  return mapFloat(*this, I, I->getDest(), I->getInput(), [](float x) { return std::sin(x); });
}
Error InterpreterRun::fwdCos(const CosInst *I) {
  return mapFloat(*this, I, I->getDest(), I->getInput(), [](float x) { return std::cos(x); });
}
Error InterpreterRun::fwdTan(const TanInst *I) {
  return mapFloat(*this, I, I->getDest(), I->getInput(), [](float x) { return std::tan(x); });
}
Error InterpreterRun::fwdAsin(const AsinInst *I) {
  return mapFloat(*this, I, I->getDest(), I->getInput(), [](float x) { return std::asin(x); });
}
Error InterpreterRun::fwdAcos(const AcosInst *I) {
  return mapFloat(*this, I, I->getDest(), I->getInput(), [](float x) { return std::acos(x); });
}
Error InterpreterRun::fwdAtan(const AtanInst *I) {
  return mapFloat(*this, I, I->getDest(), I->getInput(), [](float x) { return std::atan(x); });
}
Error InterpreterRun::fwdSinh(const SinhInst *I) {
  return mapFloat(*this, I, I->getDest(), I->getInput(), [](float x) { return std::sinh(x); });
}
Error InterpreterRun::fwdCosh(const CoshInst *I) {
  return mapFloat(*this, I, I->getDest(), I->getInput(), [](float x) { return std::cosh(x); });
}
Error InterpreterRun::fwdAsinh(const AsinhInst *I) {
  return mapFloat(*this, I, I->getDest(), I->getInput(), [](float x) { return std::asinh(x); });
}
Error InterpreterRun::fwdAcosh(const AcoshInst *I) {
  return mapFloat(*this, I, I->getDest(), I->getInput(), [](float x) { return std::acosh(x); });
}
Error InterpreterRun::fwdAtanh(const AtanhInst *I) {
  return mapFloat(*this, I, I->getDest(), I->getInput(), [](float x) { return std::atanh(x); });
}

namespace {

/// A binary kernel over numeric kinds from two functions: \p onFloat (float) and
/// \p onInt (T, T, T &) -> bool, false for an operand the operator rejects (reported).
template <typename FF, typename FI>
Error binaryWith(InterpreterRun &R, const Instruction *I, const Value *dest, const Value *lhsV,
                 const Value *rhsV, bool floats, FF onFloat, FI onInt, const char *why) {
  Tensor &out = R.getTensor(dest);
  const Tensor &lhs = R.getTensor(lhsV);
  const Tensor &rhs = R.getTensor(rhsV);
  KILN_RETURN_IF_ERR(checkSameKind(I, out, lhs));
  KILN_RETURN_IF_ERR(checkSameKind(I, out, rhs));
  KILN_RETURN_IF_ERR(checkSameSize(I, out, lhs));
  KILN_RETURN_IF_ERR(checkSameSize(I, out, rhs));
  return dispatchNumeric(I, out.getElementType(), [&](auto tag) -> Error {
    using T = typename decltype(tag)::type;
    const T *a = elems<T>(lhs), *b = elems<T>(rhs);
    T *y = elems<T>(out);
    if constexpr (std::is_integral_v<T>) {
      for (size_t i = 0, e = out.size(); i < e; i++)
        if (!onInt(a[i], b[i], y[i]))
          return makeError(ErrorCode::InvalidArgument, I->getKindName(), " '", I->getName(),
                           "': ", why, " at element ", i, " (", a[i], ", ", b[i], ")");
    } else {
      if (!floats)
        return unsupportedKinds(I);
      for (size_t i = 0, e = out.size(); i < e; i++)
        y[i] = T(onFloat(float(a[i]), float(b[i])));
    }
    return Error::success();
  });
}

} // namespace

/// Fmod: C's fmod (sign of LHS), integers truncating; otherwise Python's % (sign of RHS).
/// MIN % -1 is 0 (computing it directly traps on x86).
Error InterpreterRun::fwdMod(const ModInst *I) {
  const bool fmod = I->getFmod();
  return binaryWith(
      *this, I, I->getDest(), I->getLHS(), I->getRHS(), true,
      [fmod](float a, float b) {
        float r = std::fmod(a, b);
        if (!fmod && r != 0.0f && ((r < 0.0f) != (b < 0.0f)))
          r += b;
        return r;
      },
      [fmod](auto a, auto b, auto &r) {
        if (b == 0)
          return false;
        using T = std::remove_reference_t<decltype(r)>;
        T m = b == -1 ? T(0) : T(a % b);
        if (!fmod && m != 0 && ((m < 0) != (b < 0)))
          m = T(m + b);
        r = m;
        return true;
      },
      "integer modulo by zero");
}

/// On the unsigned bit pattern of the kind (ONNX's uint tensors are stored widened).
Error InterpreterRun::fwdBitShift(const BitShiftInst *I) {
  const bool left = I->getLeft();
  return binaryWith(
      *this, I, I->getDest(), I->getLHS(), I->getRHS(), false, [](float a, float) { return a; },
      [left](auto a, auto b, auto &r) {
        using T = std::remove_reference_t<decltype(r)>;
        using U = std::make_unsigned_t<T>;
        constexpr int64_t kBits = int64_t(sizeof(T) * 8);
        if (b < 0 || int64_t(b) >= kBits)
          r = 0;
        else
          r = T(left ? U(U(a) << unsigned(b)) : U(U(a) >> unsigned(b)));
        return true;
      },
      "bit shift");
}

// ------------------------------------------------------------------ comparisons

Error InterpreterRun::fwdCmpEQ(const CmpEQInst *I) {
  return compare(*this, I, I->getDest(), I->getLHS(), I->getRHS(),
                 [](auto a, auto b) { return a == b; });
}

Error InterpreterRun::fwdCmpLT(const CmpLTInst *I) {
  return compare(*this, I, I->getDest(), I->getLHS(), I->getRHS(),
                 [](auto a, auto b) { return a < b; });
}

Error InterpreterRun::fwdCmpLTE(const CmpLTEInst *I) {
  return compare(*this, I, I->getDest(), I->getLHS(), I->getRHS(),
                 [](auto a, auto b) { return a <= b; });
}

/// Copies whole elements (any kind); quantized operands whose parameters differ from the
/// result's are requantized first.
Error InterpreterRun::fwdSelect(const SelectInst *I) {
  Tensor &out = getTensor(I->getDest());
  const Tensor &cond = getTensor(I->getCond());
  const Tensor &lhs = getTensor(I->getLHS());
  const Tensor &rhs = getTensor(I->getRHS());
  if (cond.getElementType() != ElemKind::Bool)
    return unsupportedKinds(I);
  KILN_RETURN_IF_ERR(checkSameKind(I, out, lhs));
  KILN_RETURN_IF_ERR(checkSameKind(I, out, rhs));
  KILN_RETURN_IF_ERR(checkSameSize(I, out, cond));
  KILN_RETURN_IF_ERR(checkSameSize(I, out, lhs));
  KILN_RETURN_IF_ERR(checkSameSize(I, out, rhs));
  Tensor lhsScratch, rhsScratch;
  KILN_ASSIGN_OR_RETURN(const Tensor *l, withQuantParamsOf(I, lhs, out.getType(), lhsScratch));
  KILN_ASSIGN_OR_RETURN(const Tensor *r, withQuantParamsOf(I, rhs, out.getType(), rhsScratch));
  const bool *c = elems<bool>(cond);
  const size_t bytes = out.getType().elemBytes();
  char *y = out.getUnsafePtr();
  for (size_t i = 0, e = out.size(); i < e; i++)
    std::memmove(y + i * bytes, (c[i] ? l : r)->getUnsafePtr() + i * bytes, bytes);
  return Error::success();
}

namespace interp {

namespace {

float activate(FusedActivation act, float x, float alpha, float beta) {
  switch (act) {
  case FusedActivation::None:
    return x;
  case FusedActivation::Relu:
    return x > 0 ? x : 0.0f;
  case FusedActivation::Clip:
    return std::min(std::max(x, alpha), beta);
  case FusedActivation::LeakyRelu:
    return x >= 0 ? x : alpha * x;
  case FusedActivation::Sigmoid:
    return 1.0f / (1.0f + std::exp(-x));
  case FusedActivation::Tanh:
    return std::tanh(x);
  case FusedActivation::Swish:
    return x / (1.0f + std::exp(-x));
  case FusedActivation::HardSwish:
    return x * std::min(std::max(alpha * x + beta, 0.0f), 1.0f);
  case FusedActivation::HardSigmoid:
    return std::min(std::max(alpha * x + beta, 0.0f), 1.0f);
  case FusedActivation::Gelu:
    return float(0.5 * double(x) * (1.0 + std::erf(double(x) / std::sqrt(2.0))));
  case FusedActivation::GeluTanh: {
    double d = x;
    return float(0.5 * d * (1.0 + std::tanh(0.79788456080286536 * (d + 0.044715 * d * d * d))));
  }
  }
  return x; // not reached: the switch covers every activation
}

} // namespace

/// The epilogue of a fused instruction on its result \p t: the residual \p res (null for
/// none) added, then the activation.
Error applyEpilogue(const Instruction *I, Tensor &t, const Tensor *res,
                    const std::string &actName, float alpha, float beta) {
  if (!isFloatKind(t.getElementType()) || (res && res->getType() != t.getType()))
    return unsupportedKinds(I);
  std::optional<FusedActivation> parsed = parseFusedActivation(actName);
  if (!parsed)
    return makeError(ErrorCode::InvalidArgument, "Interpreter: activation '", actName, "' of '",
                     I->getName(), "' is not one of ", fusedActivationNames());
  const FusedActivation act = *parsed;
  if (t.getElementType() == ElemKind::Float) {
    auto h = t.getHandle<float>();
    if (res) {
      auto r = res->getHandle<float>();
      for (size_t i = 0, e = t.size(); i < e; i++)
        h.raw(i) = activate(act, h.raw(i) + r.raw(i), alpha, beta);
    } else {
      for (size_t i = 0, e = t.size(); i < e; i++)
        h.raw(i) = activate(act, h.raw(i), alpha, beta);
    }
    return Error::success();
  }
  // 16-bit kinds: computed in float and rounded when stored, after the Add and after the
  // activation, as the unfused Add and activation would.
  for (size_t i = 0, e = t.size(); i < e; i++) {
    if (res)
      t.setFromDouble(i, float(t.getAsDouble(i)) + float(res->getAsDouble(i)));
    t.setFromDouble(i, activate(act, float(t.getAsDouble(i)), alpha, beta));
  }
  return Error::success();
}

Expected<RealActivation> realActivation(const Instruction *I, const std::string &act,
                                        float alpha, float beta) {
  std::optional<FusedActivation> a = parseFusedActivation(act);
  RealActivation r;
  if (a == FusedActivation::None)
    return r;
  r.clamps = true;
  if (a == FusedActivation::Relu) {
    r.lo = 0.0, r.hi = std::numeric_limits<double>::infinity();
    return r;
  }
  if (a == FusedActivation::Clip && alpha <= beta) {
    r.lo = alpha, r.hi = beta;
    return r;
  }
  return makeError(ErrorCode::InvalidArgument, "Interpreter: ", I->getKindName(), " '",
                   I->getName(), "' of result ", I->getType()->toString(), ": activation '",
                   act, "' (Alpha ", alpha, ", Beta ", beta,
                   ") is not None, Relu or a Clip with Alpha <= Beta");
}

} // namespace interp

} // namespace kiln
