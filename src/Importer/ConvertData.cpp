// Converters of the data-movement family: constants, shapes, reshapes, slicing,
// gathering, padding, broadcasting, depth/space rearrangement and resizing. The shape
// operators evaluate their node in the importer when the data input is a small known
// constant (shape subgraphs), and build graph nodes otherwise.

#include "ONNXImporter.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace kiln::onnximport {

namespace {

using Node = onnx::NodeProto;

/// Small constant data input that the converter may evaluate itself, or null.
const Tensor *foldableData(Importer &I, const Node &n, int i = 0) {
  const Tensor *t = I.constInput(n, i);
  return t && t->size() <= kMaxFoldElements ? t : nullptr;
}

Expected<std::vector<int64_t>> intsInput(Importer &I, const Node &n, int i, const char *what) {
  KILN_ASSIGN_OR_RETURN(const Tensor *t, I.requireConstInput(n, i, what));
  if (isFloatKind(t->getElementType()))
    return I.parseError(n, "the ", what, " input must be an integer tensor, not ",
                        t->getType().toString());
  if (t->dims().size() > 1)
    return I.parseError(n, "the ", what, " input must be 1-D, not ", t->getType().toString());
  return tensorToInts(*t);
}

/// Reshape of a known constant or a graph value.
Error bindReshaped(Importer &I, const Node &n, const Dims &dims) {
  if (const Tensor *t = foldableData(I, n)) {
    Tensor c = t->clone();
    c.reshape(Type::withDims(t->getType(), dims));
    I.setOutputConst(n, 0, std::move(c));
    return Error::success();
  }
  KILN_ASSIGN_OR_RETURN(NodeValue v, I.input(n, 0));
  I.setOutput(n, 0, I.reshape(I.opName(n), v, dims));
  return Error::success();
}

Error convertConstant(Importer &I, const Node &n) {
  if (n.attribute_size() != 1)
    return I.parseError(n, "a Constant needs exactly one value attribute");
  const onnx::AttributeProto &a = n.attribute(0);
  const std::string &name = a.name();
  if (name == "value") {
    Expected<Tensor> t = tensorFromProto(a.t(), I.opts.maxTensorElements);
    if (!t)
      return t.takeError().addContext(I.describe(n));
    I.setOutputConst(n, 0, std::move(t).get());
  } else if (name == "value_float") {
    I.setOutputConst(n, 0, tensorFromDoubles(ElemKind::Float, {}, {a.f()}));
  } else if (name == "value_floats") {
    std::vector<double> v(a.floats().begin(), a.floats().end());
    I.setOutputConst(n, 0, tensorFromDoubles(ElemKind::Float, {dim_t(v.size())}, v));
  } else if (name == "value_int") {
    I.setOutputConst(n, 0, tensorFromInts(ElemKind::Int64I, {}, {a.i()}));
  } else if (name == "value_ints") {
    std::vector<int64_t> v(a.ints().begin(), a.ints().end());
    I.setOutputConst(n, 0, tensorFromInts(ElemKind::Int64I, {dim_t(v.size())}, v));
  } else {
    return I.unsupported(n, "Constant attribute '", name, "' is not supported");
  }
  return Error::success();
}

Error convertConstantOfShape(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> shape, intsInput(I, n, 0, "shape"));
  KILN_ASSIGN_OR_RETURN(Dims dims, checkedDims(shape, I.opts.maxTensorElements,
                                               "the ConstantOfShape result"));
  ElemKind k = ElemKind::Float;
  double v = 0;
  if (const onnx::AttributeProto *a = I.attr(n, "value")) {
    Expected<Tensor> t = tensorFromProto(a->t(), 1);
    if (!t || t->size() != 1)
      return I.parseError(n, "'value' must be a one-element tensor");
    k = t->getElementType();
    v = t->getAsDouble(0);
  }
  if (dims.product() <= kMaxFoldElements) {
    Tensor t(k, dims);
    for (size_t i = 0; i < t.size(); i++)
      t.setFromDouble(i, v);
    I.setOutputConst(n, 0, std::move(t));
  } else {
    I.setOutput(n, 0, I.splat(I.opName(n), k, dims, v));
  }
  return Error::success();
}

Error convertShape(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(Dims d, I.inputDims(n, 0));
  int64_t r = int64_t(d.size());
  int64_t start = I.attrInt(n, "start", 0), end = I.attrInt(n, "end", r);
  start = std::clamp<int64_t>(start < 0 ? start + r : start, 0, r);
  end = std::clamp<int64_t>(end < 0 ? end + r : end, 0, r);
  std::vector<int64_t> v;
  for (int64_t i = start; i < end; i++)
    v.push_back(int64_t(d[i]));
  I.setOutputConst(n, 0, tensorFromInts(ElemKind::Int64I, {dim_t(v.size())}, v));
  return Error::success();
}

