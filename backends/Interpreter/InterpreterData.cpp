// Data-movement kernels of the Interpreter: Concat, Slice, Transpose, Gather, Tile, Pad,
// Broadcast, Splat, ConvertTo and InsertTensor (what Pad lowers to). Moving data copies whole elements as bytes, so every
// element kind takes the same path; a quantized input whose scale or offset differs from
// the result's is requantized first, so that real values are preserved. Every kernel
// checks the shapes it relies on and returns an Error rather than read out of bounds.

#include "InterpreterUtil.h"

#include <algorithm>
#include <cstring>

namespace kiln {

using namespace interp;

namespace {

/// Fills \p t with \p value converted as by ConvertTo: float kinds round it, integer
/// kinds (quantized ones included: \p value is the raw integer) round it to nearest even
/// and saturate, Bool is value != 0.
Error fill(const Instruction *I, Tensor &t, float value) {
  return dispatchAny(I, t.getElementType(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T v = convertElement<T>(value);
    T *y = elems<T>(t);
    for (size_t i = 0, e = t.size(); i < e; i++)
      y[i] = v;
    return Error::success();
  });
}

/// For every index of \p out in row-major order, copies the element of \p in whose
/// coordinate along input dimension d is \p inCoord(idx, d).
template <typename F> void copyByInputCoords(Tensor &out, const Tensor &in, F &&inCoord) {
  const size_t bytes = out.getType().elemBytes();
  const Dims strides = in.getType().strides();
  char *y = out.getUnsafePtr();
  const char *x = in.getUnsafePtr();
  size_t i = 0;
  forEachIndex(out.dims(), [&](const std::vector<dim_t> &idx) {
    dim_t off = 0;
    for (size_t d = 0; d < strides.size(); d++)
      off += inCoord(idx, d) * strides[d];
    std::memcpy(y + bytes * i++, x + bytes * off, bytes);
  });
}

} // namespace

Error InterpreterRun::fwdConcat(const ConcatInst *I) {
  Tensor &out = getTensor(I->getDest());
  const Type &ot = out.getType();
  const dim_t axis = I->getAxis();
  if (axis >= ot.rank())
    return operandError(I, "axis ", axis, " is out of range for the result ", ot.toString());
  const size_t bytes = ot.elemBytes();
  const AxisSplit split(ot.dims, axis);
  const dim_t outer = split.outer, inner = split.inner;
  const dim_t outRow = split.size * inner;    // elements per outer index in the result
  dim_t done = 0;                             // elements of each result row filled so far
  for (Value *v : I->getInputs()) {
    const Tensor &in0 = getTensor(v);
    KILN_RETURN_IF_ERR(checkSameKind(I, out, in0));
    const Type &it = in0.getType();
    bool fits = it.rank() == ot.rank();
    for (size_t d = 0; fits && d < it.rank(); d++)
      fits = d == axis || it.dims[d] == ot.dims[d];
    if (!fits || done + it.dims[axis] * inner > outRow)
      return operandError(I, "input ", it.toString(), " does not fit the result ",
                          ot.toString(), " along axis ", axis);
    Tensor scratch;
    KILN_ASSIGN_OR_RETURN(const Tensor *in, withQuantParamsOf(I, in0, ot, scratch));
    const dim_t inRow = it.dims[axis] * inner;
    for (dim_t o = 0; o < outer; o++)
      std::memcpy(out.getUnsafePtr() + bytes * (o * outRow + done),
                  in->getUnsafePtr() + bytes * (o * inRow), bytes * inRow);
    done += inRow;
  }
  if (done != outRow)
    return operandError(I, "inputs fill ", done, " of ", outRow, " elements per row of ",
                        ot.toString());
  return Error::success();
}

Error InterpreterRun::fwdSlice(const SliceInst *I) {
  Tensor &out = getTensor(I->getDest());
  const Tensor &in0 = getTensor(I->getInput());
  KILN_RETURN_IF_ERR(checkSameKind(I, out, in0));
  const Type &it = in0.getType(), &ot = out.getType();
  const auto &starts = I->getStarts();
  const auto &ends = I->getEnds();
  bool ok = starts.size() == it.rank() && ends.size() == it.rank() && ot.rank() == it.rank();
  for (size_t d = 0; ok && d < it.rank(); d++)
    ok = starts[d] < ends[d] && ends[d] <= it.dims[d] && ot.dims[d] == ends[d] - starts[d];
  if (!ok)
    return operandError(I, "Starts/Ends do not describe the result ", ot.toString(),
                        " inside the input ", it.toString());
  Tensor scratch;
  KILN_ASSIGN_OR_RETURN(const Tensor *in, withQuantParamsOf(I, in0, ot, scratch));
  copyByInputCoords(out, *in,
                    [&](const std::vector<dim_t> &idx, size_t d) { return idx[d] + starts[d]; });
  return Error::success();
}

Error InterpreterRun::fwdTranspose(const TransposeInst *I) {
  Tensor &out = getTensor(I->getDest());
  const Tensor &in0 = getTensor(I->getInput());
  KILN_RETURN_IF_ERR(checkSameKind(I, out, in0));
  const Type &it = in0.getType(), &ot = out.getType();
  const auto &shuffle = I->getShuffle();
  const size_t rank = it.rank();
  bool ok = shuffle.size() == rank && ot.rank() == rank;
  // Result dim d is input dim shuffle[d]; resultDim inverts that (rank: not yet seen).
  std::vector<size_t> resultDim(rank, rank);
  for (size_t d = 0; ok && d < rank; d++) {
    ok = shuffle[d] < rank && resultDim[shuffle[d]] == rank && ot.dims[d] == it.dims[shuffle[d]];
    if (ok)
      resultDim[shuffle[d]] = d;
  }
  if (!ok)
    return operandError(I, "Shuffle does not permute the input ", it.toString(),
                        " into the result ", ot.toString());
  Tensor scratch;
  KILN_ASSIGN_OR_RETURN(const Tensor *in, withQuantParamsOf(I, in0, ot, scratch));
  copyByInputCoords(out, *in,
                    [&](const std::vector<dim_t> &idx, size_t d) { return idx[resultDim[d]]; });
  return Error::success();
}

/// Indices are read as int64; a negative index counts from the end of the axis; an index
/// outside [-size, size) is an Error.
namespace {

/// The prologue of the gathers (Gather, GatherElements, GatherND): the result of Data's
/// kind, Indices of an index kind, and Data with the result's quantization parameters
/// (\p scratch holds a requantized copy when they differ).
Expected<const Tensor *> gatherData(const Instruction *I, const Tensor &out,
                                    const Tensor &data0, const Tensor &indices,
                                    Tensor &scratch) {
  KILN_RETURN_IF_ERR(checkSameKind(I, out, data0));
  if (!isIndexKind(indices.getElementType()))
    return unsupportedKinds(I);
  return withQuantParamsOf(I, data0, out.getType(), scratch);
}

} // namespace

Error InterpreterRun::fwdGather(const GatherInst *I) {
  Tensor &out = getTensor(I->getDest());
  const Tensor &data0 = getTensor(I->getData());
  const Tensor &indices = getTensor(I->getIndices());
  Tensor scratch;
  KILN_ASSIGN_OR_RETURN(const Tensor *data, gatherData(I, out, data0, indices, scratch));
  const Type &dt = data0.getType(), &ot = out.getType();
  const dim_t axis = I->getAxis();
  bool ok = axis < dt.rank() && ot.rank() == dt.rank() - 1 + indices.dims().size();
  if (ok) {
    Dims want;
    for (size_t d = 0; d < axis; d++)
      want.push_back(dt.dims[d]);
    for (dim_t d : indices.dims())
      want.push_back(d);
    for (size_t d = axis + 1; d < dt.rank(); d++)
      want.push_back(dt.dims[d]);
    ok = want == ot.dims;
  }
  if (!ok)
    return operandError(I, "result ", ot.toString(), " does not match Data ", dt.toString(),
                        " gathered along axis ", axis, " by Indices ",
                        indices.getType().toString());
  const size_t bytes = ot.elemBytes();
  const AxisSplit split(dt.dims, axis);
  const dim_t outer = split.outer, size = split.size, inner = split.inner;
  const dim_t count = indices.size();
  const bool wide = indices.getElementType() == ElemKind::Int64I;
  const int64_t *idx64 = wide ? elems<int64_t>(indices) : nullptr;
  const int32_t *idx32 = wide ? nullptr : elems<int32_t>(indices);
  for (dim_t k = 0; k < count; k++) {
    const int64_t given = wide ? idx64[k] : idx32[k];
    const int64_t idx = given < 0 ? given + int64_t(size) : given;
    if (idx < 0 || idx >= int64_t(size))
      return makeError(ErrorCode::InvalidArgument, "Gather '", I->getName(), "': index ",
                       given, " at position ", k, " of Indices ", indices.getType().toString(),
                       " is out of range for axis ", axis, " of size ", size, " of Data ",
                       dt.toString());
    for (dim_t o = 0; o < outer; o++)
      std::memcpy(out.getUnsafePtr() + bytes * ((o * count + k) * inner),
                  data->getUnsafePtr() + bytes * ((o * size + dim_t(idx)) * inner),
                  bytes * inner);
  }
  return Error::success();
}

Error InterpreterRun::fwdTile(const TileInst *I) {
  Tensor &out = getTensor(I->getDest());
  const Tensor &in0 = getTensor(I->getInput());
  KILN_RETURN_IF_ERR(checkSameKind(I, out, in0));
  const Type &it = in0.getType(), &ot = out.getType();
  const auto &repeats = I->getRepeats();
  bool ok = repeats.size() == it.rank() && ot.rank() == it.rank();
  for (size_t d = 0; ok && d < it.rank(); d++)
    ok = ot.dims[d] == it.dims[d] * repeats[d];
  if (!ok)
    return operandError(I, "Repeats do not tile the input ", it.toString(), " into the result ",
                        ot.toString());
  Tensor scratch;
  KILN_ASSIGN_OR_RETURN(const Tensor *in, withQuantParamsOf(I, in0, ot, scratch));
  copyByInputCoords(out, *in,
                    [&](const std::vector<dim_t> &idx, size_t d) { return idx[d] % it.dims[d]; });
  return Error::success();
}

/// Quantized results are padded with Value as the raw integer, as Splat does, so that Pad
/// equals its lowering (InsertTensor into a Splat of Value).
Error InterpreterRun::fwdPad(const PadInst *I) {
  Tensor &out = getTensor(I->getDest());
  const Tensor &in0 = getTensor(I->getInput());
  KILN_RETURN_IF_ERR(checkSameKind(I, out, in0));
  const Type &it = in0.getType(), &ot = out.getType();
  const auto &pads = I->getPads();
  const size_t rank = it.rank();
  bool ok = pads.size() == 2 * rank && ot.rank() == rank;
  for (size_t d = 0; ok && d < rank; d++)
    ok = ot.dims[d] == pads[d] + it.dims[d] + pads[rank + d];
  if (!ok)
    return operandError(I, "Pads do not grow the input ", it.toString(), " into the result ",
                        ot.toString());
  Tensor scratch;
  KILN_ASSIGN_OR_RETURN(const Tensor *in, withQuantParamsOf(I, in0, ot, scratch));
  KILN_RETURN_IF_ERR(fill(I, out, I->getValue()));
  const size_t bytes = ot.elemBytes();
  const Dims outStrides = ot.strides();
  size_t i = 0;
  forEachIndex(it.dims, [&](const std::vector<dim_t> &idx) {
    dim_t off = 0;
    for (size_t d = 0; d < rank; d++)
      off += (idx[d] + pads[d]) * outStrides[d];
    std::memcpy(out.getUnsafePtr() + bytes * off, in->getUnsafePtr() + bytes * i++, bytes);
  });
  return Error::success();
}

Error InterpreterRun::fwdBroadcast(const BroadcastInst *I) {
  Tensor &out = getTensor(I->getDest());
  const Tensor &in0 = getTensor(I->getInput());
  KILN_RETURN_IF_ERR(checkSameKind(I, out, in0));
  const Type &it = in0.getType(), &ot = out.getType();
  const auto &target = I->getTargetDims();
  bool ok = it.rank() <= ot.rank() && target.size() == ot.rank() &&
            std::equal(target.begin(), target.end(), ot.dims.begin());
  const size_t shift = ok ? ot.rank() - it.rank() : 0;
  for (size_t d = 0; ok && d < it.rank(); d++)
    ok = it.dims[d] == 1 || it.dims[d] == ot.dims[shift + d];
  if (!ok)
    return operandError(I, "the input ", it.toString(), " does not broadcast to the result ",
                        ot.toString(), " (TargetDims ", dimsToString(ot.dims), ")");
  Tensor scratch;
  KILN_ASSIGN_OR_RETURN(const Tensor *in, withQuantParamsOf(I, in0, ot, scratch));
  // Input dims are right-aligned with the result's; size-1 input dims repeat.
  copyByInputCoords(out, *in, [&](const std::vector<dim_t> &idx, size_t d) {
    return it.dims[d] == 1 ? 0 : idx[shift + d];
  });
  return Error::success();
}

/// Quantized results hold Value as the raw integer (see the operator table).
Error InterpreterRun::fwdSplat(const SplatInst *I) {
  return fill(I, getTensor(I->getDest()), I->getValue());
}

Error InterpreterRun::fwdConvertTo(const ConvertToInst *I) {
  Tensor &out = getTensor(I->getDest());
  const Tensor &in = getTensor(I->getInput());
  KILN_RETURN_IF_ERR(checkSameSize(I, out, in));
  return dispatchConvertible(I, in.getElementType(), [&](auto fromTag) {
    using From = typename decltype(fromTag)::type;
    return dispatchConvertible(I, out.getElementType(), [&](auto toTag) {
      using To = typename decltype(toTag)::type;
      const From *x = elems<From>(in);
      To *y = elems<To>(out);
      for (size_t i = 0, e = in.size(); i < e; i++)
        y[i] = convertElement<To>(x[i]);
      return Error::success();
    });
  });
}

Error InterpreterRun::fwdInsertTensor(const InsertTensorInst *I) {
  Tensor &dst = getTensor(I->getDest());
  const Tensor &big = getTensor(I->getBig());
  const Tensor &small = getTensor(I->getSmall());
  const Type &dt = dst.getType();
  const Type &st = small.getType();
  const std::vector<dim_t> &offsets = I->getOffsets();
  if (big.getSizeInBytes() != dst.getSizeInBytes() || st.rank() != dt.rank() ||
      offsets.size() != dt.rank() || st.kind != dt.kind)
    return makeError(ErrorCode::Internal, "InsertTensor '", I->getName(), "': ", st.toString(),
                     " into ", dt.toString());
  for (size_t d = 0; d < dt.rank(); d++)
    if (offsets[d] + st.dims[d] > dt.dims[d])
      return makeError(ErrorCode::Internal, "InsertTensor '", I->getName(), "': ", st.toString(),
                       " does not fit in ", dt.toString());
  if (dst.getUnsafePtr() != big.getUnsafePtr())
    std::memmove(dst.getUnsafePtr(), big.getUnsafePtr(), big.getSizeInBytes());
  size_t rank = dt.rank();
  size_t es = dt.elemBytes();
  if (st.numElements() == 0)
    return Error::success();
  if (rank == 0) {
    std::memcpy(dst.getUnsafePtr(), small.getUnsafePtr(), es);
    return Error::success();
  }
  // Copy rows of the innermost dimension.
  Dims dStrides = dt.strides();
  size_t row = st.dims[rank - 1] * es;
  size_t rows = st.numElements() / st.dims[rank - 1];
  std::vector<dim_t> idx(rank, 0);
  const char *src = small.getUnsafePtr();
  char *out = dst.getUnsafePtr();
  for (size_t r = 0; r < rows; r++) {
    size_t off = 0;
    for (size_t d = 0; d < rank; d++)
      off += (idx[d] + offsets[d]) * dStrides[d];
    std::memcpy(out + off * es, src + r * row, row);
    for (size_t d = rank - 1; d-- > 0;) {
      if (++idx[d] < st.dims[d])
        break;
      idx[d] = 0;
    }
  }
  return Error::success();
}

} // namespace kiln

