// Converters of the data-movement family: constants, shapes, reshapes, slicing,
// gathering, padding, broadcasting, depth/space rearrangement and resizing. The shape
// operators evaluate their node in the importer when the data input is a small known
// constant (shape subgraphs), and build graph nodes otherwise.

#include "ONNXImporter.h"

#include <algorithm>
#include <cmath>
#include <limits>
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
    // Training mode drops at random, unless the ratio is 0.
    KILN_ASSIGN_OR_RETURN(const Tensor *training, I.requireConstInput(n, 2, "training_mode"));
    if (training->size() != 1)
      return I.parseError(n, "training_mode must hold one value");
    if (training->getAsDouble(0) != 0) {
      if (!I.hasInput(n, 1))
        return I.unsupported(n, "Dropout in training mode is not supported");
      KILN_ASSIGN_OR_RETURN(const Tensor *ratio, I.requireConstInput(n, 1, "ratio"));
      if (ratio->size() != 1 || ratio->getAsDouble(0) != 0)
        return I.unsupported(n, "Dropout in training mode is not supported");
    }
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

/// What a Slice picks along every axis of its input: a first index, a step (clamped to
/// the axis, so no arithmetic overflows) and a count.
struct SliceWindow {
  std::vector<int64_t> start, step, count;
};

/// One axis of a Slice, normalized: \p s and \p e as ONNX gives them, \p p the step.
void sliceAxis(int64_t d, int64_t s, int64_t e, int64_t p, int64_t &start, int64_t &step,
               int64_t &count) {
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
  start = s;
  step = p;
  count = std::max<int64_t>(c, 0);
}

Expected<SliceWindow> readSlice(Importer &I, const Node &n, const Dims &in) {
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
  SliceWindow w{std::vector<int64_t>(r, 0), std::vector<int64_t>(r, 1), {}};
  for (size_t k = 0; k < r; k++)
    w.count.push_back(int64_t(in[k]));
  std::vector<bool> seen(r, false);
  for (size_t i = 0; i < starts.size(); i++) {
    KILN_ASSIGN_OR_RETURN(int64_t ax, I.normAxis(n, axes[i], int64_t(r)));
    if (seen[ax])
      return I.parseError(n, "axis ", axes[i], " is repeated");
    seen[ax] = true;
    if (steps[i] == 0)
      return I.parseError(n, "a step is 0");
    sliceAxis(int64_t(in[ax]), starts[i], ends[i], steps[i], w.start[ax], w.step[ax],
              w.count[ax]);
  }
  return w;
}

/// A Slice of a run-time value: one Slice node over the axes of unit step, then a Gather of
/// the picked indices along each other axis.
NodeValue sliceByNodes(Importer &I, const Node &n, NodeValue v, const Dims &in,
                       const SliceWindow &w) {
  const size_t r = in.size();
  std::vector<dim_t> b(r), e(r);
  bool sliced = false;
  for (size_t k = 0; k < r; k++) {
    bool unit = w.step[k] == 1 || w.count[k] <= 1;
    b[k] = unit ? dim_t(w.start[k]) : 0;
    e[k] = unit ? dim_t(w.start[k] + w.count[k]) : in[k];
    sliced |= b[k] != 0 || e[k] != in[k];
  }
  if (sliced)
    v = I.F->createSlice(I.opName(n), v, b, e);
  for (size_t k = 0; k < r; k++) {
    if (w.step[k] == 1 || w.count[k] <= 1)
      continue;
    std::vector<int64_t> idx(w.count[k]);
    for (int64_t i = 0; i < w.count[k]; i++)
      idx[i] = w.start[k] + i * w.step[k];
    NodeValue ic = I.makeConstant(I.opName(n, "indices"),
                                  tensorFromInts(ElemKind::Int64I, {dim_t(w.count[k])}, idx));
    v = I.F->createGather(I.opName(n, "step"), v, ic, int64_t(k));
  }
  return v;
}

