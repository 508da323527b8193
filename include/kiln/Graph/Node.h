/// \file
/// The node base class of the graph IR. A Node has typed results; a NodeValue names one
/// result of one node. Every node kind is declared once, in the operator table
/// (src/ClassGen/NodeTable.cpp); the per-kind classes, the kind enum and the
/// `Function::create*` builders are generated from it into AutoGenNodes.h.
#ifndef KILN_GRAPH_NODE_H
#define KILN_GRAPH_NODE_H

#include "kiln/Base/Check.h"
#include "kiln/Base/Error.h"
#include "kiln/Base/Type.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

class Node;
class Function;
class Module;
class Tensor;
class Placeholder;

/// Result \p resNo of node \p node. Cheap to copy; compared by identity.
struct NodeValue {
  Node *node = nullptr;
  unsigned resNo = 0;

  NodeValue() = default;
  explicit NodeValue(Node *n, unsigned r = 0) : node(n), resNo(r) {}
  /// For convenience, a node with exactly one result converts implicitly.
  template <typename N, typename = std::enable_if_t<std::is_base_of_v<Node, N>>>
  NodeValue(N *n) : node(n), resNo(0) {}

  TypeRef getType() const;
  const Dims &dims() const { return getType()->dims; }
  ElemKind getElementType() const { return getType()->kind; }
  Node *getNode() const { return node; }
  explicit operator bool() const { return node != nullptr; }
  bool operator==(const NodeValue &o) const { return node == o.node && resNo == o.resNo; }
  bool operator!=(const NodeValue &o) const { return !(*this == o); }
  bool operator<(const NodeValue &o) const {
    return node != o.node ? node < o.node : resNo < o.resNo;
  }
};

/// A use of a value: operand \p idx of node \p user.
struct NodeUse {
  Node *user;
  unsigned idx;
};

/// Visits the attributes of a node in declaration order; used by the printer, the parser,
/// hashing and equality (CSE), and cloning. One overload per attribute C++ type.
class AttrVisitor {
public:
  virtual ~AttrVisitor() = default;
  virtual void visit(const char *name, dim_t &v) = 0;
  virtual void visit(const char *name, int64_t &v) = 0;
  virtual void visit(const char *name, float &v) = 0;
  virtual void visit(const char *name, bool &v) = 0;
  virtual void visit(const char *name, std::vector<dim_t> &v) = 0;
  virtual void visit(const char *name, std::vector<int64_t> &v) = 0;
  virtual void visit(const char *name, std::string &v) = 0;
};

/// The closed set of node kinds: Placeholder and Constant (module-level storage) and every
/// kind of the operator table.
enum class NodeKind : uint16_t {
  Placeholder,
  Constant,
#define DEF_NODE(NAME) NAME,
#include "kiln/Graph/AutoGenNodes.def"
};

/// Name of a kind, as in the text IR ("Convolution").
const char *getNodeKindName(NodeKind k);
/// Parses a kind name; false if unknown.
bool parseNodeKind(const std::string &name, NodeKind &out);
/// A new node of operator kind \p k named \p name, with operands \p ops (not checked
/// against the table) and untyped results, in no function; null for Placeholder and
/// Constant. Lets the text parser build any kind generically.
Node *createNodeOfKind(NodeKind k, const std::string &name, const std::vector<NodeValue> &ops);

/// A node of the graph IR: a kind, a name, operands (NodeValues), typed results and
/// attributes. The per-kind subclasses are generated from the operator table.
class Node {
public:
  Node(NodeKind kind, std::string name) : kind_(kind), name_(std::move(name)) {}
  virtual ~Node();
  Node(const Node &) = delete;
  Node &operator=(const Node &) = delete;

  NodeKind getKind() const { return kind_; }
  const char *getKindName() const { return getNodeKindName(kind_); }
  const std::string &getName() const { return name_; }
  void setName(std::string n) { name_ = std::move(n); }
  /// The function that owns this node; null for Placeholders and Constants.
  Function *getParent() const { return parent_; }
  void setParent(Function *f) { parent_ = f; }