// ------------------------------------------------------------------ ONNX breadth

namespace kiln {

using namespace interp;

namespace {

/// Index \p k of an index tensor, read as int64.
int64_t indexAt(const Tensor &t, size_t k) {
  return t.getElementType() == ElemKind::Int64I ? elems<int64_t>(t)[k]
                                                : int64_t(elems<int32_t>(t)[k]);
}

/// Normalises index \p given along a dim of \p size (negative counts from the end); false
/// when out of range.
bool normIndex(int64_t given, dim_t size, dim_t &out) {
  int64_t v = given < 0 ? given + int64_t(size) : given;
  if (v < 0 || v >= int64_t(size))
    return false;
  out = dim_t(v);
  return true;
}

Error indexError(const Instruction *I, int64_t given, size_t k, const Tensor &indices,
                 dim_t size, const Tensor &data) {
  return makeError(ErrorCode::InvalidArgument, I->getKindName(), " '", I->getName(),
                   "': index ", given, " at position ", k, " of Indices ",
                   indices.getType().toString(), " is out of range (size ", size,
                   ") for Data ", data.getType().toString());
}

/// Combines \p u into \p y by \p red (none: replace) for kind T.
template <typename T> T combine(const std::string &red, T y, T u) {
  if (red == "none")
    return u;
  if constexpr (std::is_same_v<T, bool>) {
    if (red == "add" || red == "max")
      return y || u;
    return y && u; // mul, min
  } else if constexpr (std::is_integral_v<T>) {
    if (red == "add")
      return wrapAdd(y, u);
    if (red == "mul")
      return wrapMul(y, u);
    return red == "max" ? std::max(y, u) : std::min(y, u);
  } else {
    float a = float(y), b = float(u);
    if (red == "add")
      return T(a + b);
    if (red == "mul")
      return T(a * b);
    if (std::isnan(a) || std::isnan(b))
      return T(std::nanf(""));
    return T(red == "max" ? std::max(a, b) : std::min(a, b));
  }
}

} // namespace

Error InterpreterRun::fwdGatherElements(const GatherElementsInst *I) {
  Tensor &out = getTensor(I->getDest());
  const Tensor &data0 = getTensor(I->getData());
  const Tensor &indices = getTensor(I->getIndices());
  Tensor scratch;
  KILN_ASSIGN_OR_RETURN(const Tensor *data, gatherData(I, out, data0, indices, scratch));
  const Type &dt = data0.getType(), &ot = out.getType();
  const dim_t axis = I->getAxis();
  bool ok = axis < dt.rank() && ot.dims == indices.dims() && ot.rank() == dt.rank();
  for (size_t d = 0; ok && d < dt.rank(); d++)
    ok = d == axis || ot.dims[d] <= dt.dims[d];
  if (!ok)
    return operandError(I, "result ", ot.toString(), " and Indices ",
                        indices.getType().toString(), " do not fit Data ", dt.toString());
  const size_t bytes = ot.elemBytes();
  const Dims strides = dt.strides();
  size_t k = 0;
  Error err = Error::success();
  forEachIndex(ot.dims, [&](const std::vector<dim_t> &idx) {
    if (err)
      return;
    dim_t a;
    int64_t given = indexAt(indices, k);
    if (!normIndex(given, dt.dims[axis], a)) {
      err = indexError(I, given, k, indices, dt.dims[axis], data0);
      return;
    }
    size_t off = 0;
    for (size_t d = 0; d < dt.rank(); d++)
      off += (d == axis ? a : idx[d]) * strides[d];
    std::memcpy(out.getUnsafePtr() + bytes * k, data->getUnsafePtr() + bytes * off, bytes);
    k++;
  });
  return err;
}

Error InterpreterRun::fwdScatterElements(const ScatterElementsInst *I) {
  Tensor &out = getTensor(I->getDest());
  const Tensor &data = getTensor(I->getData());
  const Tensor &indices = getTensor(I->getIndices());
  const Tensor &updates = getTensor(I->getUpdates());
  KILN_RETURN_IF_ERR(checkSameKind(I, out, data));
  KILN_RETURN_IF_ERR(checkSameKind(I, out, updates));
  KILN_RETURN_IF_ERR(checkSameSize(I, out, data));
  if (!isIndexKind(indices.getElementType()) || isQuantized(out.getElementType()))
    return unsupportedKinds(I);
  const Type &dt = data.getType();
  const dim_t axis = I->getAxis();
  bool ok = axis < dt.rank() && updates.dims() == indices.dims() &&
            indices.dims().size() == dt.rank();
  for (size_t d = 0; ok && d < dt.rank(); d++)
    ok = d == axis || indices.dims()[d] <= dt.dims[d];
  if (!ok)
    return operandError(I, "Indices ", indices.getType().toString(), " and Updates ",
                        updates.getType().toString(), " do not fit Data ", dt.toString());
  if (out.getUnsafePtr() != data.getUnsafePtr())
    std::memmove(out.getUnsafePtr(), data.getUnsafePtr(), data.getSizeInBytes());
  const std::string red = I->getReduction();
  const Dims strides = dt.strides();
  return dispatchConvertible(I, out.getElementType(), [&](auto tag) -> Error {
    using T = typename decltype(tag)::type;
    T *y = elems<T>(out);
    const T *u = elems<T>(updates);
    size_t k = 0;
    Error err = Error::success();
    forEachIndex(indices.dims(), [&](const std::vector<dim_t> &idx) {
      if (err)
        return;
      dim_t a;
      int64_t given = indexAt(indices, k);
      if (!normIndex(given, dt.dims[axis], a)) {
        err = indexError(I, given, k, indices, dt.dims[axis], data);
        return;
      }
      size_t off = 0;
      for (size_t d = 0; d < dt.rank(); d++)
        off += (d == axis ? a : idx[d]) * strides[d];
      y[off] = combine<T>(red, y[off], u[k]);
      k++;
    });
    return err;
  });
}

namespace {

/// The row-major offset (in elements of Data) of the slice that index tuple \p j of
/// \p indices [..., k] names, after \p batch leading dims given by \p batchOffset; false
/// (with \p err set) when an entry is out of range.
bool tupleOffset(const Instruction *I, const Tensor &indices, size_t j, size_t k,
                 const Type &dt, size_t batchDims, size_t batchOffset, size_t &off,
                 Error &err, const Tensor &data) {
  const Dims strides = dt.strides();
  off = batchOffset;
  for (size_t m = 0; m < k; m++) {
    dim_t a;
    int64_t given = indexAt(indices, j * k + m);
    if (!normIndex(given, dt.dims[batchDims + m], a)) {
      err = indexError(I, given, j * k + m, indices, dt.dims[batchDims + m], data);
      return false;
    }
    off += a * strides[batchDims + m];
  }
  return true;
}

} // namespace

Error InterpreterRun::fwdScatterND(const ScatterNDInst *I) {
  Tensor &out = getTensor(I->getDest());
  const Tensor &data = getTensor(I->getData());
  const Tensor &indices = getTensor(I->getIndices());
  const Tensor &updates = getTensor(I->getUpdates());
  KILN_RETURN_IF_ERR(checkSameKind(I, out, data));
  KILN_RETURN_IF_ERR(checkSameKind(I, out, updates));
  KILN_RETURN_IF_ERR(checkSameSize(I, out, data));
  if (!isIndexKind(indices.getElementType()) || isQuantized(out.getElementType()))
    return unsupportedKinds(I);
  const Type &dt = data.getType();
  const Dims &id = indices.dims();
  if (id.size() == 0 || id[id.size() - 1] > dt.rank())
    return operandError(I, "Indices ", indices.getType().toString(), " do not fit Data ",
                        dt.toString());
  const size_t k = id[id.size() - 1];
  size_t slice = 1;
  for (size_t d = k; d < dt.rank(); d++)
    slice *= dt.dims[d];
  const size_t tuples = k ? indices.size() / k : id.product();
  if (updates.size() != tuples * slice)
    return operandError(I, "Updates ", updates.getType().toString(), " do not fit Indices ",
                        indices.getType().toString(), " and Data ", dt.toString());
  if (out.getUnsafePtr() != data.getUnsafePtr())
    std::memmove(out.getUnsafePtr(), data.getUnsafePtr(), data.getSizeInBytes());
  const std::string red = I->getReduction();
  return dispatchConvertible(I, out.getElementType(), [&](auto tag) -> Error {
    using T = typename decltype(tag)::type;
    T *y = elems<T>(out);
    const T *u = elems<T>(updates);
    Error err = Error::success();
    for (size_t j = 0; j < tuples; j++) {
      size_t off;
      if (!tupleOffset(I, indices, j, k, dt, 0, 0, off, err, data))
        return err;
      for (size_t e = 0; e < slice; e++)
        y[off + e] = combine<T>(red, y[off + e], u[j * slice + e]);
    }
    return Error::success();
  });
}

Error InterpreterRun::fwdGatherND(const GatherNDInst *I) {
  Tensor &out = getTensor(I->getDest());
  const Tensor &data0 = getTensor(I->getData());
  const Tensor &indices = getTensor(I->getIndices());
  Tensor scratch;
  KILN_ASSIGN_OR_RETURN(const Tensor *data, gatherData(I, out, data0, indices, scratch));
  const Type &dt = data0.getType(), &ot = out.getType();
  const Dims &id = indices.dims();
  const size_t b = I->getBatchDims();
  if (id.size() == 0 || b >= id.size() || b >= dt.rank() ||
      b + id[id.size() - 1] > dt.rank() || id[id.size() - 1] == 0)
    return operandError(I, "Indices ", indices.getType().toString(), " do not fit Data ",
                        dt.toString());
  // The first BatchDims dims of Indices and Data must agree (the type rule checks it for
  // graphs; IR reaches here without it).
  for (size_t d = 0; d < b; d++)
    if (id[d] != dt.dims[d])
      return operandError(I, "dim ", d, " of Indices ", indices.getType().toString(),
                          " differs from Data ", dt.toString(), " within BatchDims = ", b);
  const size_t k = id[id.size() - 1];
  size_t slice = 1, batches = 1;
  for (size_t d = b + k; d < dt.rank(); d++)
    slice *= dt.dims[d];
  for (size_t d = 0; d < b; d++)
    batches *= dt.dims[d];
  const size_t tuples = indices.size() / k, perBatch = tuples / batches;
  if (out.size() != tuples * slice)
    return operandError(I, "result ", ot.toString(), " does not fit Indices ",
                        indices.getType().toString(), " and Data ", dt.toString());
  const size_t bytes = ot.elemBytes();
  const size_t batchStride = b ? dt.strides()[b - 1] : 0;
  Error err = Error::success();
  for (size_t j = 0; j < tuples; j++) {
    size_t off;
    if (!tupleOffset(I, indices, j, k, dt, b, (j / perBatch) * batchStride, off, err, data0))
      return err;
    std::memcpy(out.getUnsafePtr() + bytes * j * slice, data->getUnsafePtr() + bytes * off,
                bytes * slice);
  }
  return Error::success();
}

} // namespace kiln

