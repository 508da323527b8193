// CPU graph step widen-half-floats (WidenHalfFloats.h).
#include "WidenHalfFloats.h"

#include <map>
#include <memory>

namespace kiln::cpu {

namespace {

bool isHalf(ElemKind k) { return k == ElemKind::Float16 || k == ElemKind::BFloat16; }

/// \p t with a 16-bit float kind made Float (other types unchanged).
Type widened(const Type &t) {
  if (!isHalf(t.kind))
    return t;
  return Type(ElemKind::Float, t.dims);
}

/// A copy of \p n in \p g whose operands are placeholders of the widened operand types and
/// whose results have the widened result types.
Node *widenedCopy(const Node &n, Module &m, Function *g) {
  Node *c = g->addNode(n.clone());
  for (unsigned i = 0; i < n.getNumInputs(); i++)
    c->setNthInput(i, m.createPlaceholder(m.uniqueType(widened(*n.getNthInput(i).getType())),
                                          "in" + std::to_string(i)));
  for (unsigned r = 0; r < n.getNumResults(); r++)
    c->setType(r, m.uniqueType(widened(*n.getType(r))));
  return c;
}

} // namespace

bool hasHalfFloats(const Node &n) {
  for (unsigned i = 0; i < n.getNumInputs(); i++)
    if (isHalf(n.getNthInput(i).getElementType()))
      return true;
  for (unsigned r = 0; r < n.getNumResults(); r++)
    if (isHalf(n.getType(r)->kind))
      return true;
  return false;
}

bool isWidenable(const Node &n, const NativeSupport &native) {
  // ConvertTo is the widening itself; Save writes its operand's type. A 16-bit fused node
  // rounds twice (the convolution's or product's result, then the epilogue's, as the
  // Interpreter stores them): its widened form would round once.
  if (!hasHalfFloats(n) || isa<ConvertToNode>(&n) || isa<SaveNode>(&n) ||
      isa<Placeholder>(&n) || isa<Constant>(&n) || isa<FusedConvolutionNode>(&n) ||
      isa<FusedFullyConnectedNode>(&n))
    return false;
  Module scratch;
  Function *g = scratch.createFunction("widen");
  return native(*widenedCopy(n, scratch, g));
}

bool widenHalfFloats(Function *f, const std::function<bool(const Node &)> &widen) {
  std::vector<Node *> todo;
  for (const auto &up : f->getNodes())
    if (hasHalfFloats(*up) && widen(*up))
      todo.push_back(up.get());
  Module &m = *f->getParent();
  // A 16-bit constant operand is widened once, here, into a float32 constant: the kernels
  // then see constant weights (packed at compile time) instead of a ConvertTo every run.
  std::map<const Constant *, Constant *> wideConstants;
  auto widenConstant = [&](Constant *c) {
    Constant *&w = wideConstants[c];
    if (!w) {
      Tensor t(widened(*c->getType()));
      auto out = t.getHandle<float>();
      const Tensor &src = c->getPayload();
      for (size_t i = 0; i < out.size(); i++)
        out.raw(i) = float(src.getAsDouble(i)); // exact: every 16-bit float is a float32
      w = m.createConstant(c->getName() + ".f32", std::move(t));
    }
    return w;
  };
  for (Node *n : todo) {
    const std::string name = n->getName();
    Node *c = n->clone();
    c->setName(name + ".f32");
    f->addNode(c);
    for (unsigned i = 0; i < n->getNumInputs(); i++) {
      NodeValue in = n->getNthInput(i);
      if (!isHalf(in.getElementType()))
        continue;
      if (auto *k = dyn_cast<Constant>(in.node))
        c->setNthInput(i, widenConstant(k));
      else
        c->setNthInput(i, f->createConvertTo(name + ".widen" + std::to_string(i),
                                             m.uniqueType(widened(*in.getType())), in));
    }
    for (unsigned r = 0; r < n->getNumResults(); r++) {
      TypeRef t = n->getType(r);
      if (!isHalf(t->kind))
        continue;
      c->setType(r, m.uniqueType(widened(*t)));
      n->replaceAllUsesOfWith(r, f->createConvertTo(name + ".round" + std::to_string(r), t,
                                                    c->getNthResult(r)));
    }
    for (unsigned r = 0; r < n->getNumResults(); r++)
      if (!isHalf(n->getType(r)->kind))
        n->replaceAllUsesOfWith(r, c->getNthResult(r));
    f->eraseNode(n);
  }
  return !todo.empty();
}

} // namespace kiln::cpu