Error convertSize(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(Dims d, I.inputDims(n, 0));
  I.setOutputConst(n, 0, tensorFromInts(ElemKind::Int64I, {}, {int64_t(d.product())}));
  return Error::success();
}

/// Identity, and Dropout in inference (its mask output is all true).
Error convertIdentity(Importer &I, const Node &n) {
  if (const Tensor *t = I.constInput(n, 0)) {
    if (t->size() <= kMaxFoldElements) {
      I.setOutputConst(n, 0, t->clone());
    } else {
      KILN_ASSIGN_OR_RETURN(NodeValue v, I.input(n, 0));
      I.setOutput(n, 0, v);
    }
  } else {
    KILN_ASSIGN_OR_RETURN(NodeValue v, I.input(n, 0));
    I.setOutput(n, 0, v);
  }
  if (n.op_type() == "Dropout" && I.hasInput(n, 2)) {
    const Tensor *training = I.constInput(n, 2);
    if (!training || training->size() != 1 || training->getAsDouble(0) != 0)
      return I.unsupported(n, "Dropout in training mode is not supported");
  }
  if (n.op_type() == "Dropout" && I.attrInt(n, "is_test", 1) == 0 && I.opset < 7)
    return I.unsupported(n, "Dropout in training mode is not supported");
  if (n.op_type() == "Dropout" && I.hasOutput(n, 1)) {
    KILN_ASSIGN_OR_RETURN(Dims d, I.inputDims(n, 0));
    if (d.product() <= kMaxFoldElements) {
      Tensor m(ElemKind::Bool, d);
      for (size_t i = 0; i < m.size(); i++)
        m.getHandle<bool>().raw(i) = true;
      I.setOutputConst(n, 1, std::move(m));
    } else {
      I.setOutput(n, 1, I.splat(I.opName(n, "mask"), ElemKind::Bool, d, 1));
    }
  }
  return Error::success();
}

Error convertReshape(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(Dims in, I.inputDims(n, 0));
  std::vector<int64_t> shape;
  if (I.opset < 5) {
    shape = I.attrInts(n, "shape");
  } else {
    KILN_ASSIGN_OR_RETURN(shape, intsInput(I, n, 1, "shape"));
  }
  bool allowZero = I.attrInt(n, "allowzero", 0) != 0;
  std::vector<dim_t> out;
  int inferred = -1;
  dim_t known = 1;
  for (size_t i = 0; i < shape.size(); i++) {
    int64_t s = shape[i];
    if (s == 0 && !allowZero) {
      if (i >= in.size())
        return I.parseError(n, "shape entry ", i, " is 0 but the input ",
                            dimsToString(in), " has no such dimension");
      out.push_back(in[i]);
    } else if (s == -1) {
      if (inferred >= 0)
        return I.parseError(n, "the shape has more than one -1");
      inferred = int(i);
      out.push_back(1);
      continue;
    } else if (s < 0) {
      return I.parseError(n, "invalid shape entry ", s);
    } else {
      out.push_back(dim_t(s));
    }
    if (out.back() && known > I.opts.maxTensorElements / out.back())
      return I.parseError(n, "the shape is absurdly large");
    known *= out.back();
  }
  dim_t total = in.product();
  if (inferred >= 0) {
    if (known == 0 || total % known)
      return I.parseError(n, "cannot reshape ", dimsToString(in), " to [",
                          dimsToString(Dims()), "...] with -1: ", total, " elements are not "
                          "divisible by ", known);
    out[inferred] = total / known;
  }
  KILN_ASSIGN_OR_RETURN(Dims od, I.toDims(n, out));
  if (od.product() != total)
    return I.parseError(n, "cannot reshape ", dimsToString(in), " (", total,
                        " elements) to ", dimsToString(od));
  return bindReshaped(I, n, od);
}

Error convertFlatten(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(Dims in, I.inputDims(n, 0));
  KILN_ASSIGN_OR_RETURN(int64_t axis,
                        I.normAxis(n, I.attrInt(n, "axis", 1), int64_t(in.size()), true));
  dim_t outer = 1, inner = 1;
  for (size_t i = 0; i < in.size(); i++)
    (int64_t(i) < axis ? outer : inner) *= in[i];
  return bindReshaped(I, n, Dims({outer, inner}));
}

