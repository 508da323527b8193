#include "kiln/Graph/Graph.h"

#include <algorithm>
#include <fstream>
#include <unordered_set>

#include <glog/logging.h>

namespace kiln {

// ------------------------------------------------------------------ Function

Function::~Function() {
  // Drop operand links first so storage user lists never point at deleted nodes.
  for (auto &n : nodes_)
    n->dropInputs();
  nodes_.clear();
  pos_.clear();
}

Node *Function::getNodeByName(const std::string &name) const {
  auto it = byName_.find(name);
  return it == byName_.end() ? nullptr : it->second;
}

std::string Function::uniqueNodeName(const std::string &base) {
  std::string b = base.empty() ? "node" : base;
  if (!byName_.count(b))
    return b;
  for (unsigned i = 1;; i++) {
    std::string c = b + "__" + std::to_string(i);
    if (!byName_.count(c))
      return c;
  }
}

void Function::addNodeImpl(Node *n) {
  n->setName(uniqueNodeName(n->getName()));
  n->setParent(this);
  byName_[n->getName()] = n;
  nodes_.emplace_back(n);
  pos_[n] = std::prev(nodes_.end());
}

void Function::eraseAt(std::list<std::unique_ptr<Node>>::iterator it) {
  Node *n = it->get();
  byName_.erase(n->getName());
  pos_.erase(n);
  n->dropInputs();
  nodes_.erase(it);
}

void Function::eraseNode(Node *n) {
  CHECK(!n->hasUsers()) << "erasing node '" << n->getName() << "' that still has users";
  auto p = pos_.find(n);
  CHECK(p != pos_.end()) << "node '" << n->getName() << "' is not in this function";
  eraseAt(p->second);
}

size_t Function::eraseDeadNodes() {
  // A node is dead when nothing uses it and it is not a Save. Erasing one can only make
  // its operands dead, so a worklist seeded with one sweep finds every dead node.
  // The survivors, their order and the count are those of repeated whole-list sweeps.
  auto isDead = [](const Node *n) { return !n->hasUsers() && n->getKind() != NodeKind::Save; };
  std::vector<Node *> work;
  for (const auto &p : nodes_)
    if (isDead(p.get()))
      work.push_back(p.get());
  size_t erased = 0;
  while (!work.empty()) {
    Node *n = work.back();
    work.pop_back();
    auto p = pos_.find(n);
    if (p == pos_.end() || !isDead(n))
      continue; // already erased (queued twice), or used again
    std::vector<Node *> operands;
    for (unsigned i = 0; i < n->getNumInputs(); i++) {
      Node *op = n->getNthInput(i).getNode();
      if (op && op != n && op->getParent() == this)
        operands.push_back(op);
    }
    eraseAt(p->second);
    erased++;
    for (Node *op : operands)
      if (pos_.count(op) && isDead(op))
        work.push_back(op);
  }
  return erased;
}

Function *Function::clone(const std::string &newName) const {
  Function *f = parent_->createFunction(newName);
  std::unordered_map<const Node *, Node *> map;
  // Nodes are kept in an order where operands precede users (builders append), but a pass
  // may have inserted out of order: clone first, then remap operands.
  for (const auto &n : nodes_) {
    Node *c = n->clone();
    map[n.get()] = c;
    f->nodes_.emplace_back(c);
    f->pos_[c] = std::prev(f->nodes_.end());
    c->setParent(f);
    f->byName_[c->getName()] = c;
  }
  for (const auto &p : f->nodes_) {
    Node *c = p.get();
    for (unsigned i = 0; i < c->getNumInputs(); i++) {
      NodeValue v = c->getNthInput(i);
      auto it = map.find(v.node);
      if (it != map.end())
        c->setNthInput(i, NodeValue(it->second, v.resNo));
    }
  }
  f->recordedErrors_ = recordedErrors_;
  return f;
}

std::vector<SaveNode *> Function::getSaves() const {
  std::vector<SaveNode *> r;
  for (const auto &n : nodes_)
    if (auto *s = dyn_cast<SaveNode>(n.get()))
      r.push_back(s);
  return r;
}

void Function::recordError(Error e) { recordedErrors_.push_back(e.message()); }

dim_t Function::normalizeAxis(Node *n, const char *attr, int64_t axis, int64_t rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) {
    recordError(makeError(ErrorCode::InvalidArgument, n->getKindName(), " '", n->getName(),
                          "': attribute ", attr, " = ", axis, " is out of range for rank ",
                          rank));
    return dim_t(rank); // out of range: the rule rejects it too
  }
  return dim_t(a);
}

