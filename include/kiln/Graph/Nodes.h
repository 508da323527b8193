/// \file
/// All node classes: module-level storage (Placeholder, Constant) and the generated
/// operator classes of the table.
#ifndef KILN_GRAPH_NODES_H
#define KILN_GRAPH_NODES_H

#include "kiln/Base/Tensor.h"
#include "kiln/Graph/Node.h"

#include <memory>

namespace kiln {

/// Module-level storage: a Placeholder or a Constant. It has one result (its value) and
/// no operands; it is owned by the Module and shared by its Functions.
class Storage : public Node {
public:
  Storage(NodeKind k, std::string name, TypeRef ty) : Node(k, std::move(name)) { addResult(ty); }
  static bool classof(const Node *n) {
    return n->getKind() == NodeKind::Placeholder || n->getKind() == NodeKind::Constant;
  }
  Expected<std::vector<Type>> computeResultTypes() const override {
    return std::vector<Type>{*getType()};
  }
};

/// A named input or output of a network; its tensor is provided at run time in
/// PlaceholderBindings.
class Placeholder : public Storage {
public:
  Placeholder(std::string name, TypeRef ty) : Storage(NodeKind::Placeholder, std::move(name), ty) {}
  static bool classof(const Node *n) { return n->getKind() == NodeKind::Placeholder; }
  Node *clone() const override;
  const char *getDocString() const override { return "An input or output of the network."; }
};

/// A named constant tensor (weights) known at compile time.
class Constant : public Storage {
public:
  Constant(std::string name, TypeRef ty, Tensor payload)
      : Storage(NodeKind::Constant, std::move(name), ty), payload_(std::move(payload)) {}
  static bool classof(const Node *n) { return n->getKind() == NodeKind::Constant; }
  const Tensor &getPayload() const { return payload_; }
  Tensor &getPayloadMutable() { return payload_; }
  Node *clone() const override;
  const char *getDocString() const override { return "A constant tensor (weights)."; }

private:
  Tensor payload_;
};

} // namespace kiln

#include "kiln/Graph/AutoGenNodes.h"

#endif // KILN_GRAPH_NODES_H
