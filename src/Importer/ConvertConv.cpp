// Converters of the convolution family: Conv, MaxPool, AveragePool and the global
// pools. 1-D convolution and pooling run as 2-D with a height of 1.

#include "ONNXImporter.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

namespace kiln::onnximport {

namespace {

using Node = onnx::NodeProto;

/// Window geometry of a Conv or pooling node, in 2-D form.
struct Window {
  std::vector<dim_t> kernels, strides, dilations, pads; // pads: top, left, bottom, right
  bool is1D = false;
  /// Every spatial dim (any number of them): kernel, stride, dilation, and pads (all
  /// begins, then all ends).
  std::vector<int64_t> k, st, dil, pad;
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
  w.k = kernel;
  w.st = st;
  w.dil = dil;
  w.pad = pads;
  if (s > 2)
    return w;
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

/// A 3-D window op [N,C,D,H,W] as 2-D ones over the depth positions: the input is padded
/// in depth (with \p padValue), moved to [N, D, C, H, W], and for each kernel depth kd the
/// depths od * stride + kd * dilation are gathered and flattened into the batch
/// ([N * oD, C, H, W]); \p op2d builds the 2-D op of one kd (told whether it is the first
/// one built, which takes a convolution's bias), \p combine joins two kds' results. The
/// result [N * oD, O, oH, oW] goes back to [N, O, oD, oH, oW].
/// A kd whose gathered depths are all padding is left out: its slab is all \p padValue,
/// which every caller's op and join make neutral (a zero-padded convolution without bias
/// adds 0 for finite weights, a max over -inf, a window sum 0), and a convolution's
/// filter depth that only ever meets padding is never made (r3d_18's 512-channel layers
/// at depth 1: two of every three depths, 100 MB of transformed weights). When no kd
/// reads a real depth, kd 0 is kept so that the result keeps its value and shape.
Expected<NodeValue> window3D(Importer &I, const Node &n, NodeValue x, const Window &w,
                             float padValue,
                             const std::function<NodeValue(NodeValue, int64_t, bool)> &op2d,
                             const std::function<NodeValue(NodeValue, NodeValue)> &combine) {
  Function *F = I.F;
  const Dims d = x.dims();
  dim_t N = d[0], C = d[1], D = d[2], H = d[3], W = d[4];
  int64_t pb = w.pad[0], pe = w.pad[3];
  if (pb || pe) {
    std::vector<dim_t> p(10, 0);
    p[2] = dim_t(pb);
    p[5 + 2] = dim_t(pe);
    x = F->createPad(I.opName(n, "padd"), x, p, padValue);
  }
  int64_t Dp = int64_t(D) + pb + pe, span = (w.k[0] - 1) * w.dil[0] + 1;
  int64_t oD = (Dp - span) / w.st[0] + 1;
  if (oD <= 0)
    return I.parseError(n, "the depth window does not fit the padded input");
  x = F->createTranspose(I.opName(n, "ndchw"), x, {0, 2, 1, 3, 4});
  // Whether kernel depth kd reads a real depth [pb, pb + D) at some output depth.
  auto readsInput = [&](int64_t kd) {
    for (int64_t o = 0; o < oD; o++) {
      int64_t p = o * w.st[0] + kd * w.dil[0];
      if (p >= pb && p < pb + int64_t(D))
        return true;
    }
    return false;
  };
  bool anyReal = false;
  for (int64_t kd = 0; kd < w.k[0]; kd++)
    anyReal |= readsInput(kd);
  NodeValue acc;
  for (int64_t kd = 0; kd < w.k[0]; kd++) {
    if (anyReal && !readsInput(kd))
      continue;
    std::vector<int64_t> idx(static_cast<size_t>(oD));
    for (int64_t o = 0; o < oD; o++)
      idx[o] = o * w.st[0] + kd * w.dil[0];
    NodeValue g = F->createGather(
        I.opName(n, "depth"), x,
        I.makeConstant(I.opName(n, "depths"),
                       tensorFromInts(ElemKind::Int64I, {dim_t(oD)}, idx)),
        1);
    g = I.reshape(I.opName(n, "flat"), g, Dims({N * dim_t(oD), C, H, W}));
    NodeValue y = op2d(g, kd, !acc);
    acc = acc ? combine(acc, y) : y;
  }
  const Dims yd = acc.dims();
  acc = I.reshape(I.opName(n, "unflat"), acc, Dims({N, dim_t(oD), yd[1], yd[2], yd[3]}));
  return NodeValue(F->createTranspose(I.opName(n, "ncdhw"), acc, {0, 2, 1, 3, 4}));
}

/// The 2-D geometry (h, w) of a 3-D window.
void window2DOf(const Window &w, std::vector<dim_t> &k, std::vector<dim_t> &st,
                std::vector<dim_t> &dil, std::vector<dim_t> &pads) {
  k = {dim_t(w.k[1]), dim_t(w.k[2])};
  st = {dim_t(w.st[1]), dim_t(w.st[2])};
  dil = {dim_t(w.dil[1]), dim_t(w.dil[2])};
  pads = {dim_t(w.pad[1]), dim_t(w.pad[2]), dim_t(w.pad[4]), dim_t(w.pad[5])};
}

/// Depth \p kd of the 3-D filter \p full [O, C/g, KD, KH, KW] as a 2-D filter
/// [O, C/g, KH, KW].
Tensor filterDepth(const Tensor &full, const Dims &wd, int64_t kd) {
  Tensor t(Type::withDims(full.getType(), Dims({wd[0], wd[1], wd[3], wd[4]})));
  const size_t plane = size_t(wd[3] * wd[4]) * full.getType().elemBytes();
  const char *src = full.getUnsafePtr() + size_t(kd) * plane;
  char *dst = t.getUnsafePtr();
  for (dim_t oc = 0, e = wd[0] * wd[1]; oc < e; oc++)
    std::memcpy(dst + oc * plane, src + oc * wd[2] * plane, plane);
  return t;
}

Error convertConv3D(Importer &I, const Node &n, const Dims &xd, const Dims &wd) {
  std::vector<int64_t> kernel = I.attrInts(n, "kernel_shape");
  if (kernel.empty())
    for (size_t i = 2; i < wd.size(); i++)
      kernel.push_back(int64_t(wd[i]));
  KILN_ASSIGN_OR_RETURN(Window w, readWindow(I, n, {xd[2], xd[3], xd[4]}, kernel, false));
  int64_t group = I.attrInt(n, "group", 1);
  if (group <= 0 || xd[1] % dim_t(group) || wd[0] % dim_t(group) || wd[1] * dim_t(group) != xd[1])
    return I.parseError(n, "group ", group, " does not fit input ", dimsToString(xd),
                        " and filter ", dimsToString(wd));
  KILN_ASSIGN_OR_RETURN(NodeValue x, I.input(n, 0));
  // A constant filter of several kernel depths is cut into them here, one copy of each
  // [KH, KW] plane: as Slices, constant folding made them on the Interpreter element by
  // element (r3d_18: most of a warm compile). The whole filter never becomes a graph
  // Constant (nothing would read it and the module would hold it to the end) and is freed
  // once cut when this node is its only reader. With one depth the Slice takes all of it
  // and the graph passes drop it (no copy).
  const Tensor *fc = wd[2] > 1 ? I.constInput(n, 1) : nullptr;
  if (fc && fc->size() == 0)
    fc = nullptr; // input() says why an empty filter is refused
  NodeValue f;
  if (!fc) {
    KILN_ASSIGN_OR_RETURN(f, I.input(n, 1));
  }
  NodeValue b;
  if (I.hasInput(n, 2)) {
    KILN_ASSIGN_OR_RETURN(b, I.input(n, 2));
  }
  const ElemKind filterKind = fc ? fc->getElementType() : f.getElementType();
  NodeValue zero = I.makeConstant(I.opName(n, "nobias"), Tensor(filterKind, {wd[0]}));
  std::vector<dim_t> k, st, dil, pads;
  window2DOf(w, k, st, dil, pads);
  Function *F = I.F;
  auto op = [&](NodeValue g, int64_t kd, bool first) -> NodeValue {
    NodeValue fk;
    if (fc) {
      fk = I.makeConstant(I.opName(n, "filter2d"), filterDepth(*fc, wd, kd));
    } else {
      fk = F->createSlice(I.opName(n, "filterd"), f, {0, 0, dim_t(kd), 0, 0},
                          {wd[0], wd[1], dim_t(kd) + 1, wd[3], wd[4]});
      fk = I.reshape(I.opName(n, "filter2d"), fk, Dims({wd[0], wd[1], wd[3], wd[4]}));
    }
    return F->createConvolution(I.opName(n), g, fk, first && b ? b : zero, k, st, pads, dil,
                                dim_t(group));
  };
  auto add = [&](NodeValue a, NodeValue c) -> NodeValue {
    return F->createAdd(I.opName(n, "sumd"), a, c);
  };
  KILN_ASSIGN_OR_RETURN(NodeValue y, window3D(I, n, x, w, 0.0f, op, add));
  if (fc)
    I.releaseConstInput(n, 1);
  I.setOutput(n, 0, y);
  return Error::success();
}

} // namespace

Expected<ConvWindow2D> readConvWindow2D(Importer &I, const Node &n, const Dims &xd,
                                        const Dims &wd) {
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
  for (size_t i = 2; i < wd.size(); i++)
    if (wd[i] != dim_t(kernel[i - 2]))
      return I.parseError(n, "kernel_shape does not match the filter ", dimsToString(wd));
  ConvWindow2D c;
  c.kernels = w.kernels, c.strides = w.strides, c.pads = w.pads, c.dilations = w.dilations;
  c.group = dim_t(group);
  c.is1D = w.is1D;
  return c;
}

namespace {

Error convertConv(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(Dims xd, I.inputDims(n, 0));
  KILN_ASSIGN_OR_RETURN(Dims wd, I.inputDims(n, 1));
  if (xd.size() == 5 && wd.size() == 5)
    return convertConv3D(I, n, xd, wd);
  KILN_ASSIGN_OR_RETURN(ConvWindow2D w, readConvWindow2D(I, n, xd, wd));
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
                                       w.dilations, w.group);
  bindWindowResult(I, n, y, w.is1D);
  return Error::success();
}

/// 3-D MaxPool and AveragePool over depth slices of 2-D pools; the average divides the
/// window sums by the element count of each 3-D window (padding counted or not).
Error convertPool3D(Importer &I, const Node &n, const Dims &xd) {
  bool isMax = n.op_type() == "MaxPool";
  if (isMax && I.isOutputUsed(n, 1))
    return I.unsupported(n, "the Indices output of MaxPool is not supported");
  bool ceil = I.attrInt(n, "ceil_mode", 0) != 0, extra = false;
  KILN_ASSIGN_OR_RETURN(Window w, readWindow(I, n, {xd[2], xd[3], xd[4]},
                                             I.attrInts(n, "kernel_shape"), ceil, &extra));
  for (int64_t v : w.dil)
    if (v != 1)
      return I.unsupported(n, "pooling with dilations is not supported");
  bool countPads = I.attrInt(n, "count_include_pad", 0) != 0;
  if (!isMax && countPads && extra)
    return I.unsupported(n, "ceil_mode with count_include_pad is not supported");
  KILN_ASSIGN_OR_RETURN(NodeValue x, I.input(n, 0));
  std::vector<dim_t> k, st, dil, pads;
  window2DOf(w, k, st, dil, pads);
  Function *F = I.F;
  ElemKind ek = x.getElementType();
  auto op = [&](NodeValue g, int64_t, bool) -> NodeValue {
    if (isMax)
      return F->createMaxPool(I.opName(n), g, k, st, pads);
    // Window sums: the average over the whole 2-D window times its size.
    NodeValue avg = F->createAvgPool(I.opName(n), g, k, st, pads, true);
    return F->createMul(I.opName(n, "sum2d"), avg,
                        I.splat(I.opName(n, "area"), ek, avg.dims(), double(k[0] * k[1])));
  };
  auto join = [&](NodeValue a, NodeValue c) -> NodeValue {
    return isMax ? NodeValue(F->createMax(I.opName(n, "maxd"), a, c))
                 : NodeValue(F->createAdd(I.opName(n, "sumd"), a, c));
  };
  float padValue = isMax ? -std::numeric_limits<float>::infinity() : 0.0f;
  KILN_ASSIGN_OR_RETURN(NodeValue y, window3D(I, n, x, w, padValue, op, join));
  if (!isMax) {
    // Divide by the window's element count, per output position.
    const Dims yd = y.dims();
    dim_t oD = yd[2], oH = yd[3], oW = yd[4];
    Tensor cnt(ek, {1, 1, oD, oH, oW});
    auto count1 = [&](int a, dim_t o) {
      int64_t in = int64_t(xd[2 + a]);
      int64_t lo = int64_t(o) * w.st[a] - w.pad[a], hi = lo + w.k[a];
      if (countPads) {
        // Pads count, the ceil_mode overhang past the end pads does not.
        int64_t end = in + w.pad[a + 3];
        return double(std::min(hi, end) - lo);
      }
      return double(std::min(hi, in) - std::max<int64_t>(lo, 0));
    };
    for (dim_t a = 0; a < oD; a++)
      for (dim_t b = 0; b < oH; b++)
        for (dim_t c = 0; c < oW; c++)
          cnt.setFromDouble((a * oH + b) * oW + c, count1(0, a) * count1(1, b) * count1(2, c));
    NodeValue cn = F->createBroadcastTo(I.opName(n, "countb"),
                                        I.makeConstant(I.opName(n, "count"), std::move(cnt)), yd);
    y = F->createDiv(I.opName(n, "avg"), y, cn);
  }
  I.setOutput(n, 0, y);
  return Error::success();
}

/// 1-D / 2-D MaxPool with dilations or its Indices output. Without Indices and with strides
/// that are multiples of the dilations: the rows and columns the taps can reach, then a
/// plain MaxPool. Otherwise the maximum over the kernel's
/// taps, each a strided Gather of the input padded with the lowest value; the first
/// largest tap wins, and Indices are flat positions in the (unpadded) input,
/// ((n * C + c) * H + h) * W + w (storage_order 1: column-major within each image).
/// Keeps every \p step-th index along \p axis of \p v (the rows or columns a dilated
/// window reads when the strides are multiples of the dilations).
NodeValue gatherEvery(Importer &I, const Node &n, NodeValue v, unsigned axis, dim_t step,
                      const char *node, const char *constant) {
  std::vector<int64_t> idx;
  for (dim_t i = 0; i < v.dims()[axis]; i += step)
    idx.push_back(int64_t(i));
  NodeValue at = I.makeConstant(I.opName(n, constant),
                                tensorFromInts(ElemKind::Int64I, {idx.size()}, idx));
  return I.F->createGather(I.opName(n, node), v, at, axis);
}

/// MaxPool's Indices output for one tap: the flat index into the unpadded input \p d (NCHW,
/// or with \p colMajor the storage order that swaps H and W) of the element at padded row
/// rows[i] and column cols[j], for every output position.
Tensor tapIndices(const Dims &d, const std::vector<int64_t> &rows,
                  const std::vector<int64_t> &cols, int64_t padTop, int64_t padLeft,
                  bool colMajor) {
  const int64_t C = int64_t(d[1]), H = int64_t(d[2]), W = int64_t(d[3]);
  Tensor it(ElemKind::Int64I, {d[0], d[1], rows.size(), cols.size()});
  auto h = it.getHandle<int64_t>();
  size_t k = 0;
  for (int64_t nn = 0; nn < int64_t(d[0]); nn++)
    for (int64_t c = 0; c < C; c++)
      for (int64_t r : rows)
        for (int64_t col : cols) {
          int64_t hh = r - padTop, ww = col - padLeft;
          int64_t in = colMajor ? ww * H + hh : hh * W + ww;
          h.raw(k++) = (nn * C + c) * H * W + in;
        }
  return it;
}

Error convertMaxPoolByTaps(Importer &I, const Node &n, const Window &w, const Dims &xd) {
  KILN_ASSIGN_OR_RETURN(NodeValue x, input4D(I, n, 0));
  Function *F = I.F;
  const Dims d = x.dims();
  dim_t N = d[0], C = d[1], H = d[2], W = d[3];
  ElemKind ek = x.getElementType();
  if (!isFloatKind(ek))
    return I.unsupported(n, "MaxPool with dilations or Indices of ", x.getType()->toString());
  bool colMajor = I.attrInt(n, "storage_order", 0) != 0;
  dim_t kh = w.kernels[0], kw = w.kernels[1], sh = w.strides[0], sw = w.strides[1];
  dim_t dh = w.dilations[0], dw = w.dilations[1];
  dim_t pt = w.pads[0], pl = w.pads[1], pb = w.pads[2], pr = w.pads[3];
  dim_t Hp = H + pt + pb, Wp = W + pl + pr;
  dim_t oH = (Hp - (kh - 1) * dh - 1) / sh + 1, oW = (Wp - (kw - 1) * dw - 1) / sw + 1;
  NodeValue xp = x;
  if (pt || pl || pb || pr)
    xp = F->createPad(I.opName(n, "pad"), x, {0, 0, pt, pl, 0, 0, pb, pr},
                      -std::numeric_limits<float>::infinity());
  bool wantIdx = I.isOutputUsed(n, 1);
  if (!wantIdx && sh % dh == 0 && sw % dw == 0) {
    // With strides that are multiples of the dilations, every tap lies on a row and a
    // column of the padded input that is a multiple of the dilation: keep those, and the
    // result is a plain max pool of the kernel's size with stride / dilation (its output
    // size works out to oH x oW).
    NodeValue v = xp;
    if (dh > 1)
      v = gatherEvery(I, n, v, 2, dh, "dilrows", "rows");
    if (dw > 1)
      v = gatherEvery(I, n, v, 3, dw, "dilcols", "cols");
    NodeValue y = F->createMaxPool(I.opName(n), v, {kh, kw}, {sh / dh, sw / dw}, {0, 0, 0, 0});
    bindWindowResult(I, n, y, xd.size() == 3);
    return Error::success();
  }
  // Otherwise each tap is four nodes; a window of thousands of taps would make a graph of
  // tens of thousands of nodes.
  constexpr dim_t kMaxTaps = 1024;
  if (kh * kw > kMaxTaps)
    return I.unsupported(n, "MaxPool with dilations or Indices over a ", kh, "x", kw,
                         " window (at most ", kMaxTaps, " taps when the strides are not "
                         "multiples of the dilations or Indices are wanted)");
  NodeValue best, bestIdx;
  for (dim_t a = 0; a < kh; a++)
    for (dim_t b = 0; b < kw; b++) {
      std::vector<int64_t> rows(oH), cols(oW);
      for (dim_t i = 0; i < oH; i++)
        rows[i] = int64_t(i * sh + a * dh);
      for (dim_t j = 0; j < oW; j++)
        cols[j] = int64_t(j * sw + b * dw);
      NodeValue v = F->createGather(
          I.opName(n, "taprows"), xp,
          I.makeConstant(I.opName(n, "rows"), tensorFromInts(ElemKind::Int64I, {oH}, rows)), 2);
      v = F->createGather(
          I.opName(n, "tap"), v,
          I.makeConstant(I.opName(n, "cols"), tensorFromInts(ElemKind::Int64I, {oW}, cols)), 3);
      NodeValue vi;
      if (wantIdx)
        vi = I.makeConstant(I.opName(n, "tapidx"),
                            tapIndices(d, rows, cols, int64_t(pt), int64_t(pl), colMajor));
      if (!best) {
        best = v;
        bestIdx = vi;
        continue;
      }
      NodeValue better = F->createCmpLT(I.opName(n, "better"), best, v);
      best = F->createSelect(I.opName(n, "max"), better, v, best);
      if (wantIdx)
        bestIdx = F->createSelect(I.opName(n, "argmax"), better, vi, bestIdx);
    }
  bool is1D = xd.size() == 3;
  bindWindowResult(I, n, best, is1D);
  if (wantIdx) {
    if (is1D)
      bestIdx = I.reshape(I.opName(n, "idx1d"), bestIdx, Dims({N, C, oW}));
    I.setOutput(n, 1, bestIdx);
  }
  return Error::success();
}

Error convertPool(Importer &I, const Node &n) {
  bool isMax = n.op_type() == "MaxPool";
  KILN_ASSIGN_OR_RETURN(Dims xd, I.inputDims(n, 0));
  if (xd.size() == 5)
    return convertPool3D(I, n, xd);
  if (isMax && (xd.size() == 3 || xd.size() == 4)) {
    bool dilated = false;
    for (int64_t v : I.attrInts(n, "dilations"))
      dilated |= v != 1;
    if (dilated || I.isOutputUsed(n, 1)) {
      bool ceil = I.attrInt(n, "ceil_mode", 0) != 0;
      KILN_ASSIGN_OR_RETURN(Window w, readWindow(I, n, spatial(xd),
                                                 I.attrInts(n, "kernel_shape"), ceil));
      return convertMaxPoolByTaps(I, n, w, xd);
    }
  }
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

/// ConvTranspose's geometry, validated, with auto_pad and output_shape resolved into pads;
/// every vector has one entry per spatial dim of the lowering (S: a 1-D node is widened to
/// 2-D with a height of 1, lead = S - sp leading entries of 1 or 0).
struct TransposedWindow {
  size_t sp = 0, S = 0;
  dim_t group = 1;
  std::vector<int64_t> in, st, dil, k, outPad, padB, padE;
};

Expected<TransposedWindow> readTransposedWindow(Importer &I, const Node &n, const Dims &xd,
                                                const Dims &wd) {
  if (xd.size() < 3 || xd.size() > 5)
    return I.unsupported(n, "only 1-D, 2-D and 3-D transposed convolutions are supported; "
                         "the input is ", dimsToString(xd));
  if (wd.size() != xd.size())
    return I.parseError(n, "the filter ", dimsToString(wd), " does not match the input ",
                        dimsToString(xd));
  size_t sp = xd.size() - 2;
  int64_t group = I.attrInt(n, "group", 1);
  if (group <= 0 || xd[1] != wd[0] || wd[0] % dim_t(group))
    return I.parseError(n, "group ", group, " does not fit input ", dimsToString(xd),
                        " and filter ", dimsToString(wd));
  auto attrOr = [&](const char *name, int64_t def, size_t len) {
    std::vector<int64_t> v = I.attrInts(n, name);
    if (v.empty())
      v.assign(len, def);
    return v;
  };
  std::vector<int64_t> k = I.attrInts(n, "kernel_shape");
  if (k.empty())
    for (size_t i = 0; i < sp; i++)
      k.push_back(int64_t(wd[2 + i]));
  std::vector<int64_t> st = attrOr("strides", 1, sp), dil = attrOr("dilations", 1, sp),
                       op = attrOr("output_padding", 0, sp), pads = attrOr("pads", 0, 2 * sp),
                       outShape = I.attrInts(n, "output_shape");
  if (k.size() != sp || st.size() != sp || dil.size() != sp || op.size() != sp ||
      pads.size() != 2 * sp || (!outShape.empty() && outShape.size() != sp))
    return I.parseError(n, "kernel_shape, strides, dilations, pads, output_padding and "
                        "output_shape do not match the ", sp, " spatial dimensions");
  for (size_t i = 0; i < sp; i++)
    if (k[i] != int64_t(wd[2 + i]) || st[i] <= 0 || dil[i] <= 0 || op[i] < 0)
      return I.parseError(n, "bad kernel_shape, strides, dilations or output_padding");
  std::string autoPad = I.attrString(n, "auto_pad", "NOTSET");
  auto floorDiv2 = [](int64_t v) { return v >= 0 ? v / 2 : -((-v + 1) / 2); };
  for (size_t i = 0; i < sp; i++) {
    int64_t in = int64_t(xd[2 + i]), span = (k[i] - 1) * dil[i] + 1;
    int64_t want = -1;
    if (!outShape.empty())
      want = outShape[i];
    else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER")
      want = in * st[i];
    if (autoPad == "VALID")
      pads[i] = pads[i + sp] = 0;
    if (want >= 0) {
      int64_t total = st[i] * (in - 1) + op[i] + span - want;
      int64_t half = floorDiv2(total);
      pads[i] = autoPad == "SAME_UPPER" ? half : total - half;
      pads[i + sp] = total - pads[i];
    }
  }
  TransposedWindow t;
  t.sp = sp;
  t.S = sp == 1 ? 2 : sp;
  t.group = dim_t(group);
  const size_t lead = t.S - sp;
  auto widen = [&](const std::vector<int64_t> &v, size_t at, int64_t fill) {
    std::vector<int64_t> r(t.S, fill);
    for (size_t i = 0; i < sp; i++)
      r[lead + i] = v[at + i];
    return r;
  };
  std::vector<int64_t> in(xd.begin() + 2, xd.end());
  t.in = widen(in, 0, 1);
  t.st = widen(st, 0, 1);
  t.dil = widen(dil, 0, 1);
  t.k = widen(k, 0, 1);
  t.outPad = widen(op, 0, 0);
  t.padB = widen(pads, 0, 0);
  t.padE = widen(pads, sp, 0);
  return t;
}

/// \p x ([N, C, in...]) with stride - 1 zeros between its elements along each spatial dim:
/// [N,C,D,1,H,1,W,1] padded to [N,C,D,sd,H,sh,W,sw], flattened and cut to \p u
/// ((in - 1) * stride + 1 each).
NodeValue dilateByStrides(Importer &I, const Node &n, NodeValue x, const TransposedWindow &t,
                          const std::vector<dim_t> &u) {
  const Dims &xd = x.dims();
  Dims ed = {xd[0], xd[1]}, dd = {xd[0], xd[1]};
  for (size_t i = 0; i < t.S; i++) {
    ed.push_back(dim_t(t.in[i]));
    ed.push_back(1);
    dd.push_back(dim_t(t.in[i] * t.st[i]));
  }
  NodeValue e = I.reshape(I.opName(n, "expand"), x, ed);
  std::vector<dim_t> p(2 * ed.size(), 0);
  for (size_t i = 0; i < t.S; i++)
    p[ed.size() + 3 + 2 * i] = dim_t(t.st[i] - 1);
  e = I.F->createPad(I.opName(n, "dilate"), e, p, 0.0f);
  e = I.reshape(I.opName(n, "dilated"), e, dd);
  std::vector<dim_t> zero(2 + t.S, 0), ue = {xd[0], xd[1]};
  ue.insert(ue.end(), u.begin(), u.end());
  return I.F->createSlice(I.opName(n, "cut"), e, zero, ue);
}

/// The pads (\p cpB, \p cpE) of the stride-1 convolution over the dilated input \p x (spatial
/// sizes \p u) that computes the transposed one; where a pad would be negative the input is
/// cropped instead, and \p x becomes that crop.
Error equivalentConvPads(Importer &I, const Node &n, NodeValue &x, const TransposedWindow &t,
                         const std::vector<dim_t> &u, std::vector<int64_t> &cpB,
                         std::vector<int64_t> &cpE) {
  const Dims &xd = x.dims();
  std::vector<dim_t> cb(2 + t.S, 0), ce = {xd[0], xd[1]};
  ce.insert(ce.end(), u.begin(), u.end());
  cpB.assign(t.S, 0);
  cpE.assign(t.S, 0);
  bool crop = false;
  for (size_t i = 0; i < t.S; i++) {
    int64_t full = t.dil[i] * (t.k[i] - 1);
    int64_t b = full - t.padB[i], e = full - t.padE[i] + t.outPad[i];
    if (b < 0) {
      cb[2 + i] = dim_t(-b);
      crop = true;
      b = 0;
    }
    if (e < 0) {
      if (int64_t(u[i]) + e <= int64_t(cb[2 + i]))
        return I.parseError(n, "the pads leave an empty result");
      ce[2 + i] = dim_t(int64_t(u[i]) + e);
      crop = true;
      e = 0;
    }
    if (int64_t(ce[2 + i]) - int64_t(cb[2 + i]) + b + e < (t.k[i] - 1) * t.dil[i] + 1)
      return I.parseError(n, "the pads leave an empty result");
    cpB[i] = b;
    cpE[i] = e;
  }
  if (crop)
    x = I.F->createSlice(I.opName(n, "crop"), x, cb, ce);
  return Error::success();
}

/// ConvTranspose's filter [C, O/g, k...] as the equivalent convolution's [O, C/g, k...]:
/// [g, C/g, O/g, k...] -> [g, O/g, C/g, k...], flipped in every spatial dim. \p fd receives
/// the result's dims. A filter known at load is rearranged here, so no Gather reaches the
/// graph.
Expected<NodeValue> transposedFilter(Importer &I, const Node &n, const TransposedWindow &t,
                                     dim_t C, dim_t O, Dims &fd) {
  dim_t g = t.group, cg = C / g, og = O / g, taps = 1;
  fd = {O, cg};
  for (size_t i = 0; i < t.S; i++) {
    fd.push_back(dim_t(t.k[i]));
    taps *= dim_t(t.k[i]);
  }
  if (const Tensor *wc = I.constInput(n, 1)) {
    return I.makeConstant(I.opName(n, "filter"), gatherElements(*wc, fd, [&](size_t i) {
      size_t tap = i % taps, cc = (i / taps) % cg, o = i / (taps * cg);
      size_t gi = o / og, oo = o % og, flipped = 0, rest = tap;
      // The tap's position with every coordinate mirrored, row-major over the kernel.
      size_t stride = 1;
      for (size_t a = t.S; a-- > 0;) {
        size_t len = size_t(t.k[a]), c = rest % len;
        rest /= len;
        flipped += (len - 1 - c) * stride;
        stride *= len;
      }
      return ((gi * cg + cc) * og + oo) * taps + flipped;
    }));
  }
  KILN_ASSIGN_OR_RETURN(NodeValue w, I.input(n, 1));
  Dims w5 = {g, cg, og};
  std::vector<dim_t> perm = {0, 2, 1};
  for (size_t i = 0; i < t.S; i++) {
    w5.push_back(dim_t(t.k[i]));
    perm.push_back(dim_t(3 + i));
  }
  w = I.reshape(I.opName(n, "wsplit"), w, w5);
  w = I.F->createTranspose(I.opName(n, "wt"), w, perm);
  w = I.reshape(I.opName(n, "wnd"), w, fd);
  for (unsigned ax = 2; ax < 2 + t.S; ax++) {
    dim_t len = fd[ax];
    if (len == 1)
      continue;
    std::vector<int64_t> rev(len);
    for (dim_t i = 0; i < len; i++)
      rev[i] = int64_t(len - 1 - i);
    w = I.F->createGather(I.opName(n, "flip"), w,
                          I.makeConstant(I.opName(n, "rev"),
                                         tensorFromInts(ElemKind::Int64I, {len}, rev)),
                          ax);
  }
  return w;
}

/// ConvTranspose (1-D, 2-D and 3-D) as a Convolution: the input is dilated by the strides
/// (zeros inserted between elements), padded by dilation * (kernel - 1) minus the pads (a
/// negative amount crops), with output_padding and output_shape added at the end; the
/// filter [C, O/group, k...] becomes [O, C/group, k...] flipped in space. 1-D runs as 2-D
/// with a height of 1; 3-D as 2-D convolutions over the kernel's depths (window3D).
Error convertConvTranspose(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(Dims xd, I.inputDims(n, 0));
  KILN_ASSIGN_OR_RETURN(Dims wd, I.inputDims(n, 1));
  KILN_ASSIGN_OR_RETURN(TransposedWindow t, readTransposedWindow(I, n, xd, wd));
  KILN_ASSIGN_OR_RETURN(NodeValue x, I.input(n, 0));
  Function *F = I.F;
  dim_t N = xd[0], C = xd[1], O = wd[1] * t.group;
  Dims xs = {N, C};
  for (int64_t v : t.in)
    xs.push_back(dim_t(v));
  x = I.reshape(I.opName(n, "xnd"), x, xs);
  std::vector<dim_t> u(t.S);
  bool strided = false;
  for (size_t i = 0; i < t.S; i++) {
    u[i] = dim_t((t.in[i] - 1) * t.st[i] + 1);
    strided |= t.st[i] > 1;
  }
  if (strided)
    x = dilateByStrides(I, n, x, t, u);
  std::vector<int64_t> cpB, cpE;
  KILN_RETURN_IF_ERR(equivalentConvPads(I, n, x, t, u, cpB, cpE));
  Dims fd;
  KILN_ASSIGN_OR_RETURN(NodeValue w, transposedFilter(I, n, t, C, O, fd));
  NodeValue b;
  if (I.hasInput(n, 2)) {
    KILN_ASSIGN_OR_RETURN(b, I.input(n, 2));
  } else {
    b = I.makeConstant(I.opName(n, "bias"), Tensor(x.getElementType(), {O}));
  }
  NodeValue y;
  if (t.S == 2) {
    y = F->createConvolution(I.opName(n), x, w, b, {fd[2], fd[3]}, {1, 1},
                             {dim_t(cpB[0]), dim_t(cpB[1]), dim_t(cpE[0]), dim_t(cpE[1])},
                             {dim_t(t.dil[0]), dim_t(t.dil[1])}, t.group);
    if (t.sp == 1) {
      const Dims &yd = y.dims();
      y = I.reshape(I.opName(n, "to1d"), y, Dims({yd[0], yd[1], yd[3]}));
    }
  } else {
    // 3-D: a stride-1 convolution of the dilated input, one 2-D convolution per kernel
    // depth, summed (the bias on the first).
    Window w3;
    w3.k = t.k;
    w3.st = {1, 1, 1};
    w3.dil = t.dil;
    w3.pad = {cpB[0], cpB[1], cpB[2], cpE[0], cpE[1], cpE[2]};
    std::vector<dim_t> k2d, st2d, dil2d, pads2d;
    window2DOf(w3, k2d, st2d, dil2d, pads2d);
    NodeValue zero = I.makeConstant(I.opName(n, "nobias"), Tensor(x.getElementType(), {O}));
    dim_t cg = C / t.group;
    auto conv = [&](NodeValue slab, int64_t kd, bool first) -> NodeValue {
      NodeValue fk = F->createSlice(I.opName(n, "filterd"), w, {0, 0, dim_t(kd), 0, 0},
                                    {O, cg, dim_t(kd) + 1, fd[3], fd[4]});
      fk = I.reshape(I.opName(n, "filter2d"), fk, Dims({O, cg, fd[3], fd[4]}));
      return F->createConvolution(I.opName(n), slab, fk, first ? b : zero, k2d, st2d, pads2d, dil2d,
                                  t.group);
    };
    auto add = [&](NodeValue a, NodeValue c) -> NodeValue {
      return F->createAdd(I.opName(n, "sumd"), a, c);
    };
    KILN_ASSIGN_OR_RETURN(y, window3D(I, n, x, w3, 0.0f, conv, add));
  }
  I.setOutput(n, 0, y);
  return Error::success();
}

} // namespace

void registerConvConverters(ConverterMap &m) {
  m["ConvTranspose"] = convertConvTranspose;
  m["Conv"] = convertConv;
  m.requireInputs("ConvTranspose", 2);
  m.requireInputs("Conv", 2);
  m["MaxPool"] = convertPool;
  m["AveragePool"] = convertPool;
  m["GlobalAveragePool"] = convertGlobalPool;
  m["GlobalMaxPool"] = convertGlobalPool;
}

} // namespace kiln::onnximport
