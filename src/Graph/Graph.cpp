#include "kiln/Graph/Graph.h"

#include <algorithm>
#include <fstream>
#include <unordered_set>

namespace kiln {

// ------------------------------------------------------------------ Function

Function::~Function() {
  // Drop operand links first so storage user lists never point at deleted nodes.
  for (auto &n : nodes_)
    n->dropInputs();
  nodes_.clear();
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
}

void Function::eraseNode(Node *n) {
  CHECK(!n->hasUsers()) << "erasing node '" << n->getName() << "' that still has users";
  auto it = std::find_if(nodes_.begin(), nodes_.end(),
                         [&](const std::unique_ptr<Node> &p) { return p.get() == n; });
  CHECK(it != nodes_.end()) << "node '" << n->getName() << "' is not in this function";
  byName_.erase(n->getName());
  n->dropInputs();
  nodes_.erase(it);
}

size_t Function::eraseDeadNodes() {
  size_t erased = 0;
  bool changed = true;
  while (changed) {
    changed = false;
    for (auto it = nodes_.begin(); it != nodes_.end();) {
      Node *n = it->get();
      if (n->hasUsers() || n->getKind() == NodeKind::Save) {
        ++it;
        continue;
      }
      byName_.erase(n->getName());
      n->dropInputs();
      it = nodes_.erase(it);
      erased++;
      changed = true;
    }
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
  size_t n = 0;
  for (auto it = constants_.begin(); it != constants_.end();) {
    if ((*it)->hasUsers()) {
      ++it;
      continue;
    }
    storageNames_.erase((*it)->getName());
    it = constants_.erase(it);
    n++;
  }
  return n;
}

} // namespace kiln
