// fold-layer-norm: a LayerNorm written out in primitives, as ONNX exports before opset 17
// give it, becomes one LayerNormalization over the trailing axes it reduces:
//   m   = ReduceMean(x, axes a..r-1, KeepDims)
//   d   = x - B(m)
//   v   = ReduceMean(d^2, the same axes, KeepDims)   d^2: Pow(d, 2) or Mul(d, d)
//   s   = Sqrt(v + eps)                              eps: a uniform value, either side
//   y   = d / B(s)    or  d * B(Reciprocal(s)), d * B(1 / s), d * B(Rsqrt(v + eps))
// then optionally y * g and (y * g) + b (either operand order), where g and b broadcast
// along the normalized axes only (a Broadcast of a value whose dims, right-aligned, are 1
// before axis a; or a uniform value). B is a Broadcast of the kept-dims value to x's dims.
// Not folded: epsilon added after the Sqrt (d / (sqrt(v) + eps) is another function),
// the unbiased variance, E[x^2] - E[x]^2, intermediate values with users outside the
// pattern, and non-Float kinds. Without a scale or shift (or with a uniform one) the node
// gets a Constant of that value. The rewrite happens only where the backend runs
// LayerNormalization whole (no backend: always), so a backend that lowers it sees the
// graph it would have seen.

#include "FoldLayerNorm.h"

#include "PassUtils.h"

#include "kiln/Backend/Backend.h"

#include <algorithm>