Error convertSqueeze(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(Dims in, I.inputDims(n, 0));
  std::vector<int64_t> axes;
  if (I.opset >= 13) {
    if (I.hasInput(n, 1)) {
      KILN_ASSIGN_OR_RETURN(axes, intsInput(I, n, 1, "axes"));
    }
  } else {
    axes = I.attrInts(n, "axes");
  }
  std::vector<bool> drop(in.size(), false);
  if (axes.empty()) {
    for (size_t i = 0; i < in.size(); i++)
      drop[i] = in[i] == 1;
  }
  for (int64_t a : axes) {
    KILN_ASSIGN_OR_RETURN(int64_t ax, I.normAxis(n, a, int64_t(in.size())));
    if (in[ax] != 1)
      return I.parseError(n, "cannot squeeze dimension ", a, " of size ", in[ax], " in ",
                          dimsToString(in));
    drop[ax] = true;
  }
  std::vector<dim_t> out;
  for (size_t i = 0; i < in.size(); i++)
    if (!drop[i])
      out.push_back(in[i]);
  return bindReshaped(I, n, Dims(out));
}

Error convertUnsqueeze(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(Dims in, I.inputDims(n, 0));
  std::vector<int64_t> axes;
  if (I.opset >= 13) {
    KILN_ASSIGN_OR_RETURN(axes, intsInput(I, n, 1, "axes"));
  } else {
    axes = I.attrInts(n, "axes");
  }
  int64_t r = int64_t(in.size() + axes.size());
  if (r > int64_t(kMaxDims))
    return I.unsupported(n, "a result of rank ", r);
  std::vector<bool> isNew(r, false);
  for (int64_t a : axes) {
    KILN_ASSIGN_OR_RETURN(int64_t ax, I.normAxis(n, a, r));
    if (isNew[ax])
      return I.parseError(n, "axis ", a, " is repeated");
    isNew[ax] = true;
  }
  std::vector<dim_t> out;
  size_t j = 0;
  for (int64_t i = 0; i < r; i++)
    out.push_back(isNew[i] ? 1 : in[j++]);
  return bindReshaped(I, n, Dims(out));
}

Error convertTranspose(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(Dims in, I.inputDims(n, 0));
  std::vector<int64_t> perm = I.attrInts(n, "perm");
  size_t r = in.size();
  if (perm.empty())
    for (size_t i = 0; i < r; i++)
      perm.push_back(int64_t(r - 1 - i));
  if (perm.size() != r)
    return I.parseError(n, "perm has ", perm.size(), " entries for rank ", r);
  std::vector<bool> seen(r, false);
  std::vector<dim_t> shuffle, out;
  for (int64_t p : perm) {
    if (p < 0 || p >= int64_t(r) || seen[p])
      return I.parseError(n, "perm is not a permutation of 0..", r - 1);
    seen[p] = true;
    shuffle.push_back(dim_t(p));
    out.push_back(in[p]);
  }
  if (const Tensor *t = foldableData(I, n)) {
    Dims od(out), strides = t->getType().strides();
    I.setOutputConst(n, 0, gatherElements(*t, od, [&](size_t i) {
      std::vector<dim_t> idx = unflatten(i, od);
      size_t s = 0;
      for (size_t k = 0; k < r; k++)
        s += idx[k] * strides[shuffle[k]];
      return s;
    }));
    return Error::success();
  }
  KILN_ASSIGN_OR_RETURN(NodeValue v, I.input(n, 0));
  I.setOutput(n, 0, I.F->createTranspose(I.opName(n), v, shuffle));
  return Error::success();
}

Error convertConcat(Importer &I, const Node &n) {
  if (n.input_size() == 0)
    return I.parseError(n, "Concat needs at least one input");
  KILN_ASSIGN_OR_RETURN(Dims d0, I.inputDims(n, 0));
  KILN_ASSIGN_OR_RETURN(int64_t axis, I.normAxis(n, I.attrInt(n, "axis", 0), int64_t(d0.size())));
  // Check shapes, and drop empty inputs (exporters concatenate empty shape tensors).
  std::vector<int> used;
  dim_t total = 0;
  for (int i = 0; i < n.input_size(); i++) {
    KILN_ASSIGN_OR_RETURN(Dims d, I.inputDims(n, i));
    bool same = d.size() == d0.size();
    for (size_t k = 0; same && k < d.size(); k++)
      same = int64_t(k) == axis || d[k] == d0[k];
    if (!same)
      return I.parseError(n, "input ", i, " of shape ", dimsToString(d),
                          " does not match input 0 of shape ", dimsToString(d0),
                          " outside axis ", axis);
    total += d[axis];
    if (d.product() != 0)
      used.push_back(i);
  }
  Dims od = d0;
  od[axis] = total;
  if (used.empty()) {
    KILN_ASSIGN_OR_RETURN(ElemKind k, I.inputKind(n, 0));
    I.setOutputConst(n, 0, Tensor(k, od));
    return Error::success();
  }
  if (auto ins = I.allConst(n)) {
    // Evaluate: copy the inputs' blocks in turn.
    ElemKind k = (*ins)[0]->getElementType();
    Tensor out(Type::withDims((*ins)[0]->getType(), od));
    dim_t outer = 1, inner = 1;
    for (int64_t k2 = 0; k2 < axis; k2++)
      outer *= od[k2];
    for (size_t k2 = axis + 1; k2 < od.size(); k2++)
      inner *= od[k2];
    size_t es = out.getType().elemBytes(), off = 0;
    for (int i : used) {
      const Tensor *t = (*ins)[i];
      if (t->getElementType() != k)
        return I.parseError(n, "inputs have different element types");
      size_t block = t->dims()[axis] * inner * es;
      for (dim_t o = 0; o < outer; o++)
        std::memcpy(out.getUnsafePtr() + (o * od[axis] * inner) * es + off,
                    t->getUnsafePtr() + o * block, block);
      off += block;
    }
    I.setOutputConst(n, 0, std::move(out));
    return Error::success();
  }
  std::vector<NodeValue> vs;
  for (int i : used) {
    KILN_ASSIGN_OR_RETURN(NodeValue v, I.input(n, i));
    vs.push_back(v);
  }
  if (vs.size() == 1)
    I.setOutput(n, 0, vs[0]);
  else
    I.setOutput(n, 0, I.F->createConcat(I.opName(n), vs, axis));
  return Error::success();
}

