// Evaluation of small constant tensors during import, so that the subgraphs a model uses
// to compute shapes (Shape -> Gather -> Concat -> Reshape, Slice bounds...) become
// constants. Integer kinds are computed exactly in int64, floats in double.

#include "ONNXImporter.h"

#include <cmath>

namespace kiln::onnximport {

namespace {

bool isIntKind(ElemKind k) {
  return k == ElemKind::Int64I || k == ElemKind::Int32I || k == ElemKind::Bool ||
         k == ElemKind::Int8Q || k == ElemKind::UInt8Q || k == ElemKind::Int32Q;
}

/// Flat index into an operand of \p in dims for the output multi-index \p idx (numpy
/// broadcasting, right-aligned).
size_t broadcastSource(const std::vector<dim_t> &idx, const Dims &in) {
  size_t off = 0, stride = 1;
  size_t r = in.size(), ro = idx.size();
  for (size_t k = 0; k < r; k++) {
    size_t d = r - 1 - k;
    dim_t i = in[d] == 1 ? 0 : idx[ro - 1 - k];
    off += i * stride;
    stride *= in[d];
  }
  return off;
}

int64_t ipow(int64_t b, int64_t e) {
  if (e < 0)
    return b == 1 ? 1 : (b == -1 ? (e % 2 ? -1 : 1) : 0);
  int64_t r = 1;
  for (int64_t i = 0; i < e && i < 64; i++)
    r *= b;
  return r;
}

bool isCompare(FoldOp op) {
  return op == FoldOp::Equal || op == FoldOp::Less || op == FoldOp::LessOrEqual ||
         op == FoldOp::Greater || op == FoldOp::GreaterOrEqual;
}

} // namespace

std::vector<dim_t> unflatten(size_t i, const Dims &dims) {
  std::vector<dim_t> idx(dims.size());
  for (size_t k = dims.size(); k-- > 0;) {
    idx[k] = dims[k] ? i % dims[k] : 0;
    i = dims[k] ? i / dims[k] : 0;
  }
  return idx;
}

std::vector<int64_t> tensorToInts(const Tensor &t) {
  std::vector<int64_t> v(t.size());
  if (t.getElementType() == ElemKind::Int64I) {
    auto h = t.getHandle<int64_t>();
    for (size_t i = 0; i < v.size(); i++)
      v[i] = h.raw(i);
    return v;
  }
  for (size_t i = 0; i < v.size(); i++) {
    double d = t.getAsDouble(i);
    if (std::isnan(d))
      v[i] = 0;
    else if (d >= 9.2e18)
      v[i] = INT64_MAX;
    else if (d <= -9.2e18)
      v[i] = INT64_MIN;
    else
      v[i] = int64_t(d);
  }
  return v;
}

std::vector<double> tensorToDoubles(const Tensor &t) {
  std::vector<double> v(t.size());
  for (size_t i = 0; i < v.size(); i++)
    v[i] = t.getAsDouble(i);
  return v;
}

Tensor tensorFromInts(ElemKind k, const Dims &dims, const std::vector<int64_t> &v) {
  Tensor t(k, dims);
  if (k == ElemKind::Int64I) {
    auto h = t.getHandle<int64_t>();
    for (size_t i = 0; i < v.size(); i++)
      h.raw(i) = v[i];
  } else if (k == ElemKind::Bool) {
    auto h = t.getHandle<bool>();
    for (size_t i = 0; i < v.size(); i++)
      h.raw(i) = v[i] != 0;
  } else {
    for (size_t i = 0; i < v.size(); i++)
      t.setFromDouble(i, double(v[i]));
  }
  return t;
}

Tensor tensorFromDoubles(ElemKind k, const Dims &dims, const std::vector<double> &v) {
  Tensor t(k, dims);
  for (size_t i = 0; i < v.size(); i++)
    t.setFromDouble(i, v[i]);
  return t;
}

bool broadcastShapes(const Dims &a, const Dims &b, Dims &out) {
  size_t r = std::max(a.size(), b.size());
  if (r > kMaxDims)
    return false;
  std::vector<dim_t> o(r);
  for (size_t k = 0; k < r; k++) {
    dim_t da = k < a.size() ? a[a.size() - 1 - k] : 1;
    dim_t db = k < b.size() ? b[b.size() - 1 - k] : 1;
    if (da != db && da != 1 && db != 1)
      return false;
    o[r - 1 - k] = da == 1 ? db : da;
  }
  out = Dims(o);
  return true;
}

Tensor gatherElements(const Tensor &in, const Dims &outDims,
                      const std::function<size_t(size_t)> &src) {
  Tensor out(Type::withDims(in.getType(), outDims));
  size_t es = in.getType().elemBytes();
  const char *s = in.getUnsafePtr();
  char *d = out.getUnsafePtr();
  size_t e = out.size();
  auto copy = [&](auto tag) {
    using T = decltype(tag);
    const T *st = reinterpret_cast<const T *>(s);
    T *dt = reinterpret_cast<T *>(d);
    for (size_t i = 0; i < e; i++)
      dt[i] = st[src(i)];
  };
  switch (es) {
  case 1: copy(uint8_t()); break;
  case 2: copy(uint16_t()); break;
  case 4: copy(uint32_t()); break;
  case 8: copy(uint64_t()); break;
  default:
    for (size_t i = 0; i < e; i++)
      std::memcpy(d + i * es, s + src(i) * es, es);
  }
  return out;
}

Expected<Tensor> foldBinary(FoldOp op, const Tensor &a, const Tensor &b) {
  Dims od;
  if (!broadcastShapes(a.dims(), b.dims(), od))
    return makeError(ErrorCode::ModelParse, "shapes ", a.getType().toString(), " and ",
                     b.getType().toString(), " do not broadcast");
  ElemKind k = a.getElementType();
  ElemKind rk = isCompare(op) ? ElemKind::Bool : k;
  size_t n = od.product();
  if (isIntKind(k) || op == FoldOp::And || op == FoldOp::Or || op == FoldOp::Xor) {
    std::vector<int64_t> x = tensorToInts(a), y = tensorToInts(b), r(n);
    for (size_t i = 0; i < n; i++) {
      std::vector<dim_t> idx = unflatten(i, od);
      int64_t p = x[broadcastSource(idx, a.dims())], q = y[broadcastSource(idx, b.dims())];
      int64_t v = 0;
      switch (op) {
      case FoldOp::Add: v = int64_t(uint64_t(p) + uint64_t(q)); break;
      case FoldOp::Sub: v = int64_t(uint64_t(p) - uint64_t(q)); break;
      case FoldOp::Mul: v = int64_t(uint64_t(p) * uint64_t(q)); break;
      case FoldOp::Div:
      case FoldOp::Mod:
        if (q == 0 || (p == INT64_MIN && q == -1))
          return makeError(ErrorCode::ModelParse, "integer division by zero in a constant");
        if (op == FoldOp::Div) {
          v = p / q;
        } else {
          v = p % q;
          if (v != 0 && ((v < 0) != (q < 0)))
            v += q; // ONNX Mod (fmod=0): the sign of the divisor
        }
        break;
      case FoldOp::Pow: v = ipow(p, q); break;
      case FoldOp::Max: v = std::max(p, q); break;
      case FoldOp::Min: v = std::min(p, q); break;
      case FoldOp::Equal: v = p == q; break;
      case FoldOp::Less: v = p < q; break;
      case FoldOp::LessOrEqual: v = p <= q; break;
      case FoldOp::Greater: v = p > q; break;
      case FoldOp::GreaterOrEqual: v = p >= q; break;
      case FoldOp::And: v = (p != 0) && (q != 0); break;
      case FoldOp::Or: v = (p != 0) || (q != 0); break;
      case FoldOp::Xor: v = (p != 0) != (q != 0); break;
      }
      r[i] = v;
    }
    return tensorFromInts(rk, od, r);
  }
  std::vector<double> x = tensorToDoubles(a), y = tensorToDoubles(b), r(n);
  for (size_t i = 0; i < n; i++) {
    std::vector<dim_t> idx = unflatten(i, od);
    double p = x[broadcastSource(idx, a.dims())], q = y[broadcastSource(idx, b.dims())];
    double v = 0;
    switch (op) {
    case FoldOp::Add: v = p + q; break;
    case FoldOp::Sub: v = p - q; break;
    case FoldOp::Mul: v = p * q; break;
    case FoldOp::Div: v = p / q; break;
    case FoldOp::Mod: v = std::fmod(p, q); break;
    case FoldOp::Pow: v = std::pow(p, q); break;
    case FoldOp::Max: v = std::max(p, q); break;
    case FoldOp::Min: v = std::min(p, q); break;
    case FoldOp::Equal: v = p == q; break;
    case FoldOp::Less: v = p < q; break;
    case FoldOp::LessOrEqual: v = p <= q; break;
    case FoldOp::Greater: v = p > q; break;
    case FoldOp::GreaterOrEqual: v = p >= q; break;
    default: break;
    }
    r[i] = v;
  }
  return tensorFromDoubles(rk, od, r);
}

Expected<Tensor> foldUnary(FoldUnary op, const Tensor &a) {
  ElemKind k = a.getElementType();
  size_t n = a.size();
  if (isIntKind(k)) {
    std::vector<int64_t> x = tensorToInts(a);
    for (size_t i = 0; i < n; i++) {
      int64_t p = x[i];
      switch (op) {
      case FoldUnary::Neg: x[i] = int64_t(0 - uint64_t(p)); break;
      case FoldUnary::Abs: x[i] = p < 0 ? int64_t(0 - uint64_t(p)) : p; break;
      case FoldUnary::Not: x[i] = p == 0; break;
      case FoldUnary::Sign: x[i] = (p > 0) - (p < 0); break;
      case FoldUnary::Relu: x[i] = std::max<int64_t>(p, 0); break;
      case FoldUnary::Floor: case FoldUnary::Ceil: case FoldUnary::Round: break;
      default:
        return makeError(ErrorCode::Unsupported, "this operation on integer constants");
      }
    }
    return tensorFromInts(k, a.dims(), x);
  }
  std::vector<double> x = tensorToDoubles(a);
  for (size_t i = 0; i < n; i++) {
    double p = x[i];
    switch (op) {
    case FoldUnary::Neg: x[i] = -p; break;
    case FoldUnary::Abs: x[i] = std::fabs(p); break;
    case FoldUnary::Not: x[i] = p == 0; break;
    case FoldUnary::Floor: x[i] = std::floor(p); break;
    case FoldUnary::Ceil: x[i] = std::ceil(p); break;
    case FoldUnary::Sqrt: x[i] = std::sqrt(p); break;
    case FoldUnary::Sign: x[i] = (p > 0) - (p < 0); break;
    case FoldUnary::Exp: x[i] = std::exp(p); break;
    case FoldUnary::Log: x[i] = std::log(p); break;
    case FoldUnary::Reciprocal: x[i] = 1.0 / p; break;
    case FoldUnary::Round: x[i] = std::nearbyint(p); break;
    case FoldUnary::Relu: x[i] = std::max(p, 0.0); break;
    case FoldUnary::Sin: x[i] = std::sin(p); break;
    case FoldUnary::Cos: x[i] = std::cos(p); break;
    case FoldUnary::Tan: x[i] = std::tan(p); break;
    case FoldUnary::Asin: x[i] = std::asin(p); break;
    case FoldUnary::Acos: x[i] = std::acos(p); break;
    case FoldUnary::Atan: x[i] = std::atan(p); break;
    case FoldUnary::Sinh: x[i] = std::sinh(p); break;
    case FoldUnary::Cosh: x[i] = std::cosh(p); break;
    case FoldUnary::Asinh: x[i] = std::asinh(p); break;
    case FoldUnary::Acosh: x[i] = std::acosh(p); break;
    case FoldUnary::Atanh: x[i] = std::atanh(p); break;
    }
  }
  return tensorFromDoubles(k, a.dims(), x);
}

Expected<Tensor> foldWhere(const Tensor &c, const Tensor &x, const Tensor &y) {
  Dims d1, od;
  if (!broadcastShapes(c.dims(), x.dims(), d1) || !broadcastShapes(d1, y.dims(), od))
    return makeError(ErrorCode::ModelParse, "Where operands do not broadcast");
  std::vector<int64_t> cv = tensorToInts(c);
  Tensor out(Type::withDims(x.getType(), od));
  size_t es = x.getType().elemBytes();
  for (size_t i = 0, e = od.product(); i < e; i++) {
    std::vector<dim_t> idx = unflatten(i, od);
    bool pick = cv[broadcastSource(idx, c.dims())] != 0;
    const Tensor &s = pick ? x : y;
    std::memcpy(out.getUnsafePtr() + i * es,
                s.getUnsafePtr() + broadcastSource(idx, s.dims()) * es, es);
  }
  return out;
}

Tensor foldCast(const Tensor &a, ElemKind to) {
  if (a.getElementType() == to)
    return a.clone();
  if (to == ElemKind::Bool) {
    std::vector<double> v = tensorToDoubles(a);
    std::vector<int64_t> b(v.size());
    for (size_t i = 0; i < v.size(); i++)
      b[i] = v[i] != 0;
    return tensorFromInts(to, a.dims(), b);
  }
  if (isIntKind(to))
    return tensorFromInts(to, a.dims(), tensorToInts(a)); // truncates toward zero
  return tensorFromDoubles(to, a.dims(), tensorToDoubles(a));
}

} // namespace kiln::onnximport