Error convertSlice(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(Dims in, I.inputDims(n, 0));
  KILN_ASSIGN_OR_RETURN(SliceWindow w, readSlice(I, n, in));
  const size_t r = in.size();
  Dims od(std::vector<dim_t>(w.count.begin(), w.count.end()));
  if (const Tensor *t = foldableData(I, n)) {
    Dims strides = t->getType().strides();
    I.setOutputConst(n, 0, gatherElements(*t, od, [&](size_t i) {
      std::vector<dim_t> idx = unflatten(i, od);
      size_t s = 0;
      for (size_t k = 0; k < r; k++)
        s += size_t(w.start[k] + int64_t(idx[k]) * w.step[k]) * strides[k];
      return s;
    }));
    return Error::success();
  }
  KILN_ASSIGN_OR_RETURN(NodeValue v, I.input(n, 0));
  if (od.product() == 0)
    return I.unsupported(n, "the slice of ", dimsToString(in), " is empty");
  I.setOutput(n, 0, sliceByNodes(I, n, v, in, w));
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

/// A constant Int64 index vector.
NodeValue indexConst(Importer &I, const Node &n, const char *part,
                     const std::vector<int64_t> &v) {
  return I.makeConstant(I.opName(n, part), tensorFromInts(ElemKind::Int64I, {dim_t(v.size())}, v));
}

/// Pad: constant (a value known at load, or one computed at run time), edge and reflect;
/// negative pads crop. Edge and reflect are a Gather of computed source indices per axis.
/// A Pad node's attributes and inputs, read for every opset.
struct PadSpec {
  std::string mode;
  std::vector<int64_t> pads; ///< begins of every axis, then ends; negative ones crop
  double value = 0;
  bool runtimeValue = false; ///< the constant value is input 2, known only at run time
};

Expected<PadSpec> readPad(Importer &I, const Node &n) {
  PadSpec ps;
  ps.mode = I.attrString(n, "mode", "constant");
  if (I.opset < 11) {
    ps.pads = I.attrInts(n, I.opset < 2 ? "paddings" : "pads");
    ps.value = I.attrFloat(n, "value", 0.0f);
    return ps;
  }
  KILN_ASSIGN_OR_RETURN(ps.pads, intsInput(I, n, 1, "pads"));
  if (I.hasInput(n, 2) && ps.mode == "constant") {
    if (const Tensor *cv = I.constInput(n, 2)) {
      if (cv->size() != 1)
        return I.parseError(n, "constant_value must hold one value");
      ps.value = cv->getAsDouble(0);
    } else {
      KILN_ASSIGN_OR_RETURN(Dims vd, I.inputDims(n, 2));
      if (vd.product() != 1)
        return I.parseError(n, "constant_value must hold one value");
      ps.runtimeValue = true;
    }
  }
  if (I.hasInput(n, 3))
    return I.unsupported(n, "the axes input is not supported");
  return ps;
}

/// Edge or reflect padding: one Gather per padded axis, of the source index of every
/// output position.
NodeValue padByGather(Importer &I, const Node &n, NodeValue v, const PadSpec &ps,
                      const Dims &in, const Dims &od) {
  const size_t r = in.size();
  for (size_t k = 0; k < r; k++) {
    if (ps.pads[k] == 0 && ps.pads[k + r] == 0)
      continue;
    int64_t len = int64_t(in[k]);
    std::vector<int64_t> src(od[k]);
    for (int64_t o = 0; o < int64_t(od[k]); o++) {
      int64_t s = o - ps.pads[k];
      if (ps.mode == "edge") {
        s = std::clamp<int64_t>(s, 0, len - 1);
      } else {
        int64_t period = 2 * (len - 1);
        s = ((s % period) + period) % period;
        if (s >= len)
          s = period - s;
      }
      src[o] = s;
    }
    v = I.F->createGather(I.opName(n, "edge"), v, indexConst(I, n, "src", src), int64_t(k));
  }
  return v;
}

/// Padding with a value known only at run time: pad with zeros, then select the value
/// wherever the input is not (\p p: the non-negative pads).
Expected<NodeValue> padWithRuntimeValue(Importer &I, const Node &n, NodeValue v,
                                        const std::vector<dim_t> &p, const Dims &od) {
  const size_t r = od.size();
  NodeValue padded = I.F->createPad(I.opName(n, "zeros"), v, p, 0.0f);
  Tensor mask(ElemKind::Bool, od);
  auto h = mask.getHandle<bool>();
  for (size_t i = 0; i < mask.size(); i++) {
    std::vector<dim_t> idx = unflatten(i, od);
    bool inside = true;
    for (size_t k = 0; k < r && inside; k++)
      inside = idx[k] >= p[k] && idx[k] < od[k] - p[k + r];
    h.raw(i) = inside;
  }
  KILN_ASSIGN_OR_RETURN(NodeValue cv, I.input(n, 2));
  cv = I.F->createBroadcastTo(
      I.opName(n, "value"), I.reshape(I.opName(n, "value1"), cv, Dims(std::vector<dim_t>(r, 1))),
      od);
  return NodeValue(I.F->createSelect(
      I.opName(n), I.makeConstant(I.opName(n, "mask"), std::move(mask)), padded, cv));
}

Error convertPad(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(Dims in, I.inputDims(n, 0));
  KILN_ASSIGN_OR_RETURN(PadSpec ps, readPad(I, n));
  const std::vector<int64_t> &pads = ps.pads;
  size_t r = in.size();
  if (pads.size() != 2 * r)
    return I.parseError(n, "pads has ", pads.size(), " entries for rank ", r);
  if (ps.mode != "constant" && ps.mode != "edge" && ps.mode != "reflect")
    return I.unsupported(n, "pad mode '", ps.mode, "' is not supported");
  std::vector<dim_t> out;
  for (size_t k = 0; k < r; k++) {
    int64_t o = int64_t(in[k]) + pads[k] + pads[k + r];
    if (o <= 0)
      return I.unsupported(n, "the padded result of ", dimsToString(in), " is empty");
    if (ps.mode == "reflect" && in[k] == 1 && (pads[k] > 0 || pads[k + r] > 0))
      return I.parseError(n, "reflect padding of a dimension of size 1");
    out.push_back(dim_t(o));
  }
  KILN_ASSIGN_OR_RETURN(Dims od, I.toDims(n, out));
  KILN_ASSIGN_OR_RETURN(NodeValue v, I.input(n, 0));
  if (ps.mode != "constant") {
    I.setOutput(n, 0, padByGather(I, n, v, ps, in, od));
    return Error::success();
  }
  // Crop negative pads first, then pad the rest.
  std::vector<dim_t> b(r), e(r), p(2 * r, 0);
  bool crop = false, grow = false;
  for (size_t k = 0; k < r; k++) {
    b[k] = pads[k] < 0 ? dim_t(-pads[k]) : 0;
    e[k] = in[k] - (pads[k + r] < 0 ? dim_t(-pads[k + r]) : 0);
    crop |= b[k] != 0 || e[k] != in[k];
    p[k] = pads[k] > 0 ? dim_t(pads[k]) : 0;
    p[k + r] = pads[k + r] > 0 ? dim_t(pads[k + r]) : 0;
    grow |= p[k] || p[k + r];
  }
  if (crop)
    v = I.F->createSlice(I.opName(n, "crop"), v, b, e);
  if (grow && !ps.runtimeValue) {
    v = I.F->createPad(I.opName(n), v, p, float(ps.value));
  } else if (grow) {
    KILN_ASSIGN_OR_RETURN(v, padWithRuntimeValue(I, n, v, p, od));
  }
  I.setOutput(n, 0, v);
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

/// How one axis of a Resize maps output positions to input elements: output o is
/// sum_j weight[o][j] * input[index[o][j]], or the extrapolation value where extrapolate[o].
struct AxisMap {
  std::vector<std::vector<int64_t>> index;
  std::vector<std::vector<double>> weight;
  std::vector<bool> extrapolate;
};

/// The coefficients ONNX's reference Resize gives to the neighbours of a point at
/// fraction \p ratio (in (0, 1]) past the lower one.
std::vector<double> resizeCoeffs(const std::string &mode, const std::string &nearest,
                                 double ratio, double A) {
  if (mode == "nearest") {
    if (ratio == 1.0)
      return {0, 1};
    if (nearest == "round_prefer_floor")
      return {double(ratio <= 0.5), double(ratio > 0.5)};
    if (nearest == "round_prefer_ceil")
      return {double(ratio < 0.5), double(ratio >= 0.5)};
    if (nearest == "floor")
      return {1, 0};
    return {0, 1}; // ceil
  }
  if (mode == "linear")
    return {1 - ratio, ratio};
  double q = 1 - ratio;
  return {((A * (ratio + 1) - 5 * A) * (ratio + 1) + 8 * A) * (ratio + 1) - 4 * A,
          ((A + 2) * ratio - (A + 3)) * ratio * ratio + 1,
          ((A + 2) * q - (A + 3)) * q * q + 1,
          ((A * (q + 1) - 5 * A) * (q + 1) + 8 * A) * (q + 1) - 4 * A};
}

/// The map of one axis from \p in to \p out elements, following ONNX's reference
/// implementation (onnx/backend/test/case/node/resize.py): the source coordinate of each
/// output, its n nearest neighbours in the edge-padded input (ties prefer the lower), and
/// their coefficients.
AxisMap resizeAxis(int64_t in, int64_t out, double scale, const std::string &mode,
                   const std::string &ctm, const std::string &nearest, double A,
                   bool excludeOutside, double roiStart, double roiEnd) {
  AxisMap m;
  double outW = scale * double(in);
  for (int64_t x = 0; x < out; x++) {
    double xo;
    bool extrap = false;
    if (ctm == "align_corners") {
      xo = outW == 1 ? 0 : double(x) * double(in - 1) / (outW - 1);
    } else if (ctm == "asymmetric") {
      xo = double(x) / scale;
    } else if (ctm == "tf_crop_and_resize") {
      xo = outW == 1 ? (roiEnd - roiStart) * double(in - 1) / 2
                     : double(x) * (roiEnd - roiStart) * double(in - 1) / (outW - 1);
      xo += roiStart * double(in - 1);
      extrap = xo < 0 || xo > double(in - 1);
    } else if (ctm == "tf_half_pixel_for_nn") {
      xo = (double(x) + 0.5) / scale;
    } else if (ctm == "pytorch_half_pixel") {
      xo = outW == 1 ? -0.5 : (double(x) + 0.5) / scale - 0.5;
    } else { // half_pixel
      xo = (double(x) + 0.5) / scale - 0.5;
    }
    double fl = std::floor(xo);
    double ratio = xo == fl ? 1.0 : xo - fl;
    std::vector<double> c = resizeCoeffs(mode, nearest, ratio, A);
    int64_t nn = int64_t(c.size()), pad = (nn + 1) / 2, limit = in + 2 * pad;
    // The nn indices of [0, limit) nearest to xo + pad, ties to the lower, sorted.
    double xp = xo + double(pad);
    int64_t lo = std::clamp<int64_t>(int64_t(std::floor(xp)) - nn, 0, limit - 1);
    int64_t hi = std::clamp<int64_t>(int64_t(std::floor(xp)) + nn + 1, 0, limit - 1);
    std::vector<int64_t> cand;
    for (int64_t i = lo; i <= hi; i++)
      cand.push_back(i);
    if (int64_t(cand.size()) < nn) { // xo far outside: the range's end
      cand.clear();
      for (int64_t i = 0; i < limit; i++)
        cand.push_back(i);
    }
    std::stable_sort(cand.begin(), cand.end(), [&](int64_t a, int64_t b) {
      double da = std::fabs(xp - double(a)), db = std::fabs(xp - double(b));
      return da < db || (da == db && a < b);
    });
    cand.resize(size_t(nn));
    std::sort(cand.begin(), cand.end());
    std::vector<int64_t> idx;
    for (int64_t i : cand)
      idx.push_back(i - pad);
    if (excludeOutside) {
      double sum = 0;
      for (int64_t j = 0; j < nn; j++) {
        if (idx[j] < 0 || idx[j] >= in)
          c[j] = 0;
        sum += c[j];
      }
      for (double &v : c)
        v /= sum;
    }
    for (int64_t &i : idx)
      i = std::clamp<int64_t>(i, 0, in - 1); // the edge padding
    m.index.push_back(idx);
    m.weight.push_back(c);
    m.extrapolate.push_back(extrap);
  }
  return m;
}

/// Resize's attributes and inputs, validated: every axis's scale and output size.
struct ResizeSpec {
  std::string mode, ctm, nearestMode;
  double cubicA = -0.75, extrapValue = 0;
  bool excludeOutside = false;
  std::vector<double> scales, roi;
  std::vector<int64_t> sizes;
};

Expected<ResizeSpec> readResize(Importer &I, const Node &n, const Dims &d) {
  bool isUpsample = n.op_type() == "Upsample";
  size_t r = d.size();
  ResizeSpec s;
  s.mode = I.attrString(n, "mode", "nearest");
  if (s.mode == "bilinear")
    s.mode = "linear";
  if (s.mode != "nearest" && s.mode != "linear" && s.mode != "cubic")
    return I.parseError(n, "unknown mode '", s.mode, "'");
  bool legacy = isUpsample || I.opset < 11;
  s.ctm = legacy ? "asymmetric"
                 : I.attrString(n, "coordinate_transformation_mode", "half_pixel");
  s.nearestMode = legacy ? "floor" : I.attrString(n, "nearest_mode", "round_prefer_floor");
  if (legacy && s.mode == "cubic")
    return I.parseError(n, "cubic mode needs opset 11");
  static const char *kCtm[] = {"half_pixel", "pytorch_half_pixel", "align_corners",
                               "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize"};
  if (std::find_if(std::begin(kCtm), std::end(kCtm), [&](const char *c) { return s.ctm == c; }) ==
      std::end(kCtm))
    return I.parseError(n, "unknown coordinate_transformation_mode '", s.ctm, "'");
  const std::string &nm = s.nearestMode;
  if (nm != "round_prefer_floor" && nm != "round_prefer_ceil" && nm != "floor" && nm != "ceil")
    return I.parseError(n, "unknown nearest_mode '", nm, "'");
  s.cubicA = I.attrFloat(n, "cubic_coeff_a", -0.75f);
  s.excludeOutside = I.attrInt(n, "exclude_outside", 0) != 0;
  s.extrapValue = I.attrFloat(n, "extrapolation_value", 0.0f);
  if (isUpsample && I.opset < 9) {
    if (const onnx::AttributeProto *a = I.attr(n, "scales"))
      s.scales.assign(a->floats().begin(), a->floats().end());
  } else {
    int si = legacy ? 1 : 2;
    if (I.hasInput(n, si)) {
      KILN_ASSIGN_OR_RETURN(const Tensor *t, I.requireConstInput(n, si, "scales"));
      s.scales = tensorToDoubles(*t);
    }
    if (!legacy && s.scales.empty() && I.hasInput(n, 3)) {
      KILN_ASSIGN_OR_RETURN(const Tensor *sz, I.requireConstInput(n, 3, "sizes"));
      s.sizes = tensorToInts(*sz);
    }
    if (!legacy && s.ctm == "tf_crop_and_resize" && I.hasInput(n, 1)) {
      KILN_ASSIGN_OR_RETURN(const Tensor *rt, I.requireConstInput(n, 1, "roi"));
      s.roi = tensorToDoubles(*rt);
    }
  }
  if (!s.sizes.empty()) {
    if (s.sizes.size() != r)
      return I.parseError(n, "sizes has ", s.sizes.size(), " entries for rank ", r);
    for (size_t i = 0; i < r; i++) {
      if (s.sizes[i] <= 0)
        return I.unsupported(n, "an empty result (sizes ", s.sizes[i], ")");
      s.scales.push_back(double(s.sizes[i]) / double(d[i]));
    }
  } else {
    if (s.scales.size() != r)
      return I.parseError(n, "scales has ", s.scales.size(), " entries for rank ", r);
    for (size_t i = 0; i < r; i++) {
      if (!(s.scales[i] > 0))
        return I.parseError(n, "scale ", s.scales[i], " is not positive");
      double o = std::floor(s.scales[i] * double(d[i]));
      if (o < 1)
        return I.unsupported(n, "an empty result (scale ", s.scales[i], ")");
      if (o > double(I.opts.maxTensorElements))
        return I.parseError(n, "the result is absurdly large");
      s.sizes.push_back(int64_t(o));
    }
  }
  if (s.ctm == "tf_crop_and_resize" && s.roi.size() != 2 * r)
    return I.parseError(n, "tf_crop_and_resize needs a roi of ", 2 * r, " values");
  return s;
}

/// \p y resized along axis \p a as \p m says (of resizeAxis): Gathers of constant source
/// indices weighted by constant coefficients and summed, the extrapolation value where the
/// source lies outside; \p y itself where the map is the identity.
NodeValue resizeAlongAxis(Importer &I, const Node &n, NodeValue y, size_t a, const AxisMap &m,
                          const ResizeSpec &s) {
  const size_t r = y.dims().size(), outA = size_t(s.sizes[a]), nn = m.index[0].size();
  const ElemKind kind = y.getElementType();
  bool identity = outA == y.dims()[a];
  bool anyExtrap = false;
  for (size_t o = 0; o < outA; o++) {
    anyExtrap |= m.extrapolate[o];
    for (size_t j = 0; j < nn; j++)
      if (m.weight[o][j] != 0 && (m.weight[o][j] != 1 || m.index[o][j] != int64_t(o)))
        identity = false;
  }
  if (identity && !anyExtrap)
    return y;
  std::string an = std::to_string(a);
  Dims yd = y.dims();
  yd[a] = dim_t(outA);
  std::vector<dim_t> wdims(r, 1);
  wdims[a] = dim_t(outA);
  NodeValue acc;
  if (s.mode == "nearest") {
    // One neighbour has coefficient 1 for every output: pick it, no arithmetic.
    std::vector<int64_t> src(outA);
    for (size_t o = 0; o < outA; o++)
      for (size_t j = 0; j < nn; j++)
        if (m.weight[o][j] == 1)
          src[o] = m.index[o][j];
    acc = I.F->createGather(I.opName(n, ("nearest" + an).c_str()), y,
                            indexConst(I, n, "src", src), int64_t(a));
  }
  for (size_t j = 0; s.mode != "nearest" && j < nn; j++) {
    bool used = false;
    std::vector<int64_t> src(outA);
    std::vector<double> w(outA);
    for (size_t o = 0; o < outA; o++) {
      src[o] = m.index[o][j];
      w[o] = m.weight[o][j];
      used |= w[o] != 0;
    }
    if (!used)
      continue;
    NodeValue g = I.F->createGather(I.opName(n, ("gather" + an).c_str()), y,
                                    indexConst(I, n, "src", src), int64_t(a));
    NodeValue wc =
        I.makeConstant(I.opName(n, "weights"), tensorFromDoubles(kind, Dims(wdims), w));
    NodeValue term = I.F->createMul(I.opName(n, ("weigh" + an).c_str()), g,
                                    I.F->createBroadcastTo(I.opName(n, "wb"), wc, yd));
    acc = acc.getNode()
              ? NodeValue(I.F->createAdd(I.opName(n, ("sum" + an).c_str()), acc, term))
              : term;
  }
  if (!acc.getNode())
    acc = I.splat(I.opName(n, "zero"), kind, yd, 0);
  if (anyExtrap) {
    Tensor mask(ElemKind::Bool, Dims(wdims));
    for (size_t o = 0; o < outA; o++)
      mask.getHandle<bool>().raw(o) = m.extrapolate[o];
    NodeValue mb = I.F->createBroadcastTo(
        I.opName(n, "maskb"), I.makeConstant(I.opName(n, "mask"), std::move(mask)), yd);
    acc = I.F->createSelect(I.opName(n, ("extrapolate" + an).c_str()), mb,
                            I.splat(I.opName(n, "extrap"), kind, yd, s.extrapValue), acc);
  }
  return acc;
}

/// Resize (opset 10 to 17) and Upsample: nearest with every nearest_mode, linear and cubic,
/// every coordinate_transformation_mode, any scale or size. Each resized axis, innermost
/// first, becomes Gathers of constant source indices along it (nearest: one; linear: two;
/// cubic: four) weighted by constant coefficients and summed; tf_crop_and_resize puts the
/// extrapolation value where the source is outside the input.
Error convertResize(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(NodeValue x, I.input(n, 0));
  const Dims d = x.dims();
  const size_t r = d.size();
  KILN_ASSIGN_OR_RETURN(ResizeSpec s, readResize(I, n, d));
  std::vector<dim_t> outv(d.begin(), d.end());
  for (size_t i = 0; i < r; i++)
    outv[i] = dim_t(s.sizes[i]);
  KILN_RETURN_IF_ERR(I.toDims(n, outv).takeError()); // the result's dims within the limits
  if (s.mode != "nearest" && !isFloatKind(x.getElementType()))
    return I.unsupported(n, s.mode, " resizing of ", x.getType()->toString());
  NodeValue y = x;
  for (size_t a = r; a-- > 0;) {
    AxisMap m = resizeAxis(int64_t(d[a]), s.sizes[a], s.scales[a], s.mode, s.ctm, s.nearestMode,
                           s.cubicA, s.excludeOutside, s.roi.empty() ? 0 : s.roi[a],
                           s.roi.empty() ? 1 : s.roi[a + r]);
    y = resizeAlongAxis(I, n, y, a, m, s);
  }
  I.setOutput(n, 0, y);
  return Error::success();
}

// ---- Gathers, scatters, masks and generated constants. ----

Error convertGatherElements(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(NodeValue data, I.input(n, 0));
  KILN_ASSIGN_OR_RETURN(NodeValue idx, I.input(n, 1));
  KILN_ASSIGN_OR_RETURN(int64_t axis, I.normAxis(n, I.attrInt(n, "axis", 0),
                                                 int64_t(data.dims().size())));
  I.setOutput(n, 0, I.F->createGatherElements(I.opName(n), data, idx, axis));
  return Error::success();
}

Error convertScatterElements(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(NodeValue data, I.input(n, 0));
  KILN_ASSIGN_OR_RETURN(NodeValue idx, I.input(n, 1));
  KILN_ASSIGN_OR_RETURN(NodeValue upd, I.input(n, 2));
  KILN_ASSIGN_OR_RETURN(int64_t axis, I.normAxis(n, I.attrInt(n, "axis", 0),
                                                 int64_t(data.dims().size())));
  std::string red = I.attrString(n, "reduction", "none");
  I.setOutput(n, 0, I.F->createScatterElements(I.opName(n), data, idx, upd, axis, red));
  return Error::success();
}

Error convertScatterND(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(NodeValue data, I.input(n, 0));
  KILN_ASSIGN_OR_RETURN(NodeValue idx, I.input(n, 1));
  KILN_ASSIGN_OR_RETURN(NodeValue upd, I.input(n, 2));
  std::string red = I.attrString(n, "reduction", "none");
  I.setOutput(n, 0, I.F->createScatterND(I.opName(n), data, idx, upd, red));
  return Error::success();
}

Error convertGatherND(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(NodeValue data, I.input(n, 0));
  KILN_ASSIGN_OR_RETURN(NodeValue idx, I.input(n, 1));
  int64_t b = I.attrInt(n, "batch_dims", 0);
  if (b < 0)
    return I.parseError(n, "batch_dims ", b, " is negative");
  I.setOutput(n, 0, I.F->createGatherND(I.opName(n), data, idx, dim_t(b)));
  return Error::success();
}

/// Trilu: a Select of the input and zeros by a constant mask over the last two dims.
Error convertTrilu(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(NodeValue x, I.input(n, 0));
  const Dims d = x.dims();
  if (d.size() < 2)
    return I.parseError(n, "the input ", x.getType()->toString(), " has rank below 2");
  int64_t k = 0;
  if (I.hasInput(n, 1)) {
    KILN_ASSIGN_OR_RETURN(const Tensor *kt, I.requireConstInput(n, 1, "k"));
    if (kt->size() != 1)
      return I.parseError(n, "k must hold one value");
    k = tensorToInts(*kt)[0];
  }
  bool upper = I.attrInt(n, "upper", 1) != 0;
  dim_t rows = d[d.size() - 2], cols = d[d.size() - 1];
  Tensor mask(ElemKind::Bool, {rows, cols});
  auto h = mask.getHandle<bool>();
  for (dim_t i = 0; i < rows; i++)
    for (dim_t j = 0; j < cols; j++) {
      int64_t diff = int64_t(j) - int64_t(i);
      h.raw(i * cols + j) = upper ? diff >= k : diff <= k;
    }
  NodeValue mb = I.F->createBroadcastTo(I.opName(n, "maskb"),
                                        I.makeConstant(I.opName(n, "mask"), std::move(mask)), d);
  I.setOutput(n, 0, I.F->createSelect(I.opName(n), mb, x,
                                      I.splat(I.opName(n, "zero"), x.getElementType(), d, 0)));
  return Error::success();
}

/// EyeLike: a constant of the input's shape (its values are not read).
Error convertEyeLike(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(Dims d, I.inputDims(n, 0));
  KILN_ASSIGN_OR_RETURN(ElemKind k, I.inputKind(n, 0));
  if (d.size() != 2)
    return I.parseError(n, "the input must be 2-D, not ", dimsToString(d));
  if (const onnx::AttributeProto *a = I.attr(n, "dtype")) {
    Expected<ElemKind> ek = elemKindFromONNX(int32_t(a->i()));
    if (!ek)
      return ek.takeError().addContext(I.describe(n));
    k = *ek;
  }
  int64_t off = I.attrInt(n, "k", 0);
  std::vector<int64_t> v(d.product(), 0);
  for (int64_t i = 0; i < int64_t(d[0]); i++) {
    int64_t j = i + off;
    if (j >= 0 && j < int64_t(d[1]))
      v[size_t(i) * d[1] + size_t(j)] = 1;
  }
  I.setOutputConst(n, 0, tensorFromInts(k, d, v));
  return Error::success();
}

/// OneHot: compares the (normalised) indices with 0..depth-1 along the new axis and selects
/// the on / off values; indices outside [-depth, depth) give all off.
Error convertOneHot(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(NodeValue idx, I.input(n, 0));
  KILN_ASSIGN_OR_RETURN(const Tensor *dt, I.requireConstInput(n, 1, "depth"));
  if (dt->size() != 1)
    return I.parseError(n, "depth must hold one value");
  int64_t depth = tensorToInts(*dt)[0];
  if (depth <= 0)
    return I.parseError(n, "depth ", depth, " is not positive");
  KILN_ASSIGN_OR_RETURN(Dims vd, I.inputDims(n, 2));
  if (vd.product() != 2)
    return I.parseError(n, "values must hold two elements, not ", dimsToString(vd));
  Dims id = idx.dims();
  int64_t r = int64_t(id.size()) + 1;
  KILN_ASSIGN_OR_RETURN(int64_t axis, I.normAxis(n, I.attrInt(n, "axis", -1), r));
  std::vector<dim_t> outv, expanded, iota(size_t(r), 1);
  for (int64_t i = 0, j = 0; i < r; i++) {
    if (i == axis) {
      outv.push_back(dim_t(depth));
      expanded.push_back(1);
    } else {
      outv.push_back(id[j]);
      expanded.push_back(id[j++]);
    }
  }
  iota[axis] = dim_t(depth);
  KILN_ASSIGN_OR_RETURN(Dims od, I.toDims(n, outv));
  Function *F = I.F;
  if (isFloatKind(idx.getElementType())) {
    // Float indices: truncated toward zero, as a Cast to int64.
    NodeValue neg = F->createCmpLT(I.opName(n, "isneg"), idx,
                                   I.splat(I.opName(n, "z"), idx.getElementType(), id, 0));
    idx = F->createSelect(I.opName(n, "trunc"), neg, F->createCeil(I.opName(n, "ceil"), idx),
                          F->createFloor(I.opName(n, "floor"), idx));
  }
  if (idx.getElementType() != ElemKind::Int64I)
    idx = F->createConvertTo(I.opName(n, "i64"), I.M->uniqueType(ElemKind::Int64I, id), idx);
  // Negative indices count from the end.
  NodeValue neg = F->createCmpLT(I.opName(n, "neg"), idx,
                                 I.splat(I.opName(n, "zero"), ElemKind::Int64I, id, 0));
  idx = F->createSelect(I.opName(n, "wrap"), neg,
                        F->createAdd(I.opName(n, "plusdepth"), idx,
                                     I.splat(I.opName(n, "depthv"), ElemKind::Int64I, id,
                                             double(depth))),
                        idx);
  std::vector<int64_t> iv(static_cast<size_t>(depth));
  std::iota(iv.begin(), iv.end(), 0);
  NodeValue ic = I.makeConstant(I.opName(n, "iota"), tensorFromInts(ElemKind::Int64I,
                                                                     Dims(iota), iv));
  NodeValue hit = F->createCmpEQ(
      I.opName(n, "hit"),
      F->createBroadcastTo(I.opName(n, "idxb"), I.reshape(I.opName(n, "idx1"), idx,
                                                          Dims(expanded)), od),
      F->createBroadcastTo(I.opName(n, "iotab"), ic, od));
  KILN_ASSIGN_OR_RETURN(NodeValue vals, I.input(n, 2));
  vals = I.reshape(I.opName(n, "vals"), vals, Dims({2}));
  std::vector<dim_t> ones(size_t(r), 1);
  auto pick = [&](dim_t i, const char *part) {
    NodeValue s = F->createSlice(I.opName(n, part), vals, {i}, {i + 1});
    return F->createBroadcastTo(I.opName(n, part), I.reshape(I.opName(n, part), s, Dims(ones)),
                                od);
  };
  I.setOutput(n, 0, F->createSelect(I.opName(n), hit, pick(1, "on"), pick(0, "off")));
  return Error::success();
}

/// ReverseSequence: a Gather of constant (batch, time) positions, the batch and time axes
/// moved first and flattened.
Error convertReverseSequence(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(NodeValue x, I.input(n, 0));
  const Dims d = x.dims();
  size_t r = d.size();
  if (r < 2)
    return I.parseError(n, "the input must have rank 2 or more");
  int64_t ba = I.attrInt(n, "batch_axis", 1), ta = I.attrInt(n, "time_axis", 0);
  if (!((ba == 0 && ta == 1) || (ba == 1 && ta == 0)))
    return I.parseError(n, "batch_axis and time_axis must be 0 and 1");
  KILN_ASSIGN_OR_RETURN(const Tensor *lt, I.requireConstInput(n, 1, "sequence_lens"));
  std::vector<int64_t> lens = tensorToInts(*lt);
  dim_t B = d[size_t(ba)], T = d[size_t(ta)];
  if (lens.size() != B)
    return I.parseError(n, "sequence_lens has ", lens.size(), " entries for batch ", B);
  // Flattened position of (b, t) in the first two dims (in their order in the input).
  auto pos = [&](int64_t b, int64_t t) { return ba == 0 ? b * int64_t(T) + t : t * int64_t(B) + b; };
  std::vector<int64_t> src(B * T);
  for (int64_t b = 0; b < int64_t(B); b++) {
    if (lens[b] < 0 || lens[b] > int64_t(T))
      return I.parseError(n, "sequence length ", lens[b], " is out of range [0, ", T, "]");
    for (int64_t t = 0; t < int64_t(T); t++)
      src[pos(b, t)] = pos(b, t < lens[b] ? lens[b] - 1 - t : t);
  }
  std::vector<dim_t> flat = {B * T};
  for (size_t i = 2; i < r; i++)
    flat.push_back(d[i]);
  NodeValue y = I.reshape(I.opName(n, "flat"), x, Dims(flat));
  y = I.F->createGather(I.opName(n, "gather"), y, indexConst(I, n, "src", src), 0);
  I.setOutput(n, 0, I.reshape(I.opName(n), y, d));
  return Error::success();
}

/// Hann, Hamming and Blackman windows: constants computed at load.
Error convertWindow(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(const Tensor *st, I.requireConstInput(n, 0, "size"));
  if (st->size() != 1)
    return I.parseError(n, "size must hold one value");
  int64_t size = tensorToInts(*st)[0];
  if (size <= 0 || uint64_t(size) > I.opts.maxTensorElements)
    return I.parseError(n, "size ", size, " is out of range");
  bool periodic = I.attrInt(n, "periodic", 1) != 0;
  Expected<ElemKind> k = elemKindFromONNX(int32_t(I.attrInt(n, "output_datatype", 1)));
  if (!k)
    return k.takeError().addContext(I.describe(n));
  double N = double(periodic ? size : size - 1);
  const double pi = 3.14159265358979323846;
  std::vector<double> v(static_cast<size_t>(size));
  for (int64_t i = 0; i < size; i++) {
    double a = N == 0 ? 0 : 2 * pi * double(i) / N;
    if (n.op_type() == "HannWindow")
      v[i] = 0.5 - 0.5 * std::cos(a);
    else if (n.op_type() == "HammingWindow")
      v[i] = 25.0 / 46 - 21.0 / 46 * std::cos(a);
    else
      v[i] = 0.42 - 0.5 * std::cos(a) + 0.08 * std::cos(2 * a);
  }
  I.setOutputConst(n, 0, tensorFromDoubles(*k, {dim_t(size)}, v));
  return Error::success();
}

/// Compress with a condition known at load: a Gather of the selected positions (of the
/// flattened input without an axis).
Error convertCompress(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(const Tensor *ct, I.requireConstInput(n, 1, "condition"));
  KILN_ASSIGN_OR_RETURN(NodeValue x, I.input(n, 0));
  const onnx::AttributeProto *ax = I.attr(n, "axis");
  int64_t axis = 0;
  if (ax) {
    KILN_ASSIGN_OR_RETURN(axis, I.normAxis(n, ax->i(), int64_t(x.dims().size())));
  } else {
    x = I.reshape(I.opName(n, "flat"), x, Dims({x.dims().product()}));
  }
  std::vector<int64_t> cond = tensorToInts(*ct), idx;
  dim_t len = x.dims()[size_t(axis)];
  if (cond.size() > len)
    return I.parseError(n, "the condition has ", cond.size(), " entries for a dimension of ", len);
  for (size_t i = 0; i < cond.size(); i++)
    if (cond[i])
      idx.push_back(int64_t(i));
  if (idx.empty())
    return I.unsupported(n, "the condition selects nothing (an empty result)");
  I.setOutput(n, 0, I.F->createGather(I.opName(n), x, indexConst(I, n, "selected", idx), axis));
  return Error::success();
}

/// NonZero of a tensor known at load: its count is static, so it folds.
Error convertNonZero(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(const Tensor *t, I.requireConstInput(n, 0, "X"));
  const Dims d = t->dims();
  std::vector<double> v = tensorToDoubles(*t);
  std::vector<std::vector<int64_t>> coords(d.size());
  size_t count = 0;
  for (size_t i = 0; i < v.size(); i++) {
    if (v[i] == 0)
      continue;
    std::vector<dim_t> idx = unflatten(i, d);
    for (size_t k = 0; k < d.size(); k++)
      coords[k].push_back(int64_t(idx[k]));
    count++;
  }
  if (count == 0)
    return I.unsupported(n, "no element is non-zero (an empty result)");
  std::vector<int64_t> flat;
  for (auto &c : coords)
    flat.insert(flat.end(), c.begin(), c.end());
  I.setOutputConst(n, 0, tensorFromInts(ElemKind::Int64I, {dim_t(d.size()), dim_t(count)}, flat));
  return Error::success();
}

/// NonMaxSuppression of boxes and scores known at load (the number selected is static only
/// then): greedy per batch and class in descending score order (ties: lower box first),
/// dropping boxes whose IoU with a kept one exceeds the threshold.
Error convertNonMaxSuppression(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(const Tensor *bt, I.requireConstInput(n, 0, "boxes"));
  KILN_ASSIGN_OR_RETURN(const Tensor *st, I.requireConstInput(n, 1, "scores"));
  int64_t maxOut = 0;
  double iouTh = 0, scoreTh = -std::numeric_limits<double>::infinity();
  if (I.hasInput(n, 2)) {
    KILN_ASSIGN_OR_RETURN(const Tensor *t, I.requireConstInput(n, 2, "max_output_boxes_per_class"));
    if (t->size())
      maxOut = tensorToInts(*t)[0];
  }
  if (I.hasInput(n, 3)) {
    KILN_ASSIGN_OR_RETURN(const Tensor *t, I.requireConstInput(n, 3, "iou_threshold"));
    if (t->size())
      iouTh = t->getAsDouble(0);
  }
  if (I.hasInput(n, 4)) {
    KILN_ASSIGN_OR_RETURN(const Tensor *t, I.requireConstInput(n, 4, "score_threshold"));
    if (t->size())
      scoreTh = t->getAsDouble(0);
  }
  const Dims bd = bt->dims(), sd = st->dims();
  if (bd.size() != 3 || bd[2] != 4 || sd.size() != 3 || sd[0] != bd[0] || sd[2] != bd[1])
    return I.parseError(n, "boxes ", dimsToString(bd), " and scores ", dimsToString(sd),
                        " must be [B, N, 4] and [B, C, N]");
  bool center = I.attrInt(n, "center_point_box", 0) != 0;
  std::vector<double> b = tensorToDoubles(*bt), s = tensorToDoubles(*st);
  dim_t B = bd[0], Nb = bd[1], C = sd[1];
  auto corners = [&](dim_t bi, dim_t k, double c[4]) { // y1, x1, y2, x2 with y1 <= y2
    const double *p = &b[(bi * Nb + k) * 4];
    if (center) {
      c[0] = p[1] - p[3] / 2, c[2] = p[1] + p[3] / 2, c[1] = p[0] - p[2] / 2, c[3] = p[0] + p[2] / 2;
    } else {
      c[0] = std::min(p[0], p[2]), c[2] = std::max(p[0], p[2]);
      c[1] = std::min(p[1], p[3]), c[3] = std::max(p[1], p[3]);
    }
  };
  auto iou = [&](dim_t bi, dim_t i, dim_t j) {
    double a[4], c[4];
    corners(bi, i, a);
    corners(bi, j, c);
    double ih = std::max(0.0, std::min(a[2], c[2]) - std::max(a[0], c[0]));
    double iw = std::max(0.0, std::min(a[3], c[3]) - std::max(a[1], c[1]));
    double inter = ih * iw;
    double uni = (a[2] - a[0]) * (a[3] - a[1]) + (c[2] - c[0]) * (c[3] - c[1]) - inter;
    return uni <= 0 ? 0.0 : inter / uni;
  };
  std::vector<int64_t> out;
  for (dim_t bi = 0; bi < B; bi++)
    for (dim_t ci = 0; ci < C; ci++) {
      std::vector<dim_t> order;
      for (dim_t k = 0; k < Nb; k++)
        if (s[(bi * C + ci) * Nb + k] > scoreTh)
          order.push_back(k);
      std::stable_sort(order.begin(), order.end(), [&](dim_t x, dim_t y) {
        return s[(bi * C + ci) * Nb + x] > s[(bi * C + ci) * Nb + y];
      });
      std::vector<dim_t> kept;
      for (dim_t k : order) {
        if (int64_t(kept.size()) >= maxOut)
          break;
        bool ok = true;
        for (dim_t j : kept)
          ok = ok && iou(bi, k, j) <= iouTh;
        if (ok) {
          kept.push_back(k);
          out.insert(out.end(), {int64_t(bi), int64_t(ci), int64_t(k)});
        }
      }
    }
  if (out.empty())
    return I.unsupported(n, "no box is selected (an empty result)");
  I.setOutputConst(n, 0, tensorFromInts(ElemKind::Int64I, {dim_t(out.size() / 3), 3}, out));
  return Error::success();
}

Error convertGridSample(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(NodeValue x, I.input(n, 0));
  KILN_ASSIGN_OR_RETURN(NodeValue g, I.input(n, 1));
  if (x.dims().size() != 4)
    return I.unsupported(n, "only 4-D inputs are supported, not ", x.getType()->toString());
  I.setOutput(n, 0, I.F->createGridSample(I.opName(n), x, g, I.attrString(n, "mode", "bilinear"),
                                          I.attrString(n, "padding_mode", "zeros"),
                                          I.attrInt(n, "align_corners", 0) != 0));
  return Error::success();
}

Error convertRoiAlign(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(NodeValue x, I.input(n, 0));
  KILN_ASSIGN_OR_RETURN(NodeValue rois, I.input(n, 1));
  KILN_ASSIGN_OR_RETURN(NodeValue bi, I.input(n, 2));
  std::string ctm = I.attrString(n, "coordinate_transformation_mode",
                                 I.opset >= 16 ? "half_pixel" : "output_half_pixel");
  if (ctm != "half_pixel" && ctm != "output_half_pixel")
    return I.parseError(n, "unknown coordinate_transformation_mode '", ctm, "'");
  int64_t oh = I.attrInt(n, "output_height", 1), ow = I.attrInt(n, "output_width", 1),
          sr = I.attrInt(n, "sampling_ratio", 0);
  if (oh <= 0 || ow <= 0 || sr < 0)
    return I.parseError(n, "output_height, output_width must be positive, sampling_ratio not "
                        "negative");
  I.setOutput(n, 0, I.F->createRoiAlign(I.opName(n), x, rois, bi, I.attrString(n, "mode", "avg"),
                                        dim_t(oh), dim_t(ow), dim_t(sr),
                                        I.attrFloat(n, "spatial_scale", 1.0f),
                                        ctm == "half_pixel"));
  return Error::success();
}

/// MaxUnpool: the values scattered at their flat Indices (positions in the pooling's
/// input, the inverse of its geometry) into zeros, then padded at the end to output_shape.
Error convertMaxUnpool(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(NodeValue x, I.input(n, 0));
  KILN_ASSIGN_OR_RETURN(NodeValue idx, I.input(n, 1));
  const Dims d = x.dims();
  if (d.size() < 3 || idx.dims() != d)
    return I.parseError(n, "X ", x.getType()->toString(), " and I ", idx.getType()->toString(),
                        " must have one shape with spatial dims");
  size_t sp = d.size() - 2;
  std::vector<int64_t> k = I.attrInts(n, "kernel_shape"), st = I.attrInts(n, "strides"),
                       pads = I.attrInts(n, "pads");
  if (k.size() != sp || (!st.empty() && st.size() != sp) || (!pads.empty() && pads.size() != 2 * sp))
    return I.parseError(n, "kernel_shape, strides and pads must have ", sp, " entries");
  std::vector<dim_t> out = d.vec();
  for (size_t i = 0; i < sp; i++) {
    int64_t o = (int64_t(d[2 + i]) - 1) * (st.empty() ? 1 : st[i]) + k[i] -
                (pads.empty() ? 0 : pads[i] + pads[i + sp]);
    if (o <= 0)
      return I.parseError(n, "the unpooled size is not positive");
    out[2 + i] = dim_t(o);
  }
  KILN_ASSIGN_OR_RETURN(Dims od, I.toDims(n, out));
  std::vector<dim_t> grow(2 * d.size(), 0);
  bool padded = false;
  if (I.hasInput(n, 2)) {
    KILN_ASSIGN_OR_RETURN(const Tensor *os, I.requireConstInput(n, 2, "output_shape"));
    std::vector<int64_t> v = tensorToInts(*os);
    if (v.size() != d.size())
      return I.parseError(n, "output_shape has ", v.size(), " entries for rank ", d.size());
    for (size_t i = 0; i < v.size(); i++) {
      if (v[i] < int64_t(od[i]))
        return I.unsupported(n, "output_shape ", v[i], " below the unpooled size ", od[i]);
      grow[d.size() + i] = dim_t(v[i]) - od[i];
      padded |= grow[d.size() + i] != 0;
    }
  }
  Function *F = I.F;
  NodeValue zeros = I.splat(I.opName(n, "zeros"), x.getElementType(), Dims({od.product()}), 0);
  NodeValue flatX = I.reshape(I.opName(n, "xflat"), x, Dims({d.product()}));
  NodeValue flatI = I.reshape(I.opName(n, "iflat"), idx, Dims({d.product()}));
  NodeValue y = F->createScatterElements(I.opName(n), zeros, flatI, flatX, 0, "none");
  y = I.reshape(I.opName(n, "shape"), y, od);
  if (padded)
    y = F->createPad(I.opName(n, "outshape"), y, grow, 0.0f);
  I.setOutput(n, 0, y);
  return Error::success();
}

/// Binds output \p i of \p n to a subgraph value.
void bindSub(Importer &I, const Node &n, int i, Importer::SubValue v) {
  if (v.c)
    I.setOutputConst(n, i, std::move(*v.c));
  else
    I.setOutput(n, i, v.v);
}

/// A graph value of a subgraph value (constants materialised).
NodeValue subNode(Importer &I, const Node &n, Importer::SubValue &v) {
  if (v.c)
    return I.makeConstant(I.opName(n, "const"), v.c->clone());
  return v.v;
}

/// If with a condition known at load: the chosen branch is converted in place.
Error convertIf(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(const Tensor *c, I.requireConstInput(n, 0, "cond"));
  if (c->size() != 1)
    return I.parseError(n, "the condition must hold one value");
  const onnx::AttributeProto *br = I.attr(n, c->getAsDouble(0) != 0 ? "then_branch" : "else_branch");
  if (!br || !br->has_g())
    return I.parseError(n, "missing then_branch or else_branch");
  std::vector<Importer::SubValue> outs;
  KILN_RETURN_IF_ERR(I.convertSubgraph(n, br->g(), {}, outs));
  if (int(outs.size()) < n.output_size())
    return I.parseError(n, "the branch has ", outs.size(), " outputs for ", n.output_size());
  for (int i = 0; i < n.output_size(); i++)
    bindSub(I, n, i, std::move(outs[i]));
  return Error::success();
}

/// Loop with a trip count and condition known at load: unrolled, the body converted once
/// per iteration; scan outputs are stacked along a new first axis.
Error convertLoop(Importer &I, const Node &n) {
  constexpr int64_t kMaxIterations = 4096;
  int64_t trip = -1;
  if (I.hasInput(n, 0)) {
    KILN_ASSIGN_OR_RETURN(const Tensor *m, I.requireConstInput(n, 0, "M"));
    if (m->size() != 1)
      return I.parseError(n, "M must hold one value");
    trip = tensorToInts(*m)[0];
  }
  bool cond = true;
  if (I.hasInput(n, 1)) {
    KILN_ASSIGN_OR_RETURN(const Tensor *c, I.requireConstInput(n, 1, "cond"));
    if (c->size() != 1)
      return I.parseError(n, "cond must hold one value");
    cond = c->getAsDouble(0) != 0;
  }
  const onnx::AttributeProto *ba = I.attr(n, "body");
  if (!ba || !ba->has_g())
    return I.parseError(n, "missing body");
  const onnx::GraphProto &body = ba->g();
  int carriedN = n.input_size() - 2;
  if (carriedN < 0 || body.input_size() != carriedN + 2 || body.output_size() < carriedN + 1)
    return I.parseError(n, "the body's inputs and outputs do not match the loop's");
  int scans = body.output_size() - 1 - carriedN;
  if (n.output_size() > carriedN + scans)
    return I.parseError(n, "more outputs than the body gives");
  std::vector<Importer::SubValue> carried;
  for (int i = 0; i < carriedN; i++) {
    if (const Tensor *t = I.constInput(n, 2 + i)) {
      carried.push_back({NodeValue(), t->clone()});
    } else {
      KILN_ASSIGN_OR_RETURN(NodeValue v, I.input(n, 2 + i));
      carried.push_back({v, std::nullopt});
    }
  }
  std::vector<std::vector<Importer::SubValue>> scanned(static_cast<size_t>(scans));
  int64_t it = 0;
  for (; (trip < 0 || it < trip) && cond; it++) {
    if (it >= kMaxIterations)
      return I.unsupported(n, "more than ", kMaxIterations, " iterations to unroll");
    std::vector<Importer::SubValue> ins;
    ins.push_back({NodeValue(), tensorFromInts(ElemKind::Int64I, {}, {it})});
    ins.push_back({NodeValue(), tensorFromInts(ElemKind::Bool, {}, {cond ? 1 : 0})});
    for (auto &c : carried) {
      if (c.c)
        ins.push_back({NodeValue(), c.c->clone()});
      else
        ins.push_back({c.v, std::nullopt});
    }
    std::vector<Importer::SubValue> outs;
    KILN_RETURN_IF_ERR(I.convertSubgraph(n, body, std::move(ins), outs));
    if (!outs[0].c || outs[0].c->size() != 1)
      return I.unsupported(n, "the loop condition is computed at run time");
    cond = outs[0].c->getAsDouble(0) != 0;
    for (int i = 0; i < carriedN; i++)
      carried[i] = std::move(outs[1 + i]);
    for (int k = 0; k < scans; k++)
      scanned[k].push_back(std::move(outs[1 + carriedN + k]));
  }
  for (int i = 0; i < carriedN && i < n.output_size(); i++)
    bindSub(I, n, i, std::move(carried[i]));
  for (int k = 0; k < scans && carriedN + k < n.output_size(); k++) {
    if (!I.hasOutput(n, carriedN + k))
      continue;
    if (scanned[k].empty())
      return I.unsupported(n, "a scan output of zero iterations (an empty tensor)");
    std::vector<NodeValue> parts;
    for (auto &v : scanned[k]) {
      NodeValue p = subNode(I, n, v);
      std::vector<dim_t> d = p.dims().vec();
      d.insert(d.begin(), 1);
      KILN_ASSIGN_OR_RETURN(Dims dd, I.toDims(n, d));
      parts.push_back(I.reshape(I.opName(n, "scan1"), p, dd));
    }
    I.setOutput(n, carriedN + k,
                parts.size() == 1 ? parts[0] : NodeValue(I.F->createConcat(I.opName(n, "scan"), parts, 0)));
  }
  return Error::success();
}

} // namespace

void registerDataConverters(ConverterMap &m) {
  m["If"] = convertIf;
  m["Loop"] = convertLoop;
  m["GridSample"] = convertGridSample;
  m["RoiAlign"] = convertRoiAlign;
  m["MaxUnpool"] = convertMaxUnpool;
  m["Compress"] = convertCompress;
  m["NonZero"] = convertNonZero;
  m["NonMaxSuppression"] = convertNonMaxSuppression;
  m["Constant"] = convertConstant;
  m.requireInputs("Constant", 0);
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
  m["GatherElements"] = convertGatherElements;
  for (const char *op : {"Expand", "Tile", "Gather", "GatherElements"})
    m.requireInputs(op, 2);
  m.requireInputs("Range", 3);
  m.requireInputs("Reshape", 2, 5);
  m.requireInputs("Slice", 3, 10);
  m.requireInputs("Pad", 2, 11);
  m.requireInputs("Upsample", 2, 9);
  m.requireInputs("Unsqueeze", 2, 13);
  m["ScatterElements"] = convertScatterElements;
  m["Scatter"] = convertScatterElements;
  m["ScatterND"] = convertScatterND;
  m["GatherND"] = convertGatherND;
  m["Trilu"] = convertTrilu;
  m["EyeLike"] = convertEyeLike;
  m["OneHot"] = convertOneHot;
  m["ReverseSequence"] = convertReverseSequence;
  m["HannWindow"] = convertWindow;
  m["HammingWindow"] = convertWindow;
  m["BlackmanWindow"] = convertWindow;
}

} // namespace kiln::onnximport