Error convertSplit(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(Dims in, I.inputDims(n, 0));
  KILN_ASSIGN_OR_RETURN(int64_t axis, I.normAxis(n, I.attrInt(n, "axis", 0), int64_t(in.size())));
  std::vector<int64_t> split;
  if (I.opset >= 13) {
    if (I.hasInput(n, 1)) {
      KILN_ASSIGN_OR_RETURN(split, intsInput(I, n, 1, "split"));
    }
  } else {
    split = I.attrInts(n, "split");
  }
  int outs = n.output_size();
  if (outs == 0)
    return I.parseError(n, "Split has no outputs");
  if (split.empty()) {
    if (in[axis] % dim_t(outs))
      return I.parseError(n, "dimension ", axis, " of ", dimsToString(in),
                          " does not split evenly into ", outs, " outputs");
    split.assign(outs, int64_t(in[axis] / outs));
  }
  if (int(split.size()) != outs)
    return I.parseError(n, "split has ", split.size(), " sizes for ", outs, " outputs");
  int64_t sum = 0;
  for (int64_t s : split) {
    if (s < 0)
      return I.parseError(n, "negative split size ", s);
    // Each size is at most the dimension, so the running sum cannot overflow.
    if (s > int64_t(in[axis]) - sum)
      return I.parseError(n, "split sizes exceed dimension ", axis, " of ", dimsToString(in),
                          " (", in[axis], ")");
    sum += s;
  }
  if (sum != int64_t(in[axis]))
    return I.parseError(n, "split sizes add up to ", sum, ", not ", in[axis]);
  const Tensor *t = foldableData(I, n);
  NodeValue v;
  if (!t) {
    KILN_ASSIGN_OR_RETURN(v, I.input(n, 0));
  }
  dim_t start = 0;
  for (int o = 0; o < outs; o++) {
    std::vector<dim_t> starts(in.size(), 0), ends = in.vec();
    starts[axis] = start;
    ends[axis] = start + dim_t(split[o]);
    start = ends[axis];
    if (!I.hasOutput(n, o))
      continue;
    Dims od = in;
    od[axis] = dim_t(split[o]);
    if (t) {
      Dims strides = t->getType().strides();
      I.setOutputConst(n, o, gatherElements(*t, od, [&](size_t i) {
        std::vector<dim_t> idx = unflatten(i, od);
        size_t s = 0;
        for (size_t k = 0; k < idx.size(); k++)
          s += (idx[k] + starts[k]) * strides[k];
        return s;
      }));
    } else if (split[o] > 0) {
      I.setOutput(n, o, I.F->createSlice(I.opName(n, std::to_string(o).c_str()), v, starts,
                                         ends));
    }
  }
  return Error::success();
}

