#include "kiln/Graph/Graph.h"

#include <algorithm>
#include <functional>
#include <sstream>

#include <glog/logging.h>

namespace kiln {

TypeRef NodeValue::getType() const { return node->getType(resNo); }

Node::~Node() { dropInputs(); }

void Node::addInput(NodeValue v) {
  unsigned idx = unsigned(inputs_.size());
  inputs_.push_back(v);
  if (v.node)
    v.node->users_.push_back({this, idx});
}

void Node::dropInputs() {
  for (unsigned i = 0; i < inputs_.size(); i++) {
    Node *src = inputs_[i].node;
    if (!src)
      continue;
    auto &u = src->users_;
    auto it = std::find_if(u.begin(), u.end(),
                           [&](const NodeUse &x) { return x.user == this && x.idx == i; });
    if (it != u.end())
      u.erase(it);
  }
  inputs_.clear();
}

void Node::setNthInput(unsigned i, NodeValue v) {
  CHECK_LT(i, inputs_.size());
  Node *old = inputs_[i].node;
  if (old) {
    auto &u = old->users_;
    auto it = std::find_if(u.begin(), u.end(),
                           [&](const NodeUse &x) { return x.user == this && x.idx == i; });
    if (it != u.end())
      u.erase(it);
  }
  inputs_[i] = v;
  if (v.node)
    v.node->users_.push_back({this, i});
}

unsigned Node::getNumUsesOf(unsigned resNo) const {
  unsigned n = 0;
  for (const NodeUse &u : users_)
    if (u.user->inputs_[u.idx].resNo == resNo)
      n++;
  return n;
}

void Node::replaceAllUsesOfWith(unsigned resNo, NodeValue v) {
  std::vector<NodeUse> uses;
  for (const NodeUse &u : users_)
    if (u.user->inputs_[u.idx].resNo == resNo)
      uses.push_back(u);
  for (const NodeUse &u : uses)
    u.user->setNthInput(u.idx, v);
}

namespace {

/// Hashes and compares attributes through the visitor interface.
class AttrHasher : public AttrVisitor {
public:
  size_t h = 0;
  void mix(size_t v) { h = h * 1000003u ^ v; }
  void visit(const char *, dim_t &v) override { mix(std::hash<dim_t>()(v)); }
  void visit(const char *, int64_t &v) override { mix(std::hash<int64_t>()(v)); }
  void visit(const char *, float &v) override { mix(std::hash<float>()(v)); }
  void visit(const char *, bool &v) override { mix(v ? 7 : 3); }
  void visit(const char *, std::vector<dim_t> &v) override {
    for (dim_t x : v)
      mix(std::hash<dim_t>()(x));
    mix(v.size());
  }
  void visit(const char *, std::vector<int64_t> &v) override {
    for (int64_t x : v)
      mix(std::hash<int64_t>()(x));
    mix(v.size());
  }
  void visit(const char *, std::string &v) override { mix(std::hash<std::string>()(v)); }
};

/// Collects attributes as strings, for equality.
class AttrCollector : public AttrVisitor {
public:
  std::vector<std::string> values;
  template <typename T> void add(const T &v) {
    std::ostringstream os;
    os.precision(17);
    os << v;
    values.push_back(os.str());
  }
  void visit(const char *, dim_t &v) override { add(v); }
  void visit(const char *, int64_t &v) override { add(v); }
  void visit(const char *, float &v) override { add(v); }
  void visit(const char *, bool &v) override { add(v); }
  void visit(const char *, std::vector<dim_t> &v) override {
    std::string s;
    for (dim_t x : v)
      s += std::to_string(x) + ",";
    values.push_back(s);
  }
  void visit(const char *, std::vector<int64_t> &v) override {
    std::string s;
    for (int64_t x : v)
      s += std::to_string(x) + ",";
    values.push_back(s);
  }
  void visit(const char *, std::string &v) override { values.push_back(v); }
};

} // namespace

size_t Node::hash() const {
  AttrHasher h;
  h.mix(size_t(kind_));
  for (const NodeValue &v : inputs_)
    h.mix(std::hash<const void *>()(v.node) * 31 + v.resNo);
  for (TypeRef t : resultTypes_)
    h.mix(std::hash<const void *>()(t));
  const_cast<Node *>(this)->visitAttrs(h);
  return h.h;
}

bool Node::isEqual(const Node &other) const {
  if (kind_ != other.kind_ || inputs_ != other.inputs_ || resultTypes_ != other.resultTypes_)
    return false;
  if (isa<Storage>(this))
    return this == &other;
  AttrCollector a, b;
  const_cast<Node *>(this)->visitAttrs(a);
  const_cast<Node &>(other).visitAttrs(b);
  return a.values == b.values;
}

std::string Node::describe() const {
  std::ostringstream os;
  os << "node '" << name_ << "' (" << getKindName() << ")";
  if (!inputs_.empty()) {
    os << " with operands ";
    for (unsigned i = 0; i < inputs_.size(); i++) {
      os << (i ? ", " : "") << getInputName(i) << ": ";
      if (inputs_[i].node && inputs_[i].resNo < inputs_[i].node->getNumResults() &&
          inputs_[i].getType())
        os << inputs_[i].getType()->toString();
      else
        os << "<missing>";
    }
  }
  return os.str();
}

Node *Placeholder::clone() const { return new Placeholder(getName(), getType()); }

Node *Constant::clone() const { return new Constant(getName(), getType(), payload_.clone()); }

} // namespace kiln
