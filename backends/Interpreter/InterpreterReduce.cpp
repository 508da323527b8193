// Interpreter kernels of the reductions (ReduceSum/Mean/Max/Min/Prod), ArgMax, ArgMin and
// TopK. Float kinds reduce in float (Float16 and BFloat16 round once per output element);
// Int32I and Int64I reduce in int64 and store the result truncated to the output's width.
// ArgMax, ArgMin and TopK compare raw elements (Int8Q too: scale > 0 keeps the order).

#include "InterpreterKernels.h"

#include <numeric>

namespace kiln {

using namespace interp;

namespace {

enum class ReduceOp { Sum, Mean, Max, Min, Prod };

/// Maps every input element of a reduction to its output element: the row-major index in
/// the output shape (with or without the kept size-1 dims, which do not change it) of the
/// input's coordinates with the reduced ones dropped.
class ReduceMap {
public:
  ReduceMap(const Dims &in, const std::vector<bool> &reduced) : dims_(in) {
    outStrides_.assign(in.size(), 0);
    size_t stride = 1;
    for (size_t d = in.size(); d-- > 0;) {
      if (reduced[d]) {
        count_ *= in[d];
        continue;
      }
      outStrides_[d] = stride;
      stride *= in[d];
    }
    outSize_ = stride;
  }

  /// The output index of input element \p flat.
  size_t outIndex(size_t flat) const {
    size_t out = 0;
    for (size_t d = dims_.size(); d-- > 0;) {
      out += (flat % dims_[d]) * outStrides_[d];
      flat /= dims_[d];
    }
    return out;
  }
  /// The number of output elements.
  size_t outSize() const { return outSize_; }
  /// The number of input elements reduced into each output element.
  size_t count() const { return count_; }

private:
  Dims dims_;
  std::vector<size_t> outStrides_;
  size_t outSize_ = 1, count_ = 1;
};

/// Reduces \p x (in Acc, the accumulation type) into map.outSize() elements.
template <typename Acc>
std::vector<Acc> reduce(const std::vector<Acc> &x, const ReduceMap &map, ReduceOp op) {
  using Limits = std::numeric_limits<Acc>;
  const Acc lowest = Limits::has_infinity ? -Limits::infinity() : Limits::lowest();
  const Acc highest = Limits::has_infinity ? Limits::infinity() : Limits::max();
  Acc init = 0;
  if (op == ReduceOp::Prod)
    init = 1;
  else if (op == ReduceOp::Max)
    init = lowest;
  else if (op == ReduceOp::Min)
    init = highest;
  std::vector<Acc> y(map.outSize(), init);
  for (size_t i = 0; i < x.size(); i++) {
    Acc &a = y[map.outIndex(i)];
    switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Mean:
      a += x[i];
      break;
    case ReduceOp::Prod:
      a *= x[i];
      break;
    case ReduceOp::Max:
      a = std::max(a, x[i]);
      break;
    case ReduceOp::Min:
      a = std::min(a, x[i]);
      break;
    }
  }
  if (op == ReduceOp::Mean)
    for (Acc &a : y)
      a /= Acc(map.count());
  return y;
}

/// The shared body of the Reduce* instructions.
template <typename InstT> Error reduceInst(InterpreterRun &run, const InstT *I, ReduceOp op) {
  Tensor &out = run.getTensor(I->getDest());
  const Tensor &in = run.getTensor(I->getInput());
  const Dims &dims = in.dims();
  std::vector<bool> reduced(dims.size(), false);
  for (dim_t a : I->getAxes()) {
    if (a >= dims.size() || reduced[a])
      return makeError(ErrorCode::InvalidArgument, I->getKindName(), " '", I->getName(),
                       "': Axes must be distinct and below the rank of input ",
                       in.getType().toString());
    reduced[a] = true;
  }
  ReduceMap map(dims, reduced);
  if (map.outSize() != out.size())
    return makeError(ErrorCode::InvalidArgument, I->getKindName(), " '", I->getName(), "': output ",
                     out.getType().toString(), " does not fit input ", in.getType().toString());

  const ElemKind k = in.getElementType();
  if (sameFloatKind(out, in)) {
    storeFloats(out, reduce(loadFloats(in), map, op));
    return Error::success();
  }
  if (op != ReduceOp::Mean && isIndexKind(k) && out.getElementType() == k) {
    std::vector<int64_t> x(in.size());
    for (size_t i = 0; i < x.size(); i++)
      x[i] =
          k == ElemKind::Int32I ? in.getHandle<int32_t>().raw(i) : in.getHandle<int64_t>().raw(i);
    std::vector<int64_t> y = reduce(x, map, op);
    for (size_t i = 0; i < y.size(); i++) {
      if (k == ElemKind::Int32I)
        out.getHandle<int32_t>().raw(i) = int32_t(y[i]);
      else
        out.getHandle<int64_t>().raw(i) = y[i];
    }
    return Error::success();
  }
  return unsupportedKinds(I);
}

/// Index of the largest (\p isMax) or smallest element along the axis of \p split, the
/// first one on ties, for every (outer, inner) position.
template <typename T>
void argReduce(const Tensor &in, Tensor &out, const AxisSplit &split, bool isMax) {
  auto x = in.getHandle<T>();
  auto y = out.getHandle<int64_t>();
  for (size_t o = 0; o < split.outer; o++) {
    for (size_t i = 0; i < split.inner; i++) {
      size_t best = 0;
      for (size_t a = 1; a < split.size; a++) {
        auto v = orderKey(x.raw(split.index(o, a, i)));
        auto b = orderKey(x.raw(split.index(o, best, i)));
        if (isMax ? v > b : v < b)
          best = a;
      }
      y.raw(o * split.inner + i) = int64_t(best);
    }
  }
}

/// The shared body of ArgMax and ArgMin.
template <typename InstT> Error argInst(InterpreterRun &run, const InstT *I, bool isMax) {
  Tensor &out = run.getTensor(I->getDest());
  const Tensor &in = run.getTensor(I->getInput());
  const dim_t axis = I->getAxis();
  if (out.getElementType() != ElemKind::Int64I)
    return unsupportedKinds(I);
  if (axis >= in.getType().rank() || in.dims()[axis] == 0 ||
      out.size() != in.size() / in.dims()[axis])
    return makeError(ErrorCode::InvalidArgument, I->getKindName(), " '", I->getName(), "': Axis ",
                     axis, " and output ", out.getType().toString(), " do not fit input ",
                     in.getType().toString());
  const AxisSplit split(in.dims(), axis);
  return dispatchOrdered(I, in.getElementType(), [&](auto tag) {
    argReduce<typename decltype(tag)::type>(in, out, split, isMax);
    return Error::success();
  });
}

/// TopK along the last axis: per row, a stable sort of the indices by descending value
/// (so equal values keep the lower index first), then the first K.
template <typename T> void topK(const Tensor &in, Tensor &values, Tensor &indices, dim_t k) {
  auto x = in.getHandle<T>();
  auto v = values.getHandle<T>();
  auto idx = indices.getHandle<int64_t>();
  const size_t n = in.dims()[in.getType().rank() - 1];
  const size_t rows = in.size() / n;
  std::vector<size_t> order(n);
  for (size_t r = 0; r < rows; r++) {
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return orderKey(x.raw(r * n + a)) > orderKey(x.raw(r * n + b));
    });
    for (size_t j = 0; j < k; j++) {
      v.raw(r * k + j) = x.raw(r * n + order[j]);
      idx.raw(r * k + j) = int64_t(order[j]);
    }
  }
}

} // namespace