Error convertSlice(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(Dims in, I.inputDims(n, 0));
  std::vector<int64_t> starts, ends, axes, steps;
  if (I.opset < 10) {
    starts = I.attrInts(n, "starts");
    ends = I.attrInts(n, "ends");
    axes = I.attrInts(n, "axes");
  } else {
    KILN_ASSIGN_OR_RETURN(starts, intsInput(I, n, 1, "starts"));
    KILN_ASSIGN_OR_RETURN(ends, intsInput(I, n, 2, "ends"));
    if (I.hasInput(n, 3)) {
      KILN_ASSIGN_OR_RETURN(axes, intsInput(I, n, 3, "axes"));
    }
    if (I.hasInput(n, 4)) {
      KILN_ASSIGN_OR_RETURN(steps, intsInput(I, n, 4, "steps"));
    }
  }
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); i++)
      axes.push_back(int64_t(i));
  if (steps.empty())
    steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size())
    return I.parseError(n, "starts, ends, axes and steps differ in length");
  size_t r = in.size();
  std::vector<int64_t> st(r, 0), step(r, 1), cnt(r);
  for (size_t k = 0; k < r; k++)
    cnt[k] = int64_t(in[k]);
  std::vector<bool> seen(r, false);
  for (size_t i = 0; i < starts.size(); i++) {
    KILN_ASSIGN_OR_RETURN(int64_t ax, I.normAxis(n, axes[i], int64_t(r)));
    if (seen[ax])
      return I.parseError(n, "axis ", axes[i], " is repeated");
    seen[ax] = true;
    int64_t d = int64_t(in[ax]), s = starts[i], e = ends[i], p = steps[i];
    if (p == 0)
      return I.parseError(n, "a step is 0");
    // A step longer than the axis picks at most one element: clamp it, so that no
    // arithmetic below overflows (steps such as INT64_MIN come from malformed files).
    int64_t maxStep = std::max<int64_t>(d, 1);
    p = p > 0 ? std::min(p, maxStep) : std::max(p, -maxStep);
    if (s < 0)
      s = s < -d ? 0 : s + d;
    if (e < 0)
      e = e < -d ? -1 : e + d; // -1: before the first element (negative steps)
    if (p > 0) {
      s = std::clamp<int64_t>(s, 0, d);
      e = std::clamp<int64_t>(e, 0, d);
    } else {
      s = std::clamp<int64_t>(s, 0, d - 1);
      e = std::clamp<int64_t>(e, -1, d - 1);
    }
    int64_t c = p > 0 ? (e - s + p - 1) / p : (s - e + (-p) - 1) / (-p);
    st[ax] = s;
    step[ax] = p;
    cnt[ax] = std::max<int64_t>(c, 0);
  }
  std::vector<dim_t> out(cnt.begin(), cnt.end());
  Dims od(out);
  if (const Tensor *t = foldableData(I, n)) {
    Dims strides = t->getType().strides();
    I.setOutputConst(n, 0, gatherElements(*t, od, [&](size_t i) {
      std::vector<dim_t> idx = unflatten(i, od);
      size_t s = 0;
      for (size_t k = 0; k < r; k++)
        s += size_t(st[k] + int64_t(idx[k]) * step[k]) * strides[k];
      return s;
    }));
    return Error::success();
  }
  KILN_ASSIGN_OR_RETURN(NodeValue v, I.input(n, 0));
  if (od.product() == 0)
    return I.unsupported(n, "the slice of ", dimsToString(in), " is empty");
  // Unit steps: one Slice. Other steps: a Gather of the picked indices along that axis.
  std::vector<dim_t> b(r), e(r);
  bool sliced = false;
  for (size_t k = 0; k < r; k++) {
    bool unit = step[k] == 1 || cnt[k] <= 1;
    b[k] = unit ? dim_t(st[k]) : 0;
    e[k] = unit ? dim_t(st[k] + cnt[k]) : in[k];
    sliced |= b[k] != 0 || e[k] != in[k];
  }
  if (sliced)
    v = I.F->createSlice(I.opName(n), v, b, e);
  for (size_t k = 0; k < r; k++) {
    if (step[k] == 1 || cnt[k] <= 1)
      continue;
    std::vector<int64_t> idx(cnt[k]);
    for (int64_t i = 0; i < cnt[k]; i++)
      idx[i] = st[k] + i * step[k];
    NodeValue ic = I.makeConstant(I.opName(n, "indices"),
                                  tensorFromInts(ElemKind::Int64I, {dim_t(cnt[k])}, idx));
    v = I.F->createGather(I.opName(n, "step"), v, ic, int64_t(k));
  }
  I.setOutput(n, 0, v);
  return Error::success();
}

