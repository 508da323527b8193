// CPU graph step widen-half-floats (WidenHalfFloats.h).
#include "WidenHalfFloats.h"

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
  // ConvertTo is the widening itself; Save writes its operand's type.
  if (!hasHalfFloats(n) || isa<ConvertToNode>(&n) || isa<SaveNode>(&n) ||
      isa<Placeholder>(&n) || isa<Constant>(&n))
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
  for (Node *n : todo) {
    const std::string name = n->getName();
    Node *c = n->clone();
    c->setName(name + ".f32");
    f->addNode(c);
    for (unsigned i = 0; i < n->getNumInputs(); i++) {
      NodeValue in = n->getNthInput(i);
      if (isHalf(in.getElementType()))
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