Error InterpreterRun::fwdReduceSum(const ReduceSumInst *I) {
  return reduceInst(*this, I, ReduceOp::Sum);
}

Error InterpreterRun::fwdReduceMean(const ReduceMeanInst *I) {
  return reduceInst(*this, I, ReduceOp::Mean);
}

Error InterpreterRun::fwdReduceMax(const ReduceMaxInst *I) {
  return reduceInst(*this, I, ReduceOp::Max);
}

Error InterpreterRun::fwdReduceMin(const ReduceMinInst *I) {
  return reduceInst(*this, I, ReduceOp::Min);
}

Error InterpreterRun::fwdReduceProd(const ReduceProdInst *I) {
  return reduceInst(*this, I, ReduceOp::Prod);
}

Error InterpreterRun::fwdArgMax(const ArgMaxInst *I) { return argInst(*this, I, true); }

Error InterpreterRun::fwdArgMin(const ArgMinInst *I) { return argInst(*this, I, false); }

Error InterpreterRun::fwdTopK(const TopKInst *I) {
  Tensor &values = getTensor(I->getValues());
  Tensor &indices = getTensor(I->getIndices());
  const Tensor &in = getTensor(I->getInput());
  const dim_t k = I->getK();
  const size_t rank = in.getType().rank();
  if (values.getElementType() != in.getElementType() ||
      indices.getElementType() != ElemKind::Int64I)
    return unsupportedKinds(I);
  if (rank == 0 || k == 0 || k > in.dims()[rank - 1] ||
      values.size() != in.size() / in.dims()[rank - 1] * k || indices.size() != values.size())
    return makeError(ErrorCode::InvalidArgument, "TopK '", I->getName(), "': K = ", k,
                     " and outputs ", values.getType().toString(), ", ",
                     indices.getType().toString(), " do not fit input ", in.getType().toString());
  return dispatchOrdered(I, in.getElementType(), [&](auto tag) {
    topK<typename decltype(tag)::type>(in, values, indices, k);
    return Error::success();
  });
}

} // namespace kiln

namespace kiln {

using namespace interp;

/// Sums in order along the axis (reversed with Reverse); float kinds accumulate in float
/// and round each stored value once; integers wrap.
Error InterpreterRun::fwdCumSum(const CumSumInst *I) {
  Tensor &out = getTensor(I->getDest());
  const Tensor &in = getTensor(I->getInput());
  KILN_RETURN_IF_ERR(checkSameKind(I, out, in));
  KILN_RETURN_IF_ERR(checkSameSize(I, out, in));
  const dim_t axis = I->getAxis();
  if (axis >= in.getType().rank())
    return operandError(I, "axis ", axis, " is out of range for ", in.getType().toString());
  const AxisSplit s(in.dims(), axis);
  const bool excl = I->getExclusive(), rev = I->getReverse();
  return dispatchNumeric(I, in.getElementType(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Acc = std::conditional_t<std::is_integral_v<T>, T, float>;
    const T *x = elems<T>(in);
    T *y = elems<T>(out);
    for (size_t o = 0; o < s.outer; o++)
      for (size_t i = 0; i < s.inner; i++) {
        Acc acc = 0;
        for (size_t k = 0; k < s.size; k++) {
          size_t a = rev ? s.size - 1 - k : k;
          size_t at = s.index(o, a, i);
          Acc v = Acc(x[at]);
          if (excl) {
            y[at] = T(acc);
          }
          if constexpr (std::is_integral_v<T>)
            acc = wrapAdd(acc, v);
          else
            acc += v;
          if (!excl)
            y[at] = T(acc);
        }
      }
    return Error::success();
  });
}

} // namespace kiln