Error convertGather(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(Dims in, I.inputDims(n, 0));
  KILN_ASSIGN_OR_RETURN(Dims id, I.inputDims(n, 1));
  KILN_ASSIGN_OR_RETURN(int64_t axis, I.normAxis(n, I.attrInt(n, "axis", 0), int64_t(in.size())));
  KILN_ASSIGN_OR_RETURN(ElemKind ik, I.inputKind(n, 1));
  if (!isIndexKind(ik))
    return I.parseError(n, "indices must be int32 or int64");
  std::vector<dim_t> out;
  for (int64_t k = 0; k < axis; k++)
    out.push_back(in[k]);
  for (dim_t d : id)
    out.push_back(d);
  for (size_t k = axis + 1; k < in.size(); k++)
    out.push_back(in[k]);
  KILN_ASSIGN_OR_RETURN(Dims od, I.toDims(n, out));
  if (const Tensor *idx = I.constInput(n, 1)) {
    for (int64_t v : tensorToInts(*idx))
      if (v < -int64_t(in[axis]) || v >= int64_t(in[axis]))
        return I.parseError(n, "index ", v, " is out of range for dimension ", axis, " of ",
                            dimsToString(in));
    const Tensor *t = foldableData(I, n);
    if (t && idx->size() <= kMaxFoldElements) {
      std::vector<int64_t> iv = tensorToInts(*idx);
      dim_t inner = 1;
      for (size_t k = axis + 1; k < in.size(); k++)
        inner *= in[k];
      size_t ni = iv.size();
      I.setOutputConst(n, 0, gatherElements(*t, od, [&](size_t i) {
        size_t inr = i % inner, rest = i / inner;
        size_t j = rest % ni, outer = rest / ni;
        int64_t g = iv[j] < 0 ? iv[j] + int64_t(in[axis]) : iv[j];
        return (outer * in[axis] + size_t(g)) * inner + inr;
      }));
      return Error::success();
    }
  }
  KILN_ASSIGN_OR_RETURN(NodeValue data, I.input(n, 0));
  KILN_ASSIGN_OR_RETURN(NodeValue indices, I.input(n, 1));
  I.setOutput(n, 0, I.F->createGather(I.opName(n), data, indices, axis));
  return Error::success();
}

Error convertPad(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(Dims in, I.inputDims(n, 0));
  std::string mode = I.attrString(n, "mode", "constant");
  std::vector<int64_t> pads;
  double value = 0;
  if (I.opset < 11) {
    pads = I.attrInts(n, I.opset < 2 ? "paddings" : "pads");
    value = I.attrFloat(n, "value", 0.0f);
  } else {
    KILN_ASSIGN_OR_RETURN(pads, intsInput(I, n, 1, "pads"));
    if (I.hasInput(n, 2)) {
      KILN_ASSIGN_OR_RETURN(const Tensor *cv, I.requireConstInput(n, 2, "constant_value"));
      if (cv->size() != 1)
        return I.parseError(n, "constant_value must hold one value");
      value = cv->getAsDouble(0);
    }
    if (I.hasInput(n, 3))
      return I.unsupported(n, "the axes input is not supported");
  }
  size_t r = in.size();
  if (pads.size() != 2 * r)
    return I.parseError(n, "pads has ", pads.size(), " entries for rank ", r);
  if (mode != "constant")
    return I.unsupported(n, "pad mode '", mode, "' is not supported");
  std::vector<dim_t> p, out;
  for (size_t k = 0; k < r; k++) {
    if (pads[k] < 0 || pads[k + r] < 0)
      return I.unsupported(n, "negative pads are not supported");
    out.push_back(in[k] + dim_t(pads[k]) + dim_t(pads[k + r]));
  }
  KILN_ASSIGN_OR_RETURN(Dims od, I.toDims(n, out));
  (void)od;
  for (int64_t v : pads)
    p.push_back(dim_t(v));
  KILN_ASSIGN_OR_RETURN(NodeValue v, I.input(n, 0));
  bool zero = std::all_of(p.begin(), p.end(), [](dim_t x) { return x == 0; });
  I.setOutput(n, 0, zero ? v : NodeValue(I.F->createPad(I.opName(n), v, p, float(value))));
  return Error::success();
}

Error convertExpand(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(Dims in, I.inputDims(n, 0));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> shape, intsInput(I, n, 1, "shape"));
  KILN_ASSIGN_OR_RETURN(Dims sd, checkedDims(shape, I.opts.maxTensorElements, "the shape"));
  Dims od;
  if (!broadcastShapes(in, sd, od))
    return I.parseError(n, "cannot expand ", dimsToString(in), " to ", dimsToString(sd));
  KILN_RETURN_IF_ERR(I.toDims(n, od.vec()).takeError());
  const Tensor *t = foldableData(I, n);
  if (t && od.product() <= kMaxFoldElements) {
    Dims strides = t->getType().strides();
    size_t off = od.size() - in.size();
    I.setOutputConst(n, 0, gatherElements(*t, od, [&](size_t i) {
      std::vector<dim_t> idx = unflatten(i, od);
      size_t s = 0;
      for (size_t k = 0; k < in.size(); k++)
        s += (in[k] == 1 ? 0 : idx[k + off]) * strides[k];
      return s;
    }));
    return Error::success();
  }
  KILN_ASSIGN_OR_RETURN(NodeValue v, I.input(n, 0));
  I.setOutput(n, 0, I.F->createBroadcastTo(I.opName(n), v, od));
  return Error::success();
}