void Function::finishNode(Node *n, bool explicitTypes) {
  for (unsigned i = 0; i < n->getNumInputs(); i++) {
    if (!n->getNthInput(i).node) {
      recordError(makeError(ErrorCode::InvalidGraph, n->describe(), ": operand ",
                            n->getInputName(i), " is missing"));
      // Give results some type so later builders can proceed.
      for (unsigned r = 0; r < n->getNumResults(); r++)
        if (!n->getType(r))
          n->setType(r, parent_->uniqueType(ElemKind::Float, {}));
      return;
    }
  }
  Expected<std::vector<Type>> types = n->computeResultTypes();
  if (!types) {
    recordError(types.takeError().addContext(n->describe()));
    for (unsigned r = 0; r < n->getNumResults(); r++)
      if (!n->getType(r))
        n->setType(r, n->getNumInputs() ? n->getNthInput(0).getType()
                                         : parent_->uniqueType(ElemKind::Float, {}));
    return;
  }
  for (unsigned r = 0; r < n->getNumResults() && r < types->size(); r++) {
    const Type &t = (*types)[r];
    if (!explicitTypes || !n->getType(r)) {
      n->setType(r, parent_->uniqueType(t));
      continue;
    }
    // An explicit type must agree with the rule on kind and shape; quantization parameters
    // are the caller's choice.
    if (!n->getType(r)->sameShapeAndKind(t))
      recordError(makeError(ErrorCode::InvalidArgument, n->describe(), ": result type ",
                            n->getType(r)->toString(), " does not match the expected ",
                            t.toString()));
  }
}

// ------------------------------------------------------------------ Module

Module::~Module() {
  functions_.clear(); // drops uses of storage first
}

Function *Module::createFunction(const std::string &name) {
  std::string n = name;
  for (unsigned i = 1; getFunction(n); i++)
    n = name + "__" + std::to_string(i);
  functions_.push_back(std::make_unique<Function>(this, n));
  return functions_.back().get();
}

Function *Module::getFunction(const std::string &name) const {
  for (const auto &f : functions_)
    if (f->getName() == name)
      return f.get();
  return nullptr;
}

void Module::eraseFunction(Function *f) {
  auto it = std::find_if(functions_.begin(), functions_.end(),
                         [&](const std::unique_ptr<Function> &p) { return p.get() == f; });
  if (it != functions_.end())
    functions_.erase(it);
}

TypeRef Module::uniqueType(const Type &t) {
  auto it = types_.find(t);
  if (it != types_.end())
    return it->second.get();
  auto p = std::make_unique<Type>(t);
  TypeRef r = p.get();
  types_.emplace(t, std::move(p));
  return r;
}

std::string Module::uniqueStorageName(const std::string &base) {
  std::string b = base.empty() ? "storage" : base;
  std::string c = b;
  for (unsigned i = 1; storageNames_.count(c); i++)
    c = b + "__" + std::to_string(i);
  storageNames_.insert(c);
  return c;
}

Placeholder *Module::createPlaceholder(TypeRef ty, const std::string &name) {
  placeholders_.push_back(std::make_unique<Placeholder>(uniqueStorageName(name), ty));
  return placeholders_.back().get();
}

Placeholder *Module::createPlaceholder(ElemKind k, const Dims &dims, const std::string &name) {
  return createPlaceholder(uniqueType(k, dims), name);
}

Constant *Module::createConstant(TypeRef ty, const std::string &name) {
  return createConstant(name, Tensor(*ty));
}

Constant *Module::createConstant(ElemKind k, const Dims &dims, const std::string &name) {
  return createConstant(uniqueType(k, dims), name);
}

Constant *Module::createConstant(const std::string &name, Tensor payload) {
  TypeRef ty = uniqueType(payload.getType());
  constants_.push_back(std::make_unique<Constant>(uniqueStorageName(name), ty, std::move(payload)));
  return constants_.back().get();
}

Placeholder *Module::getPlaceholderByName(const std::string &name) const {
  for (const auto &p : placeholders_)
    if (p->getName() == name)
      return p.get();
  return nullptr;
}

Constant *Module::getConstantByName(const std::string &name) const {
  for (const auto &c : constants_)
    if (c->getName() == name)
      return c.get();
  return nullptr;
}

void Module::eraseConstant(Constant *c) {
  CHECK(!c->hasUsers()) << "erasing constant '" << c->getName() << "' that still has users";
  storageNames_.erase(c->getName());
  auto it = std::find_if(constants_.begin(), constants_.end(),
                         [&](const std::unique_ptr<Constant> &p) { return p.get() == c; });
  if (it != constants_.end())
    constants_.erase(it);
}

size_t Module::eraseUnusedConstants() {
  // One stable compaction (erasing from the middle of the vector one at a time is
  // quadratic when most constants go).
  size_t kept = 0;
  for (size_t i = 0; i < constants_.size(); i++) {
    if (constants_[i]->hasUsers()) {
      if (kept != i)
        constants_[kept] = std::move(constants_[i]);
      kept++;
      continue;
    }
    storageNames_.erase(constants_[i]->getName());
    constants_[i].reset();
  }
  size_t n = constants_.size() - kept;
  constants_.resize(kept);
  return n;
}

} // namespace kiln
