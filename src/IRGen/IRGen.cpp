// IRGen: a verified graph Function -> IRFunction. Each node becomes one instruction writing
// freshly allocated activations (the default mapping comes from the operator table);
// reshapes become views; saves become copies into the placeholder's buffer. Activations
// are deallocated right after their last use, so the IR carries exact lifetimes for the
// memory planner.

#include "kiln/IR/IR.h"

#include <unordered_map>
#include <unordered_set>

#include <glog/logging.h>

namespace kiln {

namespace {

struct NodeValueHash {
  size_t operator()(const NodeValue &v) const {
    return std::hash<const void *>()(v.node) * 31 + v.resNo;
  }
};

class IRGenerator {
public:
  explicit IRGenerator(IRFunction *F) : F_(F) {}

  Error run(const std::vector<Node *> &order) {
    for (Node *n : order)
      if (Error e = visit(n))
        return e;
    insertDeallocs();
    return Error::success();
  }

private:
  Value *valueOf(NodeValue v) {
    if (auto *s = dyn_cast<Storage>(v.node)) {
      if (WeightVar *w = F_->getWeightForStorage(s))
        return w;
      auto m = isa<Constant>(s) ? WeightVar::Mutability::Constant : WeightVar::Mutability::Mutable;
      return F_->createWeightVar(s->getName(), s->getType(), m, s);
    }
    auto it = values_.find(v);
    CHECK(it != values_.end()) << "IRGen: no value for an operand of " << v.node->describe();
    return it->second;
  }

  std::vector<Value *> valuesOf(const std::vector<NodeValue> &vs) {
    std::vector<Value *> r;
    for (const NodeValue &v : vs)
      r.push_back(valueOf(v));
    return r;
  }

  Value *allocResult(Node *n, unsigned resNo) {
    std::string name = n->getName();
    if (n->getNumResults() > 1)
      name += "." + n->getResultName(resNo);
    auto *a = F_->push_back(new AllocActivationInst(name + ".res", n->getType(resNo)));
    values_[NodeValue(n, resNo)] = a;
    return a;
  }

  void emit(Instruction *I) { F_->push_back(I); }

  void emitCustom(Node *node) {
    switch (node->getKind()) {
    case NodeKind::Save: {
      auto *s = cast<SaveNode>(node);
      Value *dst = valueOf(s->getOutput());
      emit(new CopyInst(s->getName(), nullptr, dst, valueOf(s->getInput())));
      return;
    }
    case NodeKind::Reshape: {
      auto *r = cast<ReshapeNode>(node);
      Value *src = valueOf(r->getInput());
      std::vector<dim_t> zeros(src->getType()->rank(), 0);
      auto *tv = F_->push_back(new TensorViewInst(r->getName() + ".view", r->getType(0), src, zeros));
      values_[NodeValue(r, 0)] = tv;
      return;
    }
    default:
      LOG(FATAL) << "IRGen: no custom lowering for " << node->describe();
    }
  }

  Error visit(Node *node) {
    switch (node->getKind()) {
    case NodeKind::Placeholder:
    case NodeKind::Constant:
      break;
#include "src/ClassGen/AutoGenIRGen.inc"
    }
    return Error::success();
  }

  /// Inserts a DeallocActivation after the last instruction that uses each activation
  /// (directly or through views).
  void insertDeallocs() {
    auto &instrs = F_->getInstrs();
    std::unordered_map<const Value *, IRFunction::InstrList::iterator> lastUse;
    std::vector<const Value *> allocs;
    for (auto it = instrs.begin(); it != instrs.end(); ++it) {
      Instruction *I = it->get();
      if (I->getKind() == InstrKind::AllocActivation) {
        allocs.push_back(I);
        lastUse[I] = it;
        continue;
      }
      for (const auto &op : I->getOperands()) {
        const Value *v = op.first;
        while (auto *tv = dyn_cast<TensorViewInst>(v))
          v = tv->getSrc();
        if (isa<AllocActivationInst>(v))
          lastUse[v] = it;
      }
      if (auto *tv = dyn_cast<TensorViewInst>(I)) {
        const Value *v = tv;
        while (auto *t = dyn_cast<TensorViewInst>(v))
          v = t->getSrc();
        if (isa<AllocActivationInst>(v))
          lastUse[v] = it;
      }
    }
    for (const Value *a : allocs) {
      auto where = std::next(lastUse[a]);
      auto *alloc = const_cast<Value *>(a);
      F_->insert(where, new DeallocActivationInst("dealloc." + a->getName(), nullptr, alloc));
    }
  }