namespace kiln {

namespace {

/// The source of a Broadcast, else \p v itself.
NodeValue throughBroadcast(NodeValue v) {
  if (auto *b = dyn_cast<BroadcastNode>(v.node))
    return b->getInput();
  return v;
}

/// True when \p v's only user is \p user (result 0, single-result node).
bool onlyFeeds(NodeValue v, const Node *user) {
  if (!v.node || v.node->getNumResults() != 1 || v.node->getNumUsesOf(0) == 0)
    return false;
  for (const NodeUse &u : v.node->getUsers())
    if (u.user != user)
      return false;
  return true;
}

/// \p v is Broadcast(src) with only \p user, src used only by the Broadcast; returns src.
NodeValue privateBroadcastSource(NodeValue v, const Node *user) {
  auto *b = dyn_cast<BroadcastNode>(v.node);
  if (!b || !onlyFeeds(v, user))
    return NodeValue();
  return b->getInput();
}

/// The axes of a mean over trailing axes a..r-1 of a rank-r value with kept dims: a, or
/// -1 when \p n is not such a ReduceMean.
int trailingMeanAxis(const Node *n) {
  auto *rm = dyn_cast<ReduceMeanNode>(n);
  if (!rm || !rm->getKeepDims() || rm->getInput().getType()->kind != ElemKind::Float)
    return -1;
  size_t r = rm->getInput().getType()->rank();
  std::vector<dim_t> axes = rm->getAxes();
  std::sort(axes.begin(), axes.end());
  if (axes.empty() || axes.back() != r - 1)
    return -1;
  for (size_t i = 1; i < axes.size(); i++)
    if (axes[i] != axes[i - 1] + 1)
      return -1;
  return int(axes.front());
}

/// The squares of \p d: Pow(d, 2) or Mul(d, d).
bool isSquareOf(const Node *n, NodeValue d) {
  if (auto *p = dyn_cast<PowNode>(n))
    return p->getNthInput(0) == d && passutil::isUniformValue(p->getNthInput(1), 2.0);
  if (auto *m = dyn_cast<MulNode>(n))
    return m->getNthInput(0) == d && m->getNthInput(1) == d;
  return false;
}

struct Match {
  NodeValue x;
  int axis = -1;
  float eps = 0;
};

/// v + eps with v a trailing-axes ReduceMean of the squares of d = x - B(mean(x)).
bool matchVarPlusEps(Node *add, const Node *user, Match &m, NodeValue &d) {
  if (!isa<AddNode>(add) || !onlyFeeds(NodeValue(add, 0), user))
    return false;
  for (unsigned side = 0; side < 2; side++) {
    NodeValue var = add->getNthInput(side);
    double eps;
    if (!passutil::getUniformValue(add->getNthInput(1 - side), eps) || !(eps >= 0))
      continue;
    int axis = trailingMeanAxis(var.node);
    if (axis < 0 || !onlyFeeds(var, add))
      continue;
    Node *sq = var.node->getNthInput(0).node;
    if (sq->getNumInputs() != 2)
      continue;
    NodeValue dd = sq->getNthInput(0);
    auto *sub = dyn_cast<SubNode>(dd.node);
    if (!sub || !isSquareOf(sq, dd) || !onlyFeeds(NodeValue(sq, 0), var.node))
      continue;
    NodeValue x = sub->getNthInput(0);
    auto *bm = dyn_cast<BroadcastNode>(sub->getNthInput(1).node);
    if (!bm || !onlyFeeds(NodeValue(bm, 0), sub) || x.getType() != dd.getType())
      continue;
    NodeValue mean = bm->getInput();
    if (trailingMeanAxis(mean.node) != axis || mean.node->getNthInput(0) != x ||
        !onlyFeeds(mean, bm) ||
        cast<ReduceMeanNode>(mean.node)->getAxes().size() !=
            cast<ReduceMeanNode>(var.node)->getAxes().size())
      continue;
    m.x = x;
    m.axis = axis;
    m.eps = float(eps);
    d = dd;
    return true;
  }
  return false;
}

/// \p n normalises: d / B(sqrt(v + eps)), or d times a broadcast reciprocal of it.
bool matchNormalize(Node *n, Match &m) {
  if (n->getNumResults() != 1 || n->getType(0)->kind != ElemKind::Float)
    return false;
  auto check = [&](NodeValue d, NodeValue den) {
    // den: Broadcast(s) of a kept-dims value, s the only thing the Broadcast reads.
    NodeValue s = privateBroadcastSource(den, n);
    if (!s)
      return false;
    Node *sqrtArg = nullptr;
    const Node *sqrtUser = nullptr;
    if (isa<DivNode>(n)) {
      if (!isa<SqrtNode>(s.node))
        return false;
      sqrtArg = s.node->getNthInput(0).node;
      sqrtUser = s.node;
    } else {
      Node *inv = s.node;
      const Node *sqrtNode = nullptr;
      if (isa<RsqrtNode>(inv)) {
        sqrtArg = inv->getNthInput(0).node;
        sqrtUser = inv;
      } else if (isa<ReciprocalNode>(inv)) {
        sqrtNode = inv->getNthInput(0).node;
      } else if (isa<DivNode>(inv) && passutil::isUniformValue(inv->getNthInput(0), 1.0)) {
        sqrtNode = inv->getNthInput(1).node;
      } else {
        return false;
      }
      if (sqrtNode) {
        if (!isa<SqrtNode>(sqrtNode) || !onlyFeeds(NodeValue(const_cast<Node *>(sqrtNode), 0), inv))
          return false;
        sqrtArg = sqrtNode->getNthInput(0).node;
        sqrtUser = sqrtNode;
      }
    }
    if (!onlyFeeds(s, den.node))
      return false;
    NodeValue dd;
    if (!matchVarPlusEps(sqrtArg, sqrtUser, m, dd) || dd != d)
      return false;
    // d is read by the square and by n only.
    for (const NodeUse &u : d.node->getUsers())
      if (u.user != n && !isSquareOf(u.user, d))
        return false;
    return d.getType() == n->getType(0);
  };
  if (isa<DivNode>(n))
    return check(n->getNthInput(0), n->getNthInput(1));
  if (isa<MulNode>(n))
    return check(n->getNthInput(0), n->getNthInput(1)) ||
           check(n->getNthInput(1), n->getNthInput(0));
  return false;
}

/// A Constant of \p ty whose elements are all \p value (a Constant, not a Splat: backends
/// read it from their constant memory, with nothing to compute per run).
Constant *uniformConstant(Function *f, const std::string &name, const Type &ty, float value) {
  Tensor t(ty);
  auto h = t.getHandle<float>();
  for (size_t i = 0, e = ty.numElements(); i < e; i++)
    h.raw(i) = value;
  return passutil::makeConstant(f, name, std::move(t));
}

/// The per-normalized-element operand of an affine step on a value of \p dims normalized
/// from \p axis, reshaped to the normalized dims; null when \p v broadcasts otherwise.
NodeValue affineOperand(Function *f, NodeValue v, const Dims &dims, size_t axis,
                        const std::string &name) {
  Dims nd(std::vector<dim_t>(dims.begin() + axis, dims.end()));
  TypeRef ty = passutil::withDims(f, *v.getType(), nd);
  NodeValue src = throughBroadcast(v);
  const Dims &sd = src.getType()->dims;
  bool fits = src.getType()->kind == ElemKind::Float && sd.size() <= dims.size();
  for (size_t i = 0; fits && i < dims.size(); i++) {
    size_t lead = dims.size() - sd.size();
    dim_t di = i < lead ? 1 : sd[i - lead];
    fits = i < axis ? di == 1 : di == dims[i];
  }
  if (!fits) {
    double u;
    if (passutil::getUniformValue(v, u, 1 << 16))
      return uniformConstant(f, name, *ty, float(u));
    return NodeValue();
  }
  if (sd == nd)
    return src;
  return f->createReshape(name, src, std::vector<dim_t>(nd.begin(), nd.end()));
}

/// Folds the LayerNorm ending at \p n (the normalising Div or Mul) and its affine tail.
bool fold(Function *f, Node *n, const PassContext &ctx, passutil::Sweeper &sweeper) {
  Match m;
  if (!matchNormalize(n, m))
    return false;
  const Dims &dims = m.x.getType()->dims;
  size_t axis = size_t(m.axis);
  Dims nd(std::vector<dim_t>(dims.begin() + axis, dims.end()));
  TypeRef pty = passutil::withDims(f, *m.x.getType(), nd);
  if (ctx.backend) {
    // Asked with a probe node that is erased again, so a refusal leaves nothing behind.
    auto *one = passutil::makeSplat(f, n->getName() + ".probe1", *pty, 1.0);
    auto *zero = passutil::makeSplat(f, n->getName() + ".probe0", *pty, 0.0);
    auto *probe = f->createLayerNormalization(n->getName() + ".probe", m.x, one, zero,
                                              int64_t(axis), m.eps);
    bool ok = ctx.backend->isOpSupported(*probe) && !ctx.backend->shouldLower(*probe);
    f->eraseNode(probe);
    f->eraseNode(one);
    f->eraseNode(zero);
    if (!ok)
      return false;
  }
  // y * g, then + b: each the only user of the value before it.
  Node *last = n;
  auto step = [&](NodeKind kind, const char *suffix) -> NodeValue {
    if (last->getNumUsesOf(0) != 1)
      return NodeValue();
    Node *u = last->getUsers().front().user;
    if (u->getKind() != kind || u->getType(0) != last->getType(0))
      return NodeValue();
    NodeValue self(last, 0);
    unsigned side = u->getNthInput(0) == self ? 1 : u->getNthInput(1) == self ? 0 : 2;
    if (side == 2 || u->getNthInput(side) == self)
      return NodeValue();
    NodeValue op = affineOperand(f, u->getNthInput(side), dims, axis, u->getName() + suffix);
    if (op)
      last = u;
    return op;
  };
  NodeValue scale = step(NodeKind::Mul, ".scale");
  NodeValue bias = step(NodeKind::Add, ".bias");
  if (!scale)
    scale = uniformConstant(f, n->getName() + ".scale", *pty, 1.0f);
  if (!bias)
    bias = uniformConstant(f, n->getName() + ".bias", *pty, 0.0f);
  auto *ln = f->createLayerNormalization(n->getName() + ".ln", m.x, scale, bias,
                                         int64_t(axis), m.eps);
  passutil::replaceWith(last, ln->getResult(), sweeper);
  return true;
}

} // namespace

bool foldLayerNorms(Function *f, const PassContext &ctx) {
  passutil::Sweeper sweeper;
  bool changed = false;
  for (Node *n : passutil::topoOrder(*f)) {
    if (!n->hasUsers() || !(isa<DivNode>(n) || isa<MulNode>(n)))
      continue;
    changed |= fold(f, n, ctx, sweeper);
  }
  sweeper.sweep(f);
  return changed;
}

} // namespace kiln
