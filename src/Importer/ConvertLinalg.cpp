// Converters of the linear-algebra family: Gemm and MatMul.

#include "ONNXImporter.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>

namespace kiln::onnximport {

namespace {

using Node = onnx::NodeProto;

/// Operand \p i of a Gemm, transposed when \p trans; a constant is transposed in the
/// importer (the original is never materialised).
Expected<NodeValue> gemmOperand(Importer &I, const Node &n, int i, bool trans,
                                const char *part) {
  const Tensor *t = I.constInput(n, i);
  if (trans && t && t->dims().size() == 2) {
    if (I.loadedTransposed(n, i)) // read from the file transposed (importInitializers)
      return I.input(n, i);
    Tensor tt = transpose2D(*t);
    I.releaseConstInput(n, i); // the weights are held once, transposed
    return I.makeConstant(I.opName(n, part), std::move(tt));
  }
  KILN_ASSIGN_OR_RETURN(NodeValue v, I.input(n, i));
  if (v.dims().size() != 2)
    return I.parseError(n, "operand ", i, " ", v.getType()->toString(), " must be 2-D");
  if (trans)
    v = I.F->createTranspose(I.opName(n, part), v, {1, 0});
  return v;
}

Error convertGemm(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(NodeValue a, gemmOperand(I, n, 0, I.attrInt(n, "transA", 0), "transA"));
  KILN_ASSIGN_OR_RETURN(NodeValue b, gemmOperand(I, n, 1, I.attrInt(n, "transB", 0), "transB"));
  float alpha = I.attrFloat(n, "alpha", 1.0f), beta = I.attrFloat(n, "beta", 1.0f);
  dim_t m = a.dims()[0], k = a.dims()[1], nn = b.dims()[1];
  if (b.dims()[0] != k)
    return I.parseError(n, "inner dimensions differ: A' is ", dimsToString(a.dims()),
                        ", B' is ", dimsToString(b.dims()));
  Function *F = I.F;
  ElemKind ek = a.getElementType();
  if (alpha != 1.0f)
    a = F->createMul(I.opName(n, "alpha"), a, I.splat(I.opName(n, "alphav"), ek, a.dims(), alpha));
  if (!I.hasInput(n, 2) || beta == 0.0f) {
    I.setOutput(n, 0, F->createMatMul(I.opName(n), a, b));
    return Error::success();
  }
  KILN_ASSIGN_OR_RETURN(Dims cd, I.inputDims(n, 2));
  Dims od;
  if (!broadcastShapes(cd, Dims({m, nn}), od) || od != Dims({m, nn}))
    return I.parseError(n, "C ", dimsToString(cd), " does not broadcast to [", m, ", ", nn, "]");
  bool rowBias = cd.product() == nn && (cd.size() < 2 || cd[0] == 1);
  if (rowBias) {
    // C is one row: the bias of a FullyConnected.
    NodeValue c;
    if (const Tensor *ct = I.constInput(n, 2)) {
      Tensor bt(ct->getElementType(), {nn});
      for (dim_t i = 0; i < nn; i++)
        bt.setFromDouble(i, beta * ct->getAsDouble(ct->size() == 1 ? 0 : i));
      c = I.makeConstant(I.opName(n, "bias"), std::move(bt));
    } else {
      KILN_ASSIGN_OR_RETURN(c, I.input(n, 2));
      c = I.reshape(I.opName(n, "bias"), c, Dims({nn}));
      if (beta != 1.0f)
        c = F->createMul(I.opName(n, "beta"), c, I.splat(I.opName(n, "betav"), ek, c.dims(), beta));
    }
    I.setOutput(n, 0, F->createFullyConnected(I.opName(n), a, b, c));
    return Error::success();
  }
  KILN_ASSIGN_OR_RETURN(NodeValue c, I.input(n, 2));
  if (beta != 1.0f)
    c = F->createMul(I.opName(n, "beta"), c, I.splat(I.opName(n, "betav"), ek, c.dims(), beta));
  NodeValue y = F->createMatMul(I.opName(n, "matmul"), a, b);
  I.setOutput(n, 0, F->createAdd(I.opName(n), y, F->createBroadcastTo(I.opName(n, "c"), c, od)));
  return Error::success();
}

Error convertMatMul(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(NodeValue a, I.input(n, 0));
  KILN_ASSIGN_OR_RETURN(NodeValue b, I.input(n, 1));
  Dims ad = a.dims(), bd = b.dims();
  if (ad.size() == 0 || bd.size() == 0)
    return I.parseError(n, "MatMul operands must have rank >= 1");
  bool aVec = ad.size() == 1, bVec = bd.size() == 1;
  if (aVec)
    ad = Dims({1, ad[0]});
  if (bVec)
    bd = Dims({bd[0], 1});
  size_t ra = ad.size(), rb = bd.size();
  dim_t N = ad[ra - 2], K = ad[ra - 1], M = bd[rb - 1];
  if (bd[rb - 2] != K)
    return I.parseError(n, "inner dimensions differ: ", a.getType()->toString(), " x ",
                        b.getType()->toString());
  std::vector<dim_t> ab(ad.begin(), ad.end() - 2), bb(bd.begin(), bd.end() - 2);
  Dims batch;
  if (!broadcastShapes(Dims(ab), Dims(bb), batch))
    return I.parseError(n, "batch dimensions of ", a.getType()->toString(), " and ",
                        b.getType()->toString(), " do not broadcast");
  std::vector<dim_t> outv(batch.begin(), batch.end());
  if (!aVec)
    outv.push_back(N);
  if (!bVec)
    outv.push_back(M);
  KILN_ASSIGN_OR_RETURN(Dims outDims, I.toDims(n, outv));
  Function *F = I.F;
  a = I.reshape(I.opName(n, "lhs"), a, ad);
  b = I.reshape(I.opName(n, "rhs"), b, bd);
  NodeValue y;
  if (rb == 2) {
    // [..., N, K] x [K, M]: one matrix product over all rows.
    dim_t rows = ad.product() / K;
    NodeValue a2 = I.reshape(I.opName(n, "rows"), a, Dims({rows, K}));
    y = F->createMatMul(I.opName(n), a2, b);
  } else {
    dim_t bt = batch.product();
    std::vector<dim_t> at = batch.vec(), btv = batch.vec();
    at.push_back(N), at.push_back(K);
    btv.push_back(K), btv.push_back(M);
    KILN_ASSIGN_OR_RETURN(Dims atd, I.toDims(n, at));
    KILN_ASSIGN_OR_RETURN(Dims btd, I.toDims(n, btv));
    a = I.F->createBroadcastTo(I.opName(n, "lhsb"), a, atd);
    b = I.F->createBroadcastTo(I.opName(n, "rhsb"), b, btd);
    a = I.reshape(I.opName(n, "lhs3"), a, Dims({bt, N, K}));
    b = I.reshape(I.opName(n, "rhs3"), b, Dims({bt, K, M}));
    y = F->createBatchMatMul(I.opName(n), a, b);
  }
  I.setOutput(n, 0, I.reshape(I.opName(n, "out"), y, outDims));
  return Error::success();
}

// ---- Recurrent networks (RNN, GRU, LSTM), unrolled over the static sequence. ----

/// One activation of a recurrent cell by its ONNX name (with alpha / beta where it has
/// them), applied after the optional clip.
Expected<NodeValue> cellActivation(Importer &I, const Node &n, const std::string &name,
                                   NodeValue x, float clip) {
  Function *F = I.F;
  if (clip > 0)
    x = F->createClip(I.opName(n, "clip"), x, -clip, clip);
  if (name == "Sigmoid")
    return NodeValue(F->createSigmoid(I.opName(n, "sigmoid"), x));
  if (name == "Tanh")
    return NodeValue(F->createTanh(I.opName(n, "tanh"), x));
  if (name == "Relu")
    return NodeValue(F->createRelu(I.opName(n, "relu"), x));
  return I.unsupported(n, "activation '", name, "' is not supported (Sigmoid, Tanh, Relu)");
}

/// Rows [g * h, (g + 1) * h) of the columns of a [rows, G * h] value.
NodeValue gateCols(Importer &I, const Node &n, NodeValue v, dim_t g, dim_t h) {
  const Dims d = v.dims();
  return I.F->createSlice(I.opName(n, "gate"), v, {0, g * h}, {d[0], (g + 1) * h});
}

/// What an RNN, GRU or LSTM node asks for, read and checked once.
struct RecurrentSpec {
  std::string op;
  dim_t gates = 1;          ///< 1 (RNN), 3 (GRU: z, r, h), 4 (LSTM: i, o, f, c)
  dim_t S = 0, Bt = 0, In = 0, H = 0, D = 1;
  std::string dir;
  bool layout = false;      ///< batch-first tensors
  bool lbr = false;         ///< GRU linear_before_reset
  float clip = 0;
  std::vector<std::string> acts; ///< per direction: 1 (RNN), 2 (GRU) or 3 (LSTM) names
  size_t perDir = 1;
  std::vector<int64_t> lens;     ///< empty: every sequence is full length
  NodeValue x, W, R;             ///< x sequence-first
};

Expected<RecurrentSpec> readRecurrent(Importer &I, const Node &n) {
  RecurrentSpec s;
  s.op = n.op_type();
  s.gates = s.op == "LSTM" ? 4 : s.op == "GRU" ? 3 : 1;
  KILN_ASSIGN_OR_RETURN(s.x, I.input(n, 0));
  KILN_ASSIGN_OR_RETURN(s.W, I.input(n, 1));
  KILN_ASSIGN_OR_RETURN(s.R, I.input(n, 2));
  s.layout = I.attrInt(n, "layout", 0) != 0;
  if (s.x.dims().size() != 3)
    return I.parseError(n, "X ", s.x.getType()->toString(), " must be 3-D");
  if (s.layout)
    s.x = I.F->createTranspose(I.opName(n, "seqfirst"), s.x, {1, 0, 2});
  const Dims xd = s.x.dims();
  s.S = xd[0], s.Bt = xd[1], s.In = xd[2];
  s.dir = I.attrString(n, "direction", "forward");
  s.D = s.dir == "bidirectional" ? 2 : 1;
  if (s.dir != "forward" && s.dir != "reverse" && s.dir != "bidirectional")
    return I.parseError(n, "unknown direction '", s.dir, "'");
  const Dims wd = s.W.dims();
  if (wd.size() != 3 || wd[0] != s.D || wd[2] != s.In || wd[1] % s.gates)
    return I.parseError(n, "W ", s.W.getType()->toString(), " does not fit X ",
                        s.x.getType()->toString(), " and ", s.D, " directions");
  s.H = wd[1] / s.gates;
  if (I.attrInt(n, "hidden_size", int64_t(s.H)) != int64_t(s.H) ||
      s.R.dims() != Dims({s.D, s.gates * s.H, s.H}))
    return I.parseError(n, "R ", s.R.getType()->toString(), " or hidden_size does not fit W");
  if (s.op == "LSTM" && I.attrInt(n, "input_forget", 0) != 0)
    return I.unsupported(n, "input_forget is not supported");
  s.lbr = I.attrInt(n, "linear_before_reset", 0) != 0;
  s.clip = I.attrFloat(n, "clip", 0.0f);
  if (const onnx::AttributeProto *a = I.attr(n, "activations"))
    s.acts.assign(a->strings().begin(), a->strings().end());
  s.perDir = s.op == "LSTM" ? 3 : s.op == "GRU" ? 2 : 1;
  if (s.acts.empty()) {
    for (dim_t d = 0; d < s.D; d++) {
      if (s.op == "RNN")
        s.acts.push_back("Tanh");
      else if (s.op == "GRU")
        s.acts.insert(s.acts.end(), {"Sigmoid", "Tanh"});
      else
        s.acts.insert(s.acts.end(), {"Sigmoid", "Tanh", "Tanh"});
    }
  }
  if (s.acts.size() != s.perDir * s.D)
    return I.parseError(n, "activations has ", s.acts.size(), " entries; expected ",
                        s.perDir * s.D);
  if (I.hasInput(n, 4)) {
    KILN_ASSIGN_OR_RETURN(const Tensor *lt, I.requireConstInput(n, 4, "sequence_lens"));
    s.lens = tensorToInts(*lt);
    if (s.lens.size() != s.Bt)
      return I.parseError(n, "sequence_lens has ", s.lens.size(), " entries for batch ", s.Bt);
    bool full = true;
    for (int64_t l : s.lens) {
      if (l < 0 || l > int64_t(s.S))
        return I.parseError(n, "sequence length ", l, " is out of range");
      full &= l == int64_t(s.S);
    }
    if (full)
      s.lens.clear();
    else if (s.dir != "forward")
      return I.unsupported(n, "sequence_lens shorter than the sequence with direction ", s.dir);
  }
  return s;
}

/// Initial state input \p i ([D, B, H]; layout 1: [B, D, H]), zeros when absent.
Expected<NodeValue> recurrentState(Importer &I, const Node &n, const RecurrentSpec &s, int i,
                                   const char *part) {
  if (!I.hasInput(n, i))
    return I.splat(I.opName(n, part), s.x.getElementType(), Dims({s.D, s.Bt, s.H}), 0);
  KILN_ASSIGN_OR_RETURN(NodeValue v, I.input(n, i));
  if (s.layout)
    v = I.F->createTranspose(I.opName(n, part), v, {1, 0, 2});
  if (v.dims() != Dims({s.D, s.Bt, s.H}))
    return I.parseError(n, "initial state ", v.getType()->toString(), " must be [", s.D, ", ",
                        s.Bt, ", ", s.H, "]");
  return v;
}

/// The weights of one direction \p d, laid out for the steps.
struct DirectionWeights {
  NodeValue Rt; ///< [H, G*H]
  NodeValue xw; ///< every step's input times W^T plus Wb: [S*B, G*H]
  NodeValue rb; ///< Rb [G*H], or null
  NodeValue P;  ///< LSTM peepholes [3*H] (i, o, f), or null
};

/// Slice \p d of a [D, a, b] value, as [a, b].
NodeValue directionSlice(Importer &I, const Node &n, NodeValue v, dim_t d, const char *part) {
  const Dims vd = v.dims();
  return I.reshape(I.opName(n, part),
                   I.F->createSlice(I.opName(n, part), v, {d, 0, 0}, {d + 1, vd[1], vd[2]}),
                   Dims({vd[1], vd[2]}));
}

Expected<DirectionWeights> directionWeights(Importer &I, const Node &n, const RecurrentSpec &s,
                                            dim_t d) {
  Function *F = I.F;
  const dim_t GH = s.gates * s.H;
  DirectionWeights w;
  NodeValue Wt = F->createTranspose(I.opName(n, "wt"), directionSlice(I, n, s.W, d, "w"), {1, 0});
  w.Rt = F->createTranspose(I.opName(n, "rt"), directionSlice(I, n, s.R, d, "r"), {1, 0});
  NodeValue xs = I.reshape(I.opName(n, "rows"), s.x, Dims({s.S * s.Bt, s.In}));
  w.xw = F->createMatMul(I.opName(n, "xw"), xs, Wt);
  if (I.hasInput(n, 3)) {
    KILN_ASSIGN_OR_RETURN(NodeValue Bv, I.input(n, 3));
    if (Bv.dims() != Dims({s.D, 2 * GH}))
      return I.parseError(n, "B ", Bv.getType()->toString(), " must be [", s.D, ", ", 2 * GH, "]");
    NodeValue bd = I.reshape(I.opName(n, "b"),
                             F->createSlice(I.opName(n, "b"), Bv, {d, 0}, {d + 1, 2 * GH}),
                             Dims({2 * GH}));
    NodeValue wb = F->createSlice(I.opName(n, "wb"), bd, {0}, {GH});
    w.rb = F->createSlice(I.opName(n, "rb"), bd, {GH}, {2 * GH});
    w.xw = F->createBatchedAdd(I.opName(n, "xwb"), w.xw, wb);
  }
  if (s.op == "LSTM" && I.hasInput(n, 7)) {
    KILN_ASSIGN_OR_RETURN(NodeValue Pv, I.input(n, 7));
    if (Pv.dims() != Dims({s.D, 3 * s.H}))
      return I.parseError(n, "P ", Pv.getType()->toString(), " must be [", s.D, ", ", 3 * s.H,
                          "]");
    w.P = I.reshape(I.opName(n, "p"),
                    F->createSlice(I.opName(n, "p"), Pv, {d, 0}, {d + 1, 3 * s.H}),
                    Dims({3 * s.H}));
  }
  return w;
}

/// The state after one step; c only for LSTM.
struct CellState {
  NodeValue h, c;
};

/// One GRU step from the step's input part \p xt and the recurrent part \p hr.
Expected<CellState> gruStep(Importer &I, const Node &n, const RecurrentSpec &s,
                            const DirectionWeights &w, const std::string *act, NodeValue xt,
                            NodeValue hr, NodeValue h) {
  Function *F = I.F;
  const dim_t H = s.H;
  auto gx = [&](dim_t g) { return gateCols(I, n, xt, g, H); };
  auto gh = [&](dim_t g) { return gateCols(I, n, hr, g, H); };
  KILN_ASSIGN_OR_RETURN(NodeValue z, cellActivation(I, n, act[0],
                        F->createAdd(I.opName(n, "zpre"), gx(0), gh(0)), s.clip));
  KILN_ASSIGN_OR_RETURN(NodeValue r, cellActivation(I, n, act[0],
                        F->createAdd(I.opName(n, "rpre"), gx(1), gh(1)), s.clip));
  NodeValue hpre;
  if (s.lbr) {
    hpre = F->createAdd(I.opName(n, "hpre"), gx(2), F->createMul(I.opName(n, "rh"), r, gh(2)));
  } else {
    // (r * h) R_h^T + Rb_h.
    NodeValue Rh = F->createSlice(I.opName(n, "rht"), w.Rt, {0, 2 * H}, {H, 3 * H});
    NodeValue rhh = F->createMatMul(I.opName(n, "rhh"), F->createMul(I.opName(n, "rh"), r, h), Rh);
    if (w.rb)
      rhh = F->createBatchedAdd(I.opName(n, "rhhb"), rhh,
                                F->createSlice(I.opName(n, "rbh"), w.rb, {2 * H}, {3 * H}));
    hpre = F->createAdd(I.opName(n, "hpre"), gx(2), rhh);
  }
  KILN_ASSIGN_OR_RETURN(NodeValue hh, cellActivation(I, n, act[1], hpre, s.clip));
  // (1 - z) * hh + z * h = hh + z * (h - hh)
  return CellState{F->createAdd(I.opName(n, "hnew"), hh,
                                F->createMul(I.opName(n, "zh"), z,
                                             F->createSub(I.opName(n, "dh"), h, hh))),
                   NodeValue()};
}

/// One LSTM step from the pre-activations \p pre = x W^T + h R^T (+ biases).
Expected<CellState> lstmStep(Importer &I, const Node &n, const RecurrentSpec &s,
                             const DirectionWeights &w, const std::string *act, NodeValue pre,
                             NodeValue c) {
  Function *F = I.F;
  const dim_t H = s.H;
  auto peep = [&](dim_t g, NodeValue cv) -> NodeValue { // P slice g (i, o, f) times c
    NodeValue pg = F->createSlice(I.opName(n, "pg"), w.P, {g * H}, {(g + 1) * H});
    return F->createMul(I.opName(n, "peep"), cv, F->createBroadcastTo(I.opName(n, "pgb"),
                        I.reshape(I.opName(n, "pg1"), pg, Dims({1, H})), Dims({s.Bt, H})));
  };
  auto g = [&](dim_t k) { return gateCols(I, n, pre, k, H); };
  NodeValue ipre = g(0), fpre = g(2);
  if (w.P) {
    ipre = F->createAdd(I.opName(n, "ipeep"), ipre, peep(0, c));
    fpre = F->createAdd(I.opName(n, "fpeep"), fpre, peep(2, c));
  }
  KILN_ASSIGN_OR_RETURN(NodeValue ig, cellActivation(I, n, act[0], ipre, s.clip));
  KILN_ASSIGN_OR_RETURN(NodeValue fg, cellActivation(I, n, act[0], fpre, s.clip));
  KILN_ASSIGN_OR_RETURN(NodeValue cg, cellActivation(I, n, act[1], g(3), s.clip));
  NodeValue cn = F->createAdd(I.opName(n, "cnew"), F->createMul(I.opName(n, "fc"), fg, c),
                              F->createMul(I.opName(n, "ic"), ig, cg));
  NodeValue opre = g(1);
  if (w.P)
    opre = F->createAdd(I.opName(n, "opeep"), opre, peep(1, cn));
  KILN_ASSIGN_OR_RETURN(NodeValue og, cellActivation(I, n, act[0], opre, s.clip));
  KILN_ASSIGN_OR_RETURN(NodeValue hc, cellActivation(I, n, act[2], cn, 0));
  return CellState{F->createMul(I.opName(n, "hnew"), og, hc), cn};
}

/// The outputs of one direction: Y [S, 1, B, H] and the last h and c.
struct DirectionOutputs {
  NodeValue y;
  CellState last;
};

/// Unrolls direction \p d over the sequence from state \p st.
Expected<DirectionOutputs> unrollDirection(Importer &I, const Node &n, const RecurrentSpec &s,
                                           dim_t d, CellState st) {
  Function *F = I.F;
  const dim_t S = s.S, Bt = s.Bt, H = s.H, GH = s.gates * s.H;
  const ElemKind ek = s.x.getElementType();
  bool rev = s.dir == "reverse" || d == 1;
  KILN_ASSIGN_OR_RETURN(DirectionWeights w, directionWeights(I, n, s, d));
  const std::string *act = &s.acts[d * s.perDir];
  std::vector<NodeValue> outs(S);
  for (dim_t step = 0; step < S; step++) {
    dim_t t = rev ? S - 1 - step : step;
    NodeValue xt = F->createSlice(I.opName(n, "xt"), w.xw, {t * Bt, 0}, {(t + 1) * Bt, GH});
    NodeValue hr = F->createMatMul(I.opName(n, "hr"), st.h, w.Rt); // [B, G*H]
    if (w.rb)
      hr = F->createBatchedAdd(I.opName(n, "hrb"), hr, w.rb);
    CellState next;
    if (s.op == "RNN") {
      KILN_ASSIGN_OR_RETURN(next.h, cellActivation(I, n, act[0],
                                                   F->createAdd(I.opName(n, "pre"), xt, hr),
                                                   s.clip));
    } else if (s.op == "GRU") {
      KILN_ASSIGN_OR_RETURN(next, gruStep(I, n, s, w, act, xt, hr, st.h));
    } else {
      KILN_ASSIGN_OR_RETURN(next, lstmStep(I, n, s, w, act,
                                           F->createAdd(I.opName(n, "pre"), xt, hr), st.c));
    }
    NodeValue y = next.h;
    if (!s.lens.empty()) {
      // Past a sequence's end its output is zero and its state stays.
      Tensor live(ElemKind::Bool, {Bt, H});
      for (dim_t b = 0; b < Bt; b++)
        for (dim_t k = 0; k < H; k++)
          live.getHandle<bool>().raw(b * H + k) = int64_t(t) < s.lens[b];
      NodeValue lv = I.makeConstant(I.opName(n, "live"), std::move(live));
      y = F->createSelect(I.opName(n, "yt"), lv, next.h,
                          I.splat(I.opName(n, "z"), ek, Dims({Bt, H}), 0));
      next.h = F->createSelect(I.opName(n, "ht"), lv, next.h, st.h);
      if (next.c)
        next.c = F->createSelect(I.opName(n, "ct"), lv, next.c, st.c);
    }
    st.h = next.h;
    if (next.c)
      st.c = next.c;
    outs[t] = I.reshape(I.opName(n, "y1"), y, Dims({1, 1, Bt, H}));
  }
  NodeValue Y = S == 1 ? outs[0] : NodeValue(F->createConcat(I.opName(n, "yseq"), outs, 0));
  return DirectionOutputs{Y, st};
}

/// RNN, GRU and LSTM: every time step is built as graph nodes (MatMuls of the step's
/// input and the previous state with the transposed weights, the gates' activations);
/// sequence_lens (known at load) keep the state and zero the output past each sequence's
/// end in the forward direction.
Error convertRecurrent(Importer &I, const Node &n) {
  Function *F = I.F;
  KILN_ASSIGN_OR_RETURN(RecurrentSpec s, readRecurrent(I, n));
  KILN_ASSIGN_OR_RETURN(NodeValue h0, recurrentState(I, n, s, 5, "h0"));
  NodeValue c0;
  if (s.op == "LSTM") {
    KILN_ASSIGN_OR_RETURN(c0, recurrentState(I, n, s, 6, "c0"));
  }
  std::vector<NodeValue> ys, hs, cs;
  for (dim_t d = 0; d < s.D; d++) {
    CellState st{directionSlice(I, n, h0, d, "h0d"),
                 c0 ? directionSlice(I, n, c0, d, "c0d") : NodeValue()};
    KILN_ASSIGN_OR_RETURN(DirectionOutputs o, unrollDirection(I, n, s, d, st));
    ys.push_back(o.y);
    hs.push_back(I.reshape(I.opName(n, "hlast"), o.last.h, Dims({1, s.Bt, s.H})));
    if (o.last.c)
      cs.push_back(I.reshape(I.opName(n, "clast"), o.last.c, Dims({1, s.Bt, s.H})));
  }
  auto join = [&](std::vector<NodeValue> &v, unsigned axis, const char *part) {
    return v.size() == 1 ? v[0] : NodeValue(F->createConcat(I.opName(n, part), v, axis));
  };
  NodeValue Y = join(ys, 1, "y"), Yh = join(hs, 0, "yh");
  NodeValue Yc = cs.empty() ? NodeValue() : join(cs, 0, "yc");
  if (s.layout) {
    Y = F->createTranspose(I.opName(n, "ybatch"), Y, {2, 0, 1, 3});
    Yh = F->createTranspose(I.opName(n, "yhbatch"), Yh, {1, 0, 2});
    if (Yc)
      Yc = F->createTranspose(I.opName(n, "ycbatch"), Yc, {1, 0, 2});
  }
  I.setOutput(n, 0, Y);
  I.setOutput(n, 1, Yh);
  if (Yc)
    I.setOutput(n, 2, Yc);
  return Error::success();
}

// ---- Einsum. ----

/// An operand of an Einsum being reduced to its result: a value and one label per dim.
struct Labeled {
  NodeValue v;
  std::string labels;
};

/// Moves \p x's dims into the label order \p want (a permutation of its labels).
NodeValue toOrder(Importer &I, const Node &n, Labeled x, const std::string &want) {
  if (x.labels == want)
    return x.v;
  std::vector<dim_t> perm;
  for (char c : want)
    perm.push_back(dim_t(x.labels.find(c)));
  return I.F->createTranspose(I.opName(n, "order"), x.v, perm);
}

/// An Einsum equation bound to its operands: one label per dim ("..." replaced by digit
/// labels), the size of each label, and the output's labels.
struct EinsumProblem {
  std::string eq;
  std::vector<Labeled> ops;
  std::map<char, dim_t> size;
  std::string out;
};

Expected<EinsumProblem> readEinsum(Importer &I, const Node &n) {
  EinsumProblem p;
  for (char c : I.attrString(n, "equation", ""))
    if (c != ' ')
      p.eq.push_back(c);
  size_t arrow = p.eq.find("->");
  std::string lhs = arrow == std::string::npos ? p.eq : p.eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t q0 = 0;;) {
    size_t q = lhs.find(',', q0);
    terms.push_back(lhs.substr(q0, q == std::string::npos ? std::string::npos : q - q0));
    if (q == std::string::npos)
      break;
    q0 = q + 1;
  }
  if (int(terms.size()) != n.input_size())
    return I.parseError(n, "the equation '", p.eq, "' has ", terms.size(), " operands, the node ",
                        n.input_size());
  const std::string ell = "0123456789"; // stand-ins for the dims of "..."
  size_t ellDims = 0;
  for (size_t i = 0; i < terms.size(); i++) {
    KILN_ASSIGN_OR_RETURN(NodeValue v, I.input(n, int(i)));
    std::string t = terms[i];
    size_t e = t.find("...");
    if (e != std::string::npos) {
      size_t named = t.size() - 3;
      if (v.dims().size() < named)
        return I.parseError(n, "operand ", i, " ", v.getType()->toString(), " has fewer dims than '",
                            t, "'");
      size_t k = v.dims().size() - named;
      if (i > 0 && k != ellDims)
        return I.unsupported(n, "'...' standing for different numbers of dims");
      ellDims = k;
      t = t.substr(0, e) + ell.substr(0, k) + t.substr(e + 3);
    }
    if (t.size() != v.dims().size())
      return I.parseError(n, "term '", terms[i], "' does not match operand ", i, " ",
                          v.getType()->toString());
    for (size_t a = 0; a < t.size(); a++) {
      if (!std::isalpha((unsigned char)t[a]) && ell.find(t[a]) == std::string::npos)
        return I.parseError(n, "bad label '", t[a], "' in '", p.eq, "'");
      auto it = p.size.find(t[a]);
      if (it != p.size.end() && it->second != v.dims()[a])
        return I.unsupported(n, "label '", t[a], "' with sizes ", it->second, " and ",
                             v.dims()[a], " (broadcasting)");
      p.size[t[a]] = v.dims()[a];
    }
    p.ops.push_back({v, t});
  }
  if (arrow != std::string::npos) {
    p.out = p.eq.substr(arrow + 2);
    size_t e = p.out.find("...");
    if (e != std::string::npos)
      p.out = p.out.substr(0, e) + ell.substr(0, ellDims) + p.out.substr(e + 3);
  } else {
    // Implicit: the "..." dims, then the labels used once, alphabetically.
    p.out = ell.substr(0, ellDims);
    std::map<char, int> uses;
    for (auto &o : p.ops)
      for (char c : o.labels)
        uses[c]++;
    for (auto &[c, k] : uses)
      if (k == 1 && std::isalpha((unsigned char)c))
        p.out.push_back(c);
  }
  return p;
}

/// Operand \p i of \p p with its repeated labels reduced to their diagonal and the labels
/// that neither the output nor another operand needs summed away.
void reduceOperand(Importer &I, const Node &n, EinsumProblem &p, size_t i) {
  Function *F = I.F;
  Labeled &o = p.ops[i];
  for (size_t a = 0; a < o.labels.size(); a++) {
    size_t b = o.labels.find(o.labels[a], a + 1);
    if (b == std::string::npos)
      continue;
    // Move a and b last, flatten them, and gather the diagonal.
    std::string rest;
    for (size_t k = 0; k < o.labels.size(); k++)
      if (k != a && k != b)
        rest.push_back(o.labels[k]);
    char c = o.labels[a];
    NodeValue v = toOrder(I, n, o, rest + c + c);
    dim_t len = p.size[c];
    std::vector<dim_t> flat;
    for (char r : rest)
      flat.push_back(p.size[r]);
    flat.push_back(len * len);
    std::vector<int64_t> diag(len);
    for (dim_t k = 0; k < len; k++)
      diag[k] = int64_t(k * (len + 1));
    v = I.reshape(I.opName(n, "pair"), v, Dims(flat));
    v = F->createGather(I.opName(n, "diag"), v,
                        I.makeConstant(I.opName(n, "diagidx"),
                                       tensorFromInts(ElemKind::Int64I, {len}, diag)),
                        int64_t(flat.size() - 1));
    o = {v, rest + c};
    a = size_t(-1); // rescan
  }
  auto needed = [&](char c) {
    if (p.out.find(c) != std::string::npos)
      return true;
    for (size_t j = 0; j < p.ops.size(); j++)
      if (j != i && p.ops[j].labels.find(c) != std::string::npos)
        return true;
    return false;
  };
  std::vector<int64_t> axes;
  std::string kept;
  for (size_t a = 0; a < o.labels.size(); a++) {
    if (needed(o.labels[a]))
      kept.push_back(o.labels[a]);
    else
      axes.push_back(int64_t(a));
  }
  if (!axes.empty())
    o = {F->createReduceSum(I.opName(n, "sum"), o.v, axes, false), kept};
}

/// The product of the first two operands of \p p (removed from it) as one BatchMatMul over
/// (shared labels still needed, left only, contracted, right only).
Expected<Labeled> contractFirstPair(Importer &I, const Node &n, EinsumProblem &p) {
  Labeled a = p.ops[0], b = p.ops[1];
  p.ops.erase(p.ops.begin(), p.ops.begin() + 2);
  auto laterOrOut = [&](char c) {
    if (p.out.find(c) != std::string::npos)
      return true;
    for (auto &o : p.ops)
      if (o.labels.find(c) != std::string::npos)
        return true;
    return false;
  };
  std::string batch, aOnly, bOnly, contract;
  for (char c : a.labels) {
    bool inB = b.labels.find(c) != std::string::npos;
    if (inB && laterOrOut(c))
      batch.push_back(c);
    else if (inB)
      contract.push_back(c);
    else
      aOnly.push_back(c);
  }
  for (char c : b.labels)
    if (a.labels.find(c) == std::string::npos)
      bOnly.push_back(c);
  auto prod = [&](const std::string &ls) {
    dim_t r = 1;
    for (char c : ls)
      r *= p.size[c];
    return r;
  };
  dim_t Bt = prod(batch), M = prod(aOnly), K = prod(contract), N = prod(bOnly);
  NodeValue av = I.reshape(I.opName(n, "lhs"), toOrder(I, n, a, batch + aOnly + contract),
                           Dims({Bt, M, K}));
  NodeValue bv = I.reshape(I.opName(n, "rhs"), toOrder(I, n, b, batch + contract + bOnly),
                           Dims({Bt, K, N}));
  NodeValue y = I.F->createBatchMatMul(I.opName(n, "bmm"), av, bv);
  std::string labels = batch + aOnly + bOnly;
  std::vector<dim_t> yd;
  for (char c : labels)
    yd.push_back(p.size[c]);
  KILN_ASSIGN_OR_RETURN(Dims ydd, I.toDims(n, yd));
  return Labeled{I.reshape(I.opName(n, "prod"), y, ydd), labels};
}

/// Einsum over one or more operands: repeated labels within an operand take the diagonal,
/// labels no one else needs are summed, pairs of operands become a BatchMatMul over
/// (shared kept, left only, contracted, right only) dims, and the result is transposed to
/// the output's order. "..." stands for the same leading dims in every operand.
Error convertEinsum(Importer &I, const Node &n) {
  KILN_ASSIGN_OR_RETURN(EinsumProblem p, readEinsum(I, n));
  for (size_t i = 0; i < p.ops.size(); i++)
    reduceOperand(I, n, p, i);
  while (p.ops.size() > 1) { // pairwise products, left to right
    KILN_ASSIGN_OR_RETURN(Labeled prod, contractFirstPair(I, n, p));
    p.ops.insert(p.ops.begin(), std::move(prod));
  }
  Labeled r = p.ops[0];
  for (char c : p.out)
    if (r.labels.find(c) == std::string::npos)
      return I.parseError(n, "output label '", c, "' is not in any operand");
  if (r.labels.size() != p.out.size())
    return I.parseError(n, "bad output '", p.out, "'");
  I.setOutput(n, 0, toOrder(I, n, r, p.out));
  return Error::success();
}

} // namespace

void registerLinalgConverters(ConverterMap &m) {
  m["Einsum"] = convertEinsum;
  m["RNN"] = convertRecurrent;
  m["GRU"] = convertRecurrent;
  m["LSTM"] = convertRecurrent;
  m["Gemm"] = convertGemm;
  m["MatMul"] = convertMatMul;
  m.requireInputs("Gemm", 2);
  m.requireInputs("MatMul", 2);
}

} // namespace kiln::onnximport
