#include "PassUtils.h"

#include <cstring>
#include <unordered_map>

#include <glog/logging.h>

namespace kiln::passutil {

std::vector<Node *> topoOrder(const Function &f) {
  std::vector<Node *> order;
  order.reserve(f.numNodes());
  std::unordered_set<const Node *> done;
  std::unordered_set<const Node *> mine;
  for (const auto &p : f.getNodes())
    mine.insert(p.get());
  std::vector<std::pair<Node *, unsigned>> stack;
  for (const auto &p : f.getNodes()) {
    if (done.count(p.get()))
      continue;
    stack.push_back({p.get(), 0});
    done.insert(p.get());
    while (!stack.empty()) {
      auto &[n, i] = stack.back();
      if (i < n->getNumInputs()) {
        Node *in = n->getNthInput(i++).node;
        if (in && mine.count(in) && !done.count(in)) {
          done.insert(in);
          stack.push_back({in, 0});
        }
        continue;
      }
      order.push_back(n);
      stack.pop_back();
    }
  }
  return order;
}

size_t Sweeper::sweep(Function *f) {
  std::unordered_set<Node *> mine;
  for (const auto &p : f->getNodes())
    mine.insert(p.get());
  size_t erased = 0;
  while (!queue_.empty()) {
    Node *n = queue_.back();
    queue_.pop_back();
    if (!mine.count(n) || isLive(n))
      continue;
    std::vector<Node *> operands;
    for (unsigned i = 0; i < n->getNumInputs(); i++)
      if (Node *in = n->getNthInput(i).node)
        operands.push_back(in);
    mine.erase(n);
    f->eraseNode(n);
    erased++;
    for (Node *in : operands)
      queue_.push_back(in);
  }
  return erased;
}

void replaceWith(Node *old, NodeValue v, Sweeper &sweeper) {
  old->replaceAllUsesOfWith(0, v);
  sweeper.add(old);
}

bool getUniformValue(NodeValue v, double &out, size_t maxScan) {
  if (!v.node)
    return false;
  if (v.getType()->isQuantizedType())
    return false;
  if (auto *s = dyn_cast<SplatNode>(v.node)) {
    out = s->getValue();
    return true;
  }
  if (auto *b = dyn_cast<BroadcastNode>(v.node))
    return getUniformValue(b->getInput(), out, maxScan);
  if (auto *c = dyn_cast<Constant>(v.node)) {
    const Tensor &t = c->getPayload();
    size_t n = t.size();
    if (n == 0 || n > maxScan)
      return false;
    double first = t.getAsDouble(0);
    if (t.getElementType() == ElemKind::Float) {
      auto h = t.getHandle<float>();
      float f0 = h.raw(0);
      for (size_t i = 1; i < n; i++)
        if (std::memcmp(&h.raw(i), &f0, sizeof(float)) != 0)
          return false;
    } else {
      for (size_t i = 1; i < n; i++)
        if (!(t.getAsDouble(i) == first))
          return false;
    }
    out = first;
    return true;
  }
  return false;
}

bool isUniformValue(NodeValue v, double value) {
  double x;
  return getUniformValue(v, x) && x == value;
}

SplatNode *makeSplat(Function *f, const std::string &name, const Type &ty, double value) {
  return f->createSplat(name, f->getParent()->uniqueType(ty), float(value));
}

TypeRef withDims(Function *f, const Type &like, const Dims &dims) {
  return f->getParent()->uniqueType(Type::withDims(like, dims));
}

Node *cloneWith(Function *f, const Node *n, const std::vector<NodeValue> &inputs,
                const std::vector<TypeRef> &resultTypes) {
  Node *c = n->clone();
  CHECK_EQ(inputs.size(), c->getNumInputs()) << "cloneWith: operand count of " << n->describe();
  for (unsigned i = 0; i < inputs.size(); i++)
    c->setNthInput(i, inputs[i]);
  for (unsigned r = 0; r < resultTypes.size() && r < c->getNumResults(); r++)
    c->setType(r, resultTypes[r]);
  return f->addNode(c);
}

std::vector<dim_t> inversePermutation(const std::vector<dim_t> &shuffle) {
  std::vector<dim_t> inv(shuffle.size());
  for (size_t i = 0; i < shuffle.size(); i++)
    inv[shuffle[i]] = i;
  return inv;
}

bool isIdentityPermutation(const std::vector<dim_t> &shuffle) {
  for (size_t i = 0; i < shuffle.size(); i++)
    if (shuffle[i] != i)
      return false;
  return true;
}

Dims permuteDims(const Dims &dims, const std::vector<dim_t> &shuffle) {
  Dims r;
  for (dim_t s : shuffle)
    r.push_back(dims[s]);
  return r;
}

Tensor transposeTensor(const Tensor &t, const std::vector<dim_t> &shuffle) {
  const Type &ty = t.getType();
  Type outTy = Type::withDims(ty, permuteDims(ty.dims, shuffle));
  Tensor out(outTy);
  size_t rank = shuffle.size();
  size_t es = ty.elemBytes();
  Dims inStrides = ty.strides();
  // Walk the output in row-major order; the input offset advances by the stride of the
  // input dimension each output dimension comes from.
  std::vector<dim_t> idx(rank, 0);
  size_t n = outTy.numElements();
  const char *src = t.getUnsafePtr();
  char *dst = out.getUnsafePtr();
  for (size_t i = 0; i < n; i++) {
    size_t off = 0;
    for (size_t d = 0; d < rank; d++)
      off += idx[d] * inStrides[shuffle[d]];
    std::memcpy(dst + i * es, src + off * es, es);
    for (size_t d = rank; d-- > 0;) {
      if (++idx[d] < outTy.dims[d])
        break;
      idx[d] = 0;
    }
  }
  return out;
}

Constant *makeConstant(Function *f, const std::string &name, Tensor payload) {
  return f->getParent()->createConstant(name, std::move(payload));
}

bool isOnlyUse(const Constant *c, const Node *user) {
  const auto &users = c->getUsers();
  return users.size() == 1 && users[0].user == user;
}

} // namespace kiln::passutil