  IRFunction *F_;
  std::unordered_map<NodeValue, Value *, NodeValueHash> values_;
};

/// Checks that \p order lists every node reaching a Save once, operands first.
Error checkOrder(Function *f, const std::vector<Node *> &order) {
  KILN_ASSIGN_OR_RETURN(std::vector<Node *> live, scheduleTopologically(f));
  std::unordered_set<Node *> needed(live.begin(), live.end()), done;
  for (Node *n : order) {
    if (isa<Storage>(n))
      continue;
    if (!needed.count(n) || done.count(n))
      return makeError(ErrorCode::InvalidArgument, "IRGen: the node order lists ", n->describe(),
                       needed.count(n) ? " twice" : " which is not live in '" + f->getName() + "'");
    for (unsigned i = 0; i < n->getNumInputs(); i++) {
      Node *in = n->getNthInput(i).node;
      if (!isa<Storage>(in) && !done.count(in))
        return makeError(ErrorCode::InvalidArgument, "IRGen: the node order lists ", n->describe(),
                         " before its operand '", in->getName(), "'");
    }
    done.insert(n);
  }
  if (done.size() != needed.size())
    return makeError(ErrorCode::InvalidArgument, "IRGen: the node order misses ",
                     needed.size() - done.size(), " live nodes of '", f->getName(), "'");
  return Error::success();
}

} // namespace

Expected<std::vector<Node *>> scheduleTopologically(Function *f) {
  std::vector<Node *> order;
  std::unordered_set<Node *> done, onStack;
  std::vector<std::pair<Node *, unsigned>> stack;
  for (SaveNode *s : f->getSaves()) {
    if (done.count(s))
      continue;
    stack.push_back({s, 0});
    onStack.insert(s);
    while (!stack.empty()) {
      auto &[n, i] = stack.back();
      if (i < n->getNumInputs()) {
        Node *in = n->getNthInput(i++).node;
        if (isa<Storage>(in) || done.count(in))
          continue;
        if (onStack.count(in))
          return makeError(ErrorCode::InvalidGraph, "IRGen: cycle through ", in->describe());
        onStack.insert(in);
        stack.push_back({in, 0});
        continue;
      }
      onStack.erase(n);
      done.insert(n);
      order.push_back(n);
      stack.pop_back();
    }
  }
  return order;
}

namespace {

Expected<std::unique_ptr<IRFunction>> generateInOrder(Function *f, const std::vector<Node *> &order) {
  auto F = std::make_unique<IRFunction>(f);
  IRGenerator gen(F.get());
  KILN_RETURN_IF_ERR(gen.run(order));
  KILN_RETURN_IF_ERR(F->verify());
  return F;
}

} // namespace

Expected<std::unique_ptr<IRFunction>> generateIR(Function *f) {
  KILN_RETURN_IF_ERR(f->verify());
  KILN_ASSIGN_OR_RETURN(std::vector<Node *> order, scheduleTopologically(f));
  return generateInOrder(f, order);
}

Expected<std::unique_ptr<IRFunction>> generateIR(Function *f, const std::vector<Node *> &order) {
  KILN_RETURN_IF_ERR(f->verify());
  KILN_RETURN_IF_ERR(checkOrder(f, order));
  return generateInOrder(f, order);
}

} // namespace kiln