// ------------------------------------------------------------------ GridSample

namespace kiln {

using namespace interp;

namespace {

/// PyTorch's reflect_coordinates: reflects \p x into [low/2, high/2] (twice the bounds
/// given, so that half-pixel bounds stay integers).
double reflectCoord(double x, double twiceLow, double twiceHigh) {
  if (twiceLow == twiceHigh)
    return 0;
  double lo = twiceLow / 2, span = (twiceHigh - twiceLow) / 2;
  x = std::fabs(x - lo);
  double extra = std::fmod(x, span);
  double flips = std::floor(x / span);
  return std::fmod(flips, 2) == 0 ? extra + lo : span - extra + lo;
}

/// A coordinate under the padding mode (border: clamped; reflection: reflected, then
/// clamped); zeros leaves it.
double padCoord(double x, dim_t size, const std::string &pad, bool align) {
  if (pad == "zeros")
    return x;
  if (pad == "reflection")
    x = align ? reflectCoord(x, 0, 2.0 * double(size - 1))
              : reflectCoord(x, -1, 2.0 * double(size) - 1);
  return std::clamp(x, 0.0, double(size - 1));
}

double cubicWeight(double t, bool near) {
  const double A = -0.75;
  return near ? ((A + 2) * t - (A + 3)) * t * t + 1
              : ((A * t - 5 * A) * t + 8 * A) * t - 4 * A;
}

} // namespace

Error InterpreterRun::fwdGridSample(const GridSampleInst *I) {
  Tensor &out = getTensor(I->getDest());
  const Tensor &in = getTensor(I->getInput());
  const Tensor &grid = getTensor(I->getGrid());
  KILN_RETURN_IF_ERR(checkSameKind(I, out, in));
  KILN_RETURN_IF_ERR(checkSameKind(I, grid, in));
  const Dims &id = in.dims(), &gd = grid.dims(), &od = out.dims();
  if (id.size() != 4 || gd.size() != 4 || od.size() != 4 || gd[0] != id[0] || gd[3] != 2 ||
      od != Dims({id[0], id[1], gd[1], gd[2]}))
    return operandError(I, "Input ", in.getType().toString(), ", Grid ",
                        grid.getType().toString(), " and result ", out.getType().toString(),
                        " do not fit");
  const std::string mode = I->getMode(), pad = I->getPaddingMode();
  const bool align = I->getAlignCorners();
  const dim_t N = id[0], C = id[1], H = id[2], W = id[3], oH = gd[1], oW = gd[2];
  return dispatchFloat(I, in.getElementType(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *x = elems<T>(in), *g = elems<T>(grid);
    T *y = elems<T>(out);
    auto at = [&](dim_t n, dim_t c, int64_t h, int64_t w) -> double {
      if (h < 0 || w < 0 || h >= int64_t(H) || w >= int64_t(W))
        return 0;
      return double(float(x[((n * C + c) * H + dim_t(h)) * W + dim_t(w)]));
    };
    for (dim_t n = 0; n < N; n++)
      for (dim_t i = 0; i < oH; i++)
        for (dim_t j = 0; j < oW; j++) {
          size_t gi = ((n * oH + i) * oW + j) * 2;
          double gx = double(float(g[gi])), gy = double(float(g[gi + 1]));
          double sx = align ? (gx + 1) / 2 * double(W - 1) : ((gx + 1) * double(W) - 1) / 2;
          double sy = align ? (gy + 1) / 2 * double(H - 1) : ((gy + 1) * double(H) - 1) / 2;
          for (dim_t c = 0; c < C; c++) {
            double v = 0;
            if (mode == "bicubic") {
              // Taps floor - 1 .. floor + 2, each tap's coordinate padded on its own.
              double fx = std::floor(sx), fy = std::floor(sy), tx = sx - fx, ty = sy - fy;
              double wx[4] = {cubicWeight(tx + 1, false), cubicWeight(tx, true),
                              cubicWeight(1 - tx, true), cubicWeight(2 - tx, false)};
              double wy[4] = {cubicWeight(ty + 1, false), cubicWeight(ty, true),
                              cubicWeight(1 - ty, true), cubicWeight(2 - ty, false)};
              for (int a = 0; a < 4; a++)
                for (int b = 0; b < 4; b++) {
                  double py = padCoord(fy - 1 + a, H, pad, align);
                  double px = padCoord(fx - 1 + b, W, pad, align);
                  v += wy[a] * wx[b] * at(n, c, int64_t(py), int64_t(px));
                }
            } else {
              double px = padCoord(sx, W, pad, align), py = padCoord(sy, H, pad, align);
              if (mode == "nearest") {
                v = at(n, c, int64_t(std::nearbyint(py)), int64_t(std::nearbyint(px)));
              } else {
                double x0 = std::floor(px), y0 = std::floor(py), lx = px - x0, ly = py - y0;
                int64_t ix = int64_t(x0), iy = int64_t(y0);
                v = (1 - ly) * ((1 - lx) * at(n, c, iy, ix) + lx * at(n, c, iy, ix + 1)) +
                    ly * ((1 - lx) * at(n, c, iy + 1, ix) + lx * at(n, c, iy + 1, ix + 1));
              }
            }
            y[((n * C + c) * oH + i) * oW + j] = T(float(v));
          }
        }
    return Error::success();
  });
}

} // namespace kiln