  // Operands.
  unsigned getNumInputs() const { return unsigned(inputs_.size()); }
  NodeValue getNthInput(unsigned i) const { return inputs_[i]; }
  /// Name of operand \p i as declared in the table ("Input", "Filter", "Inputs#2").
  virtual std::string getInputName(unsigned i) const { return "Input" + std::to_string(i); }
  /// Number of operands the table declares by name; a variadic list may follow them.
  virtual unsigned getNumFixedInputs() const { return 0; }
  /// Name of the trailing variadic operand list ("Inputs"), or null when there is none.
  virtual const char *getVariadicInputName() const { return nullptr; }
  /// Replaces operand \p i, keeping user lists current.
  void setNthInput(unsigned i, NodeValue v);

  // Results.
  unsigned getNumResults() const { return unsigned(resultTypes_.size()); }
  TypeRef getType(unsigned resNo = 0) const { return resultTypes_[resNo]; }
  void setType(unsigned resNo, TypeRef t) { resultTypes_[resNo] = t; }
  NodeValue getNthResult(unsigned i) { return NodeValue(this, i); }
  virtual std::string getResultName(unsigned i) const { return "Result" + std::to_string(i); }

  // Users.
  const std::vector<NodeUse> &getUsers() const { return users_; }
  bool hasUsers() const { return !users_.empty(); }
  /// Number of uses of result \p resNo.
  unsigned getNumUsesOf(unsigned resNo) const;
  /// Points every use of result \p resNo of this node at \p v instead.
  void replaceAllUsesOfWith(unsigned resNo, NodeValue v);

  /// True for element-wise nodes whose output element i depends only on input element i.
  virtual bool isDataParallel() const { return false; }
  /// Calls the visitor on each attribute (none for storage).
  virtual void visitAttrs(AttrVisitor &) {}
  /// One-line description of the operator (from the table).
  virtual const char *getDocString() const { return ""; }
  /// A copy with the same operands, attributes and result types, not inserted anywhere.
  virtual Node *clone() const = 0;
  /// The result types this node's operator rule derives from its operands and attributes;
  /// an Error (naming the operand shapes) when the operands are invalid for the operator.
  virtual Expected<std::vector<Type>> computeResultTypes() const = 0;

  /// Hash and equality of kind, operands, attributes and result types (for CSE).
  size_t hash() const;
  bool isEqual(const Node &other) const;

  /// "'name' (Kind) with operands Input: float<1x3>, Filter: float<...>" for messages.
  std::string describe() const;

protected:
  friend class Function;
  friend class Module;
  /// Appends an operand (used by generated constructors).
  void addInput(NodeValue v);
  void addResult(TypeRef t) { resultTypes_.push_back(t); }
  /// Drops all operands (before deletion).
  void dropInputs();

  NodeKind kind_;
  std::string name_;
  Function *parent_ = nullptr;
  std::vector<NodeValue> inputs_;
  std::vector<TypeRef> resultTypes_;
  std::vector<NodeUse> users_;
};

/// LLVM-style kind checks: isa<ConvolutionNode>(n), dyn_cast<...>, cast<...>.
template <typename To, typename From> bool isa(const From *n) {
  return n && To::classof(n);
}
template <typename To, typename From> To *dyn_cast(From *n) {
  return isa<To>(n) ? static_cast<To *>(n) : nullptr;
}
template <typename To, typename From> const To *dyn_cast(const From *n) {
  return isa<To>(n) ? static_cast<const To *>(n) : nullptr;
}
template <typename To, typename From> To *cast(From *n) {
  KILN_CHECK(isa<To>(n)) << "invalid cast";
  return static_cast<To *>(n);
}
template <typename To, typename From> const To *cast(const From *n) {
  KILN_CHECK(isa<To>(n)) << "invalid cast";
  return static_cast<const To *>(n);
}

} // namespace kiln

#endif // KILN_GRAPH_NODE_H
