// Function::verify: structural and type checks of a graph, with messages that name the
// node, its operator and its operand shapes.

#include "kiln/Graph/Graph.h"

#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace kiln {

namespace {

Error invalid(const Node *n, const std::string &what) {
  return makeError(ErrorCode::InvalidGraph, "verifier: ", n->describe(), ": ", what);
}

/// Checks that the operand graph has no cycle (iterative DFS over this function's nodes).
Error checkAcyclic(const Function &f) {
  enum State { White, Grey, Black };
  std::unordered_map<const Node *, State> state;
  for (const auto &p : f.getNodes())
    state[p.get()] = White;
  for (const auto &p : f.getNodes()) {
    if (state[p.get()] != White)
      continue;
    std::vector<std::pair<const Node *, unsigned>> stack{{p.get(), 0}};
    state[p.get()] = Grey;
    while (!stack.empty()) {
      auto &[n, i] = stack.back();
      if (i < n->getNumInputs()) {
        const Node *in = n->getNthInput(i++).node;
        auto it = state.find(in);
        if (it == state.end())
          continue; // storage
        if (it->second == Grey)
          return invalid(n, "the graph has a cycle through '" + in->getName() + "'");
        if (it->second == White) {
          it->second = Grey;
          stack.push_back({in, 0});
        }
        continue;
      }
      state[n] = Black;
      stack.pop_back();
    }
  }
  return Error::success();
}

} // namespace

Error Function::verify() const {
  if (!recordedErrors_.empty()) {
    std::ostringstream os;
    os << "function '" << name_ << "' was built with " << recordedErrors_.size()
       << " error(s): ";
    for (size_t i = 0; i < recordedErrors_.size(); i++)
      os << (i ? "; " : "") << recordedErrors_[i];
    return Error(ErrorCode::InvalidGraph, os.str());
  }
  std::unordered_set<const Node *> own;
  for (const auto &p : nodes_)
    own.insert(p.get());
  std::unordered_set<const Placeholder *> saved;
  for (const auto &p : nodes_) {
    const Node *n = p.get();
    for (unsigned i = 0; i < n->getNumInputs(); i++) {
      NodeValue v = n->getNthInput(i);
      if (!v.node)
        return invalid(n, "operand " + n->getInputName(i) + " is missing");
      if (!own.count(v.node) && !isa<Storage>(v.node))
        return invalid(n, "operand " + n->getInputName(i) + " refers to node '" +
                              v.node->getName() + "' outside this function");
      if (isa<Storage>(v.node)) {
        Module *m = parent_;
        bool known = false;
        for (const auto &ph : m->getPlaceholders())
          known |= ph.get() == v.node;
        for (const auto &c : m->getConstants())
          known |= c.get() == v.node;
        if (!known)
          return invalid(n, "operand " + n->getInputName(i) + " refers to storage '" +
                                v.node->getName() + "' of another module");
      }
      if (v.resNo >= v.node->getNumResults())
        return invalid(n, "operand " + n->getInputName(i) + " uses result " +
                              std::to_string(v.resNo) + " of '" + v.node->getName() +
                              "', which has " + std::to_string(v.node->getNumResults()));
    }
    for (unsigned i = 0; i < n->getNumInputs(); i++) {
      NodeValue v = n->getNthInput(i);
      if (v.node->getType(v.resNo) && !v.node->getType(v.resNo)->dims.valid())
        return invalid(n, "operand " + n->getInputName(i) + " ('" + v.node->getName() +
                              "') has more than " + std::to_string(kMaxDims) +
                              " dimensions, Kiln's maximum rank");
    }
    for (unsigned r = 0; r < n->getNumResults(); r++) {
      if (!n->getType(r))
        return invalid(n, "result " + n->getResultName(r) + " has no type");
      if (!n->getType(r)->dims.valid())
        return invalid(n, "result " + n->getResultName(r) + " has more than " +
                              std::to_string(kMaxDims) + " dimensions, Kiln's maximum rank");
    }
    Expected<std::vector<Type>> types = n->computeResultTypes();
    if (!types)
      return invalid(n, types.takeError().message());
    if (types->size() != n->getNumResults())
      return invalid(n, "the operator defines " + std::to_string(types->size()) +
                            " results but the node has " + std::to_string(n->getNumResults()));
    for (unsigned r = 0; r < n->getNumResults(); r++) {
      if (!n->getType(r)->sameShapeAndKind((*types)[r]))
        return invalid(n, "result " + n->getResultName(r) + " has type " +
                              n->getType(r)->toString() + " but the operator gives " +
                              (*types)[r].toString());
    }
    if (auto *s = dyn_cast<SaveNode>(n)) {
      auto *ph = dyn_cast<Placeholder>(s->getOutput().node);
      if (!ph)
        return invalid(n, "the Output operand must be a Placeholder");
      if (!saved.insert(ph).second)
        return invalid(n, "placeholder '" + ph->getName() + "' is saved more than once");
    }
  }
  return checkAcyclic(*this);
}

} // namespace kiln