Error convertTile(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(Dims in, I.inputDims(n, 0));
  KILN_ASSIGN_OR_RETURN(std::vector<int64_t> reps, intsInput(I, n, 1, "repeats"));
  if (reps.size() != in.size())
    return I.parseError(n, "repeats has ", reps.size(), " entries for rank ", in.size());
  std::vector<dim_t> rv, out;
  for (size_t k = 0; k < reps.size(); k++) {
    if (reps[k] < 0)
      return I.parseError(n, "negative repeat ", reps[k]);
    rv.push_back(dim_t(reps[k]));
    out.push_back(in[k] * rv.back());
  }
  KILN_ASSIGN_OR_RETURN(Dims od, I.toDims(n, out));
  const Tensor *t = foldableData(I, n);
  if (t && od.product() <= kMaxFoldElements) {
    Dims strides = t->getType().strides();
    I.setOutputConst(n, 0, gatherElements(*t, od, [&](size_t i) {
      std::vector<dim_t> idx = unflatten(i, od);
      size_t s = 0;
      for (size_t k = 0; k < in.size(); k++)
        s += (idx[k] % in[k]) * strides[k];
      return s;
    }));
    return Error::success();
  }
  KILN_ASSIGN_OR_RETURN(NodeValue v, I.input(n, 0));
  bool ones = std::all_of(rv.begin(), rv.end(), [](dim_t x) { return x == 1; });
  I.setOutput(n, 0, ones ? v : NodeValue(I.F->createTile(I.opName(n), v, rv)));
  return Error::success();
}

Error convertRange(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(const Tensor *a, I.requireConstInput(n, 0, "start"));
  KILN_ASSIGN_OR_RETURN(const Tensor *b, I.requireConstInput(n, 1, "limit"));
  KILN_ASSIGN_OR_RETURN(const Tensor *c, I.requireConstInput(n, 2, "delta"));
  if (a->size() != 1 || b->size() != 1 || c->size() != 1)
    return I.parseError(n, "start, limit and delta must be scalars");
  ElemKind k = a->getElementType();
  double s = a->getAsDouble(0), l = b->getAsDouble(0), d = c->getAsDouble(0);
  if (d == 0)
    return I.parseError(n, "delta is 0");
  double cnt = std::max(std::ceil((l - s) / d), 0.0);
  if (!(cnt <= double(I.opts.maxTensorElements)))
    return I.parseError(n, "the range is absurdly large");
  size_t m = size_t(cnt);
  if (isFloatKind(k)) {
    std::vector<double> v(m);
    for (size_t i = 0; i < m; i++)
      v[i] = s + double(i) * d;
    I.setOutputConst(n, 0, tensorFromDoubles(k, {dim_t(m)}, v));
  } else {
    std::vector<int64_t> v(m);
    int64_t si = tensorToInts(*a)[0], di = tensorToInts(*c)[0];
    // In unsigned arithmetic: near the int64 limits the count above (computed in double)
    // may be one too many, and that element must not be signed overflow.
    for (size_t i = 0; i < m; i++)
      v[i] = int64_t(uint64_t(si) + uint64_t(i) * uint64_t(di));
    I.setOutputConst(n, 0, tensorFromInts(k, {dim_t(m)}, v));
  }
  return Error::success();
}

/// DepthToSpace / SpaceToDepth as reshape, transpose, reshape.
Error convertDepthSpace(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(NodeValue x, I.input(n, 0));
  const Dims &d = x.dims();
  int64_t bs = I.attrInt(n, "blocksize", 0);
  if (d.size() != 4 || bs <= 0)
    return I.parseError(n, "needs a 4-D input and a positive blocksize");
  dim_t b = dim_t(bs), N = d[0], C = d[1], H = d[2], W = d[3];
  Function *F = I.F;
  NodeValue y;
  if (n.op_type() == "DepthToSpace") {
    if (C % (b * b))
      return I.parseError(n, "channels ", C, " are not divisible by blocksize^2");
    bool crd = I.attrString(n, "mode", "DCR") == "CRD";
    dim_t c = C / (b * b);
    y = crd ? I.reshape(I.opName(n, "split"), x, Dims({N, c, b, b, H, W}))
            : I.reshape(I.opName(n, "split"), x, Dims({N, b, b, c, H, W}));
    y = crd ? F->createTranspose(I.opName(n, "perm"), y, {0, 1, 4, 2, 5, 3})
            : F->createTranspose(I.opName(n, "perm"), y, {0, 3, 4, 1, 5, 2});
    y = I.reshape(I.opName(n), y, Dims({N, c, H * b, W * b}));
  } else {
    if (H % b || W % b)
      return I.parseError(n, "spatial dims are not divisible by blocksize");
    y = I.reshape(I.opName(n, "split"), x, Dims({N, C, H / b, b, W / b, b}));
    y = F->createTranspose(I.opName(n, "perm"), y, {0, 3, 5, 1, 2, 4});
    y = I.reshape(I.opName(n), y, Dims({N, C * b * b, H / b, W / b}));
  }
  I.setOutput(n, 0, y);
  return Error::success();
}

