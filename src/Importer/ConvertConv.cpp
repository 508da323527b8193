// Converters of the convolution family: Conv, MaxPool, AveragePool and the global
// pools. 1-D convolution and pooling run as 2-D with a height of 1.

#include "ONNXImporter.h"

#include <algorithm>
#include <cmath>

namespace kiln::onnximport {

namespace {

using Node = onnx::NodeProto;

/// Window geometry of a Conv or pooling node, in 2-D form.
struct Window {
  std::vector<dim_t> kernels, strides, dilations, pads; // pads: top, left, bottom, right
  bool is1D = false;
};

/// Reads kernel, strides, dilations, pads and auto_pad for input spatial dims \p in (one or
/// two of them); \p ceil adds end padding so that floor division yields ceil_mode sizes.
Expected<Window> readWindow(Importer &I, const Node &n, const std::vector<dim_t> &in,
                            std::vector<int64_t> kernel, bool ceil, bool *extraPad = nullptr) {
  size_t s = in.size();
  Window w;
  w.is1D = s == 1;
  auto attrOr = [&](const char *name, int64_t def) {
    std::vector<int64_t> v = I.attrInts(n, name);
    if (v.empty())
      v.assign(s, def);
    return v;
  };
  std::vector<int64_t> st = attrOr("strides", 1), dil = attrOr("dilations", 1);
  std::vector<int64_t> pads = I.attrInts(n, "pads");
  if (pads.empty())
    pads.assign(2 * s, 0);
  if (kernel.size() != s || st.size() != s || dil.size() != s || pads.size() != 2 * s)
    return I.parseError(n, "kernel_shape, strides, dilations and pads do not match the ",
                        s, " spatial dimensions of the input");
  for (size_t i = 0; i < s; i++)
    if (kernel[i] <= 0 || st[i] <= 0 || dil[i] <= 0 || pads[i] < 0 || pads[i + s] < 0)
      return I.parseError(n, "kernel, strides and dilations must be positive, pads not "
                          "negative");
  std::string autoPad = I.attrString(n, "auto_pad", "NOTSET");
  for (size_t i = 0; i < s; i++) {
    int64_t x = int64_t(in[i]), k = (kernel[i] - 1) * dil[i] + 1;
    if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
      int64_t out = (x + st[i] - 1) / st[i];
      int64_t total = std::max<int64_t>((out - 1) * st[i] + k - x, 0);
      int64_t small = total / 2, big = total - small;
      pads[i] = autoPad == "SAME_UPPER" ? small : big;
      pads[i + s] = autoPad == "SAME_UPPER" ? big : small;
    } else if (autoPad == "VALID") {
      pads[i] = pads[i + s] = 0;
    } else if (autoPad != "NOTSET") {
      return I.parseError(n, "unknown auto_pad '", autoPad, "'");
    }
    if (x + pads[i] + pads[i + s] < k)
      return I.parseError(n, "the window (", k, ") is larger than the padded input (",
                          x + pads[i] + pads[i + s], ")");
    if (ceil) {
      int64_t span = x + pads[i] + pads[i + s] - k;
      int64_t out = (span + st[i] - 1) / st[i] + 1;
      if ((out - 1) * st[i] >= x + pads[i])
        out--; // The last window must start inside the input or its begin padding.
      int64_t extra = (out - 1) * st[i] + k - (x + pads[i] + pads[i + s]);
      if (extra > 0) {
        pads[i + s] += extra;
        if (extraPad)
          *extraPad = true;
      }
    }
  }
  if (w.is1D) {
    w.kernels = {1, dim_t(kernel[0])};
    w.strides = {1, dim_t(st[0])};
    w.dilations = {1, dim_t(dil[0])};
    w.pads = {0, dim_t(pads[0]), 0, dim_t(pads[1])};
  } else {
    w.kernels = {dim_t(kernel[0]), dim_t(kernel[1])};
    w.strides = {dim_t(st[0]), dim_t(st[1])};
    w.dilations = {dim_t(dil[0]), dim_t(dil[1])};
    w.pads = {dim_t(pads[0]), dim_t(pads[1]), dim_t(pads[2]), dim_t(pads[3])};
  }
  return w;
}

/// The 4-D input of a 1-D or 2-D window op ([N,C,L] becomes [N,C,1,L]).
Expected<NodeValue> input4D(Importer &I, const Node &n, int i) {
  KILN_ASSIGN_OR_RETURN(NodeValue x, I.input(n, i));
  const Dims &d = x.dims();
  if (d.size() == 3)
    return I.reshape(I.opName(n, "to2d"), x, Dims({d[0], d[1], 1, d[2]}));
  if (d.size() != 4)
    return I.unsupported(n, "only 1-D and 2-D windows are supported; the input is ",
                         x.getType()->toString());
  return x;
}

std::vector<dim_t> spatial(const Dims &d) {
  std::vector<dim_t> v;
  for (size_t i = 2; i < d.size(); i++)
    v.push_back(d[i]);
  return v;
}

/// Binds the output of a window op, reshaping back to 3-D for 1-D windows.
void bindWindowResult(Importer &I, const Node &n, NodeValue y, bool is1D) {
  if (is1D) {
    const Dims &d = y.dims();
    y = I.reshape(I.opName(n, "to1d"), y, Dims({d[0], d[1], d[3]}));
  }
  I.setOutput(n, 0, y);
}

Error convertConv(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(Dims xd, I.inputDims(n, 0));
  KILN_ASSIGN_OR_RETURN(Dims wd, I.inputDims(n, 1));
  if (xd.size() != 3 && xd.size() != 4)
    return I.unsupported(n, "only 1-D and 2-D convolutions are supported; the input is ",
                         dimsToString(xd));
  if (wd.size() != xd.size())
    return I.parseError(n, "the filter ", dimsToString(wd), " does not match the input ",
                        dimsToString(xd));
  std::vector<int64_t> kernel = I.attrInts(n, "kernel_shape");
  if (kernel.empty())
    for (size_t i = 2; i < wd.size(); i++)
      kernel.push_back(int64_t(wd[i]));
  KILN_ASSIGN_OR_RETURN(Window w, readWindow(I, n, spatial(xd), kernel, false));
  int64_t group = I.attrInt(n, "group", 1);
  if (group <= 0 || xd[1] % dim_t(group) || wd[0] % dim_t(group) || wd[1] * dim_t(group) != xd[1])
    return I.parseError(n, "group ", group, " does not fit input ", dimsToString(xd),
                        " and filter ", dimsToString(wd));
  KILN_ASSIGN_OR_RETURN(NodeValue x, input4D(I, n, 0));
  KILN_ASSIGN_OR_RETURN(NodeValue f, I.input(n, 1));
  if (w.is1D)
    f = I.reshape(I.opName(n, "filter2d"), f, Dims({wd[0], wd[1], 1, wd[2]}));
  NodeValue b;
  if (I.hasInput(n, 2)) {
    KILN_ASSIGN_OR_RETURN(b, I.input(n, 2));
  } else {
    b = I.makeConstant(I.opName(n, "bias"), Tensor(f.getElementType(), {wd[0]}));
  }
  NodeValue y = I.F->createConvolution(I.opName(n), x, f, b, w.kernels, w.strides, w.pads,
                                       w.dilations, dim_t(group));
  bindWindowResult(I, n, y, w.is1D);
  return Error::success();
}

Error convertPool(Importer &I, const Node &n) {
  bool isMax = n.op_type() == "MaxPool";
  KILN_ASSIGN_OR_RETURN(Dims xd, I.inputDims(n, 0));
  if (xd.size() != 3 && xd.size() != 4)
    return I.unsupported(n, "only 1-D and 2-D pooling is supported; the input is ",
                         dimsToString(xd));
  if (isMax && I.isOutputUsed(n, 1))
    return I.unsupported(n, "the Indices output of MaxPool is not supported");
  bool ceil = I.attrInt(n, "ceil_mode", 0) != 0, extra = false;
  KILN_ASSIGN_OR_RETURN(Window w, readWindow(I, n, spatial(xd), I.attrInts(n, "kernel_shape"),
                                             ceil, &extra));
  for (dim_t d : w.dilations)
    if (d != 1)
      return I.unsupported(n, "pooling with dilations is not supported");
  KILN_ASSIGN_OR_RETURN(NodeValue x, input4D(I, n, 0));
  NodeValue y;
  if (isMax) {
    y = I.F->createMaxPool(I.opName(n), x, w.kernels, w.strides, w.pads);
  } else {
    bool countPads = I.attrInt(n, "count_include_pad", 0) != 0;
    if (countPads && extra)
      return I.unsupported(n, "ceil_mode with count_include_pad is not supported");
    y = I.F->createAvgPool(I.opName(n), x, w.kernels, w.strides, w.pads, countPads);
  }
  bindWindowResult(I, n, y, w.is1D);
  return Error::success();
}

Error convertGlobalPool(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(NodeValue x, I.input(n, 0));
  const Dims &d = x.dims();
  if (d.size() < 3)
    return I.parseError(n, "the input ", x.getType()->toString(), " has no spatial dims");
  if (n.op_type() == "GlobalAveragePool" && d.size() == 4) {
    I.setOutput(n, 0, I.F->createAdaptiveAvgPool(I.opName(n), x, {1, 1}));
    return Error::success();
  }
  std::vector<int64_t> axes;
  for (size_t i = 2; i < d.size(); i++)
    axes.push_back(int64_t(i));
  if (n.op_type() == "GlobalAveragePool")
    I.setOutput(n, 0, I.F->createReduceMean(I.opName(n), x, axes, true));
  else
    I.setOutput(n, 0, I.F->createReduceMax(I.opName(n), x, axes, true));
  return Error::success();
}

} // namespace

void registerConvConverters(ConverterMap &m) {
  m["Conv"] = convertConv;
  m["MaxPool"] = convertPool;
  m["AveragePool"] = convertPool;
  m["GlobalAveragePool"] = convertGlobalPool;
  m["GlobalMaxPool"] = convertGlobalPool;
}

} // namespace kiln::onnximport
