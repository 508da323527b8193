/// \file
/// Module and Function: the containers of the graph IR.
///
/// A Module owns Functions, Placeholders (inputs/outputs bound at run time) and Constants
/// (weights), and uniques Types. A Function is a DAG of operator nodes whose leaves are the
/// module's storage; Save nodes write results into Placeholders.
///
/// Builders never abort on bad input: when an operator's rule rejects its operands, the
/// node is still created (with a best-effort type) and the error is recorded; `verify()`
/// (and so every compile) reports it, naming the node, the operator and the shapes.
#ifndef KILN_GRAPH_GRAPH_H
#define KILN_GRAPH_GRAPH_H

#include "kiln/Graph/Nodes.h"

#include <list>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace kiln {

/// A graph of operator nodes over its Module's storage (see the file comment); built with
/// the create* builders, verified by verify(), compiled by ExecutionEngine or HostManager.
class Function {
public:
  Function(Module *parent, std::string name) : parent_(parent), name_(std::move(name)) {}
  ~Function();
  Function(const Function &) = delete;
  Function &operator=(const Function &) = delete;

  const std::string &getName() const { return name_; }
  Module *getParent() const { return parent_; }

  /// Nodes in creation order (a valid topological order only after `verify()` succeeds
  /// for graphs built with the API; use a scheduler for anything else).
  const std::list<std::unique_ptr<Node>> &getNodes() const { return nodes_; }
  size_t numNodes() const { return nodes_.size(); }
  /// The node named \p name, or null.
  Node *getNodeByName(const std::string &name) const;
  /// Takes ownership of \p n, gives it a unique name, and returns it.
  template <typename N> N *addNode(N *n) {
    addNodeImpl(n);
    return n;
  }
  /// Removes and deletes \p n, which must have no users.
  void eraseNode(Node *n);
  /// Removes nodes whose results are unused (except Saves); returns how many.
  size_t eraseDeadNodes();

  /// A deep copy of this function (nodes cloned, storage shared) named \p newName.
  Function *clone(const std::string &newName) const;

  /// Checks every node: operand types against the operator's rule, attributes, and
  /// recorded builder errors. The message names the node, the operator and the shapes.
  Error verify() const;

  /// Text form of this function (see Printer).
  std::string toString() const;
  /// Graphviz DOT of this function.
  std::string toDot() const;
  /// Writes toDot() to \p path.
  Error dumpDot(const std::string &path) const;

  /// The Save nodes of this function, in order.
  std::vector<SaveNode *> getSaves() const;

  // ---- Generated builders (one per operator of the table). ----
#include "kiln/Graph/AutoGenBuilders.h"

  // ---- Convenience builders (GraphBuilders.cpp). ----

  /// Saves \p v into a new placeholder named \p name (its type is v's type).
  SaveNode *createSave(const std::string &name, NodeValue v);
  /// A FullyConnected layer with new random-initialised weights [in, outDepth] and zero
  /// bias [outDepth]; \p input is flattened to 2-D first when its rank is above 2.
  FullyConnectedNode *createFullyConnected(const std::string &name, NodeValue input,
                                           dim_t outDepth, uint64_t seed = 0);
  /// A Convolution with new random weights [outChannels, C/group, k, k] and zero bias.
  ConvolutionNode *createConv(const std::string &name, NodeValue input, dim_t outChannels,
                              dim_t kernel, dim_t stride = 1, dim_t pad = 0, dim_t group = 1,
                              dim_t dilation = 1, uint64_t seed = 0);
  /// Adaptive average pooling to 1x1.
  AdaptiveAvgPoolNode *createGlobalAvgPool(const std::string &name, NodeValue input);
  /// Reshape to [d0, d1*d2*...] splitting at \p axis (ONNX Flatten).
  ReshapeNode *createFlatten(const std::string &name, NodeValue input, int64_t axis = 1);
  /// Broadcasts \p v to \p dims (numpy rules, right-aligned); returns v unchanged when its
  /// dims already equal \p dims.
  NodeValue createBroadcastTo(const std::string &name, NodeValue v, const Dims &dims);

  /// Records a builder error (kept until verify()).
  void recordError(Error e);
  /// True when some builder recorded an error.
  bool hasRecordedErrors() const { return !recordedErrors_.empty(); }

private:
  void addNodeImpl(Node *n);
  std::string uniqueNodeName(const std::string &base);
  /// Sets result types of a freshly built node from its rule (or checks explicit types).
  void finishNode(Node *n, bool explicitTypes);
  /// Normalises a possibly negative axis against \p rank, recording an error when it is
  /// out of range.
  dim_t normalizeAxis(Node *n, const char *attr, int64_t axis, int64_t rank);

  Module *parent_;
  std::string name_;
  /// Unlinks \p n (at \p it in nodes_) from the function and deletes it.
  void eraseAt(std::list<std::unique_ptr<Node>>::iterator it);

  std::list<std::unique_ptr<Node>> nodes_;
  /// Where each node lives in nodes_, so that erasing is O(1).
  std::unordered_map<const Node *, std::list<std::unique_ptr<Node>>::iterator> pos_;
  std::unordered_map<std::string, Node *> byName_;
  std::vector<std::string> recordedErrors_;
};

/// Owns Functions, Placeholders and Constants, and uniques Types (see the file comment).
class Module {
public:
  Module() = default;
  ~Module();
  Module(const Module &) = delete;
  Module &operator=(const Module &) = delete;

  // Functions.
  Function *createFunction(const std::string &name);
  /// The function named \p name, or null.
  Function *getFunction(const std::string &name) const;
  const std::vector<std::unique_ptr<Function>> &getFunctions() const { return functions_; }
  void eraseFunction(Function *f);

  // Types.
  TypeRef uniqueType(const Type &t);
  TypeRef uniqueType(ElemKind k, const Dims &dims) { return uniqueType(Type(k, dims)); }
  TypeRef uniqueType(ElemKind k, const Dims &dims, float scale, int32_t offset) {
    return uniqueType(Type(k, dims, scale, offset));
  }

  // Storage.
  Placeholder *createPlaceholder(ElemKind k, const Dims &dims, const std::string &name);
  Placeholder *createPlaceholder(TypeRef ty, const std::string &name);
  /// A zero-filled constant of the given type.
  Constant *createConstant(TypeRef ty, const std::string &name);
  Constant *createConstant(ElemKind k, const Dims &dims, const std::string &name);
  /// A constant holding \p payload.
  Constant *createConstant(const std::string &name, Tensor payload);
  const std::vector<std::unique_ptr<Placeholder>> &getPlaceholders() const { return placeholders_; }
  const std::vector<std::unique_ptr<Constant>> &getConstants() const { return constants_; }
  Placeholder *getPlaceholderByName(const std::string &name) const;
  Constant *getConstantByName(const std::string &name) const;
  /// Deletes constants no function uses; returns how many.
  size_t eraseUnusedConstants();
  void eraseConstant(Constant *c);

  /// Text form of the whole module: storage, then each function.
  std::string toString() const;

private:
  std::string uniqueStorageName(const std::string &base);

  std::vector<std::unique_ptr<Function>> functions_;
  std::vector<std::unique_ptr<Placeholder>> placeholders_;
  std::vector<std::unique_ptr<Constant>> constants_;
  std::unordered_set<std::string> storageNames_;
  struct TypeHash {
    size_t operator()(const Type &t) const { return t.hash(); }
  };
  std::unordered_map<Type, std::unique_ptr<Type>, TypeHash> types_;
};

} // namespace kiln

#endif // KILN_GRAPH_GRAPH_H