/// Resize and Upsample in nearest mode with integer scales: every element repeats s times
/// along each scaled dimension (Reshape, Broadcast, Reshape). Other modes are unsupported.
Error convertResize(Importer &I, const Node &n) {
  bool isUpsample = n.op_type() == "Upsample";
  KILN_ASSIGN_OR_RETURN(NodeValue x, I.input(n, 0));
  const Dims &d = x.dims();
  std::string mode = I.attrString(n, "mode", "nearest");
  if (mode != "nearest")
    return I.unsupported(n, "mode '", mode, "' is not supported (only nearest)");
  std::string ctm = I.attrString(n, "coordinate_transformation_mode",
                                 isUpsample || I.opset < 11 ? "asymmetric" : "half_pixel");
  std::string nm = I.attrString(n, "nearest_mode", isUpsample || I.opset < 11
                                                      ? "floor" : "round_prefer_floor");
  // With an integer scale s, output j*s..j*s+s-1 maps to source j under these modes.
  bool ok = ((ctm == "half_pixel" || ctm == "pytorch_half_pixel") &&
             (nm == "round_prefer_floor" || nm == "round_prefer_ceil")) ||
            (ctm == "asymmetric" && (nm == "floor" || nm == "round_prefer_floor"));
  if (!ok)
    return I.unsupported(n, "coordinate_transformation_mode '", ctm, "' with nearest_mode '",
                         nm, "' is not supported");
  std::vector<double> scales;
  if (isUpsample && I.opset < 9) {
    const onnx::AttributeProto *a = I.attr(n, "scales");
    if (a)
      scales.assign(a->floats().begin(), a->floats().end());
  } else {
    int si = isUpsample || I.opset < 11 ? 1 : 2;
    const Tensor *s = I.hasInput(n, si) ? I.constInput(n, si) : nullptr;
    if (I.hasInput(n, si) && !s)
      return I.unsupported(n, "the scales input is computed at run time; kiln needs it "
                           "constant at load time");
    if (s && s->size())
      scales = tensorToDoubles(*s);
    if (scales.empty() && !isUpsample && I.hasInput(n, 3)) {
      KILN_ASSIGN_OR_RETURN(const Tensor *sz, I.requireConstInput(n, 3, "sizes"));
      std::vector<int64_t> sizes = tensorToInts(*sz);
      if (sizes.size() != d.size())
        return I.parseError(n, "sizes has ", sizes.size(), " entries for rank ", d.size());
      for (size_t i = 0; i < d.size(); i++)
        scales.push_back(double(sizes[i]) / double(d[i]));
    }
  }
  if (scales.size() != d.size())
    return I.parseError(n, "scales has ", scales.size(), " entries for rank ", d.size());
  std::vector<dim_t> expanded, target, out;
  for (size_t i = 0; i < d.size(); i++) {
    double s = scales[i];
    if (s < 1 || s != std::floor(s))
      return I.unsupported(n, "scale ", s, " is not supported (only integer upscaling)");
    expanded.push_back(d[i]);
    target.push_back(d[i]);
    out.push_back(d[i] * dim_t(s));
    if (s > 1) {
      expanded.push_back(1);
      target.push_back(dim_t(s));
    }
  }
  KILN_ASSIGN_OR_RETURN(Dims ed, I.toDims(n, expanded));
  KILN_ASSIGN_OR_RETURN(Dims td, I.toDims(n, target));
  KILN_ASSIGN_OR_RETURN(Dims od, I.toDims(n, out));
  NodeValue y = I.reshape(I.opName(n, "expand"), x, ed);
  y = I.F->createBroadcastTo(I.opName(n, "repeat"), y, td);
  I.setOutput(n, 0, I.reshape(I.opName(n), y, od));
  return Error::success();
}

} // namespace

void registerDataConverters(ConverterMap &m) {
  m["Constant"] = convertConstant;
  m["ConstantOfShape"] = convertConstantOfShape;
  m["Shape"] = convertShape;
  m["Size"] = convertSize;
  m["Identity"] = convertIdentity;
  m["Dropout"] = convertIdentity;
  m["Reshape"] = convertReshape;
  m["Flatten"] = convertFlatten;
  m["Squeeze"] = convertSqueeze;
  m["Unsqueeze"] = convertUnsqueeze;
  m["Transpose"] = convertTranspose;
  m["Concat"] = convertConcat;
  m["Split"] = convertSplit;
  m["Slice"] = convertSlice;
  m["Gather"] = convertGather;
  m["Pad"] = convertPad;
  m["Expand"] = convertExpand;
  m["Tile"] = convertTile;
  m["Range"] = convertRange;
  m["DepthToSpace"] = convertDepthSpace;
  m["SpaceToDepth"] = convertDepthSpace;
  m["Resize"] = convertResize;
  m["Upsample"] = convertResize;
}

} // namespace kiln::onnximport
