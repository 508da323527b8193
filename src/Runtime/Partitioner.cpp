// Partitioner: backend support first, then device memory; or the user's partition.
// See kiln/Runtime/Partitioner.h for the algorithm.

#include "kiln/Runtime/Partitioner.h"

#include "kiln/IR/IR.h"

#include <algorithm>
#include <functional>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace kiln {

namespace {

uint64_t bytesOf(NodeValue v) { return v.getType()->sizeInBytes(); }

/// True for nodes whose results take no device memory of their own.
bool isFree(const Node *n) {
  return n->getKind() == NodeKind::Save || n->getKind() == NodeKind::Reshape;
}

struct NodeValueHash {
  size_t operator()(const NodeValue &v) const {
    return std::hash<const void *>()(v.node) * 31 + v.resNo;
  }
};

/// Incremental footprint of a growing set of nodes S (the estimateMemory rule, plus the
/// placeholders that will carry S's results to nodes outside S). Adding a node costs time
/// proportional to its operands and results, so cutting a group is linear.
class Footprint {
public:
  /// \p liveUses: uses of each value by live nodes of the function.
  explicit Footprint(const std::unordered_map<NodeValue, unsigned, NodeValueHash> &liveUses)
      : liveUses_(&liveUses) {}

  uint64_t bytes() const { return total_; }
  /// The footprint S would have with \p n added.
  uint64_t bytesWith(const Node *n) { return total_ + uint64_t(apply(n, false)); }
  void add(const Node *n) { apply(n, true); }

private:
  /// The change in bytes() that adding \p n makes; made for real when \p commit.
  int64_t apply(const Node *n, bool commit) {
    int64_t delta = 0;
    std::vector<NodeValue> seen; // operands already charged, within this node
    std::vector<std::pair<NodeValue, unsigned>> usesLeft;
    for (unsigned i = 0; i < n->getNumInputs(); i++) {
      NodeValue v = n->getNthInput(i);
      auto it = outside_.find(v);
      if (it != outside_.end()) {
        // Produced in S: one fewer use outside; no longer a boundary value at zero.
        unsigned *left = nullptr;
        for (auto &u : usesLeft)
          if (u.first == v)
            left = &u.second;
        if (!left) {
          usesLeft.push_back({v, it->second});
          left = &usesLeft.back().second;
        }
        if (*left && --*left == 0)
          delta -= int64_t(bytesOf(v));
        continue;
      }
      if (counted_.count(v) || std::find(seen.begin(), seen.end(), v) != seen.end())
        continue;
      seen.push_back(v); // storage, or a value from outside S: an input of S
      delta += int64_t(bytesOf(v));
    }
    std::vector<std::pair<NodeValue, unsigned>> results;
    for (unsigned r = 0; r < n->getNumResults(); r++) {
      NodeValue v(const_cast<Node *>(n), r);
      if (!isFree(n))
        delta += int64_t(bytesOf(v));
      auto u = liveUses_->find(v);
      unsigned uses = u == liveUses_->end() ? 0 : u->second;
      if (uses)
        delta += int64_t(bytesOf(v));
      results.push_back({v, uses});
    }
    if (commit) {
      for (const NodeValue &v : seen)
        counted_.insert(v);
      for (auto &u : usesLeft)
        outside_[u.first] = u.second;
      for (auto &r : results)
        outside_[r.first] = r.second;
      total_ += uint64_t(delta); // wraps correctly for negative deltas
    }
    return delta;
  }

  const std::unordered_map<NodeValue, unsigned, NodeValueHash> *liveUses_;
  std::unordered_set<NodeValue, NodeValueHash> counted_;
  std::unordered_map<NodeValue, unsigned, NodeValueHash> outside_;
  uint64_t total_ = 0;
};

std::string humanBytes(uint64_t b) {
  if (b < 1024)
    return std::to_string(b) + " bytes";
  std::ostringstream os;
  os.precision(3);
  if (b >= (uint64_t(1) << 20))
    os << double(b) / double(1 << 20) << " MiB";
  else
    os << double(b) / 1024.0 << " KiB";
  return os.str() + " (" + std::to_string(b) + " bytes)";
}

std::string names(const std::vector<Placeholder *> &phs) {
  std::string s;
  for (const Placeholder *p : phs)
    s += (s.empty() ? "" : ", ") + p->getName();
  return s.empty() ? "-" : s;
}

/// Orders the user's partitions parents-first; an error names a cycle.
Expected<std::vector<unsigned>> orderPartitions(const std::vector<std::set<unsigned>> &parents,
                                                const PartitionConfig &user) {
  enum State { White, Grey, Black };
  std::vector<State> state(parents.size(), White);
  std::vector<unsigned> order, path;
  std::function<Error(unsigned)> visit = [&](unsigned p) -> Error {
    if (state[p] == Black)
      return Error::success();
    if (state[p] == Grey) {
      std::string cycle;
      auto it = std::find(path.begin(), path.end(), p);
      for (; it != path.end(); ++it)
        cycle += user.partitions[*it].name + " -> ";
      return makeError(ErrorCode::InvalidArgument, "the user partition has a cycle: ", cycle,
                       user.partitions[p].name);
    }
    state[p] = Grey;
    path.push_back(p);
    for (unsigned q : parents[p])
      KILN_RETURN_IF_ERR(visit(q));
    path.pop_back();
    state[p] = Black;
    order.push_back(p);
    return Error::success();
  };
  for (unsigned p = 0; p < parents.size(); p++)
    KILN_RETURN_IF_ERR(visit(p));
  return order;
}

/// Assigns nodes to the user's partitions; returns, per partition in the user's
/// numbering, its nodes in topological order.
Expected<std::vector<std::vector<Node *>>>
assignUser(const std::vector<Node *> &order, const PartitionConfig &user,
           const std::map<std::string, const PartitionerBackend *> &byName,
           std::vector<std::string> &backendOf) {
  std::vector<std::vector<Node *>> parts(user.partitions.size());
  std::unordered_map<const Node *, unsigned> partOf;
  std::string unmapped, unsupported;
  for (const auto &p : user.partitions)
    if (!byName.count(p.backendName))
      return makeError(ErrorCode::InvalidArgument, "user partition '", p.name, "' names backend '",
                       p.backendName, "', which has no device here");
  for (const auto &kv : user.nodeToPartition)
    if (kv.second >= user.partitions.size())
      return makeError(ErrorCode::InvalidArgument, "user partition maps node '", kv.first,
                       "' to partition ", kv.second, " of ", user.partitions.size());
  for (Node *n : order) {
    auto it = user.nodeToPartition.find(n->getName());
    unsigned p;
    if (it != user.nodeToPartition.end()) {
      p = it->second;
    } else if (n->getKind() == NodeKind::Save && partOf.count(cast<SaveNode>(n)->getInput().node)) {
      p = partOf[cast<SaveNode>(n)->getInput().node];
    } else {
      unmapped += (unmapped.empty() ? "'" : ", '") + n->getName() + "'";
      continue;
    }
    const Backend *b = byName.at(user.partitions[p].backendName)->backend;
    if (!b->isOpSupported(*n))
      unsupported += (unsupported.empty() ? "" : "; ") + n->describe() + " on " + b->getName();
    partOf[n] = p;
    parts[p].push_back(n);
  }
  if (!unmapped.empty())
    return makeError(ErrorCode::InvalidArgument, "the user partition maps no partition to ",
                     unmapped);
  if (!unsupported.empty())
    return makeError(
        ErrorCode::Unsupported,
        "the user partition places nodes where their backend cannot run them: ", unsupported);
  for (const auto &p : user.partitions)
    backendOf.push_back(p.backendName);
  return parts;
}

using LiveUses = std::unordered_map<NodeValue, unsigned, NodeValueHash>;
using ByName = std::map<std::string, const PartitionerBackend *>;

/// Uses of each value by the live nodes \p order (storage is not counted).
LiveUses countLiveUses(const std::vector<Node *> &order) {
  LiveUses liveUses;
  for (Node *n : order)
    for (unsigned i = 0; i < n->getNumInputs(); i++)
      if (!isa<Storage>(n->getNthInput(i).node))
        liveUses[n->getNthInput(i)]++;
  return liveUses;
}

/// The nodes of each partition in topological order, with its backend and (for a user
/// partition) its name, partitions parents-first.
struct Cut {
  std::vector<std::vector<Node *>> parts;
  std::vector<std::string> backends;
  std::vector<std::string> names;
};

/// The user's partition, checked and ordered parents-first; empty partitions are dropped.
Expected<Cut> cutUserPartition(const std::vector<Node *> &order, const PartitionConfig &user,
                               const ByName &byName) {
  std::vector<std::string> backendOf;
  KILN_ASSIGN_OR_RETURN(std::vector<std::vector<Node *>> userParts,
                        assignUser(order, user, byName, backendOf));
  std::unordered_map<const Node *, unsigned> partOf;
  for (unsigned p = 0; p < userParts.size(); p++)
    for (Node *n : userParts[p])
      partOf[n] = p;
  std::vector<std::set<unsigned>> parents(userParts.size());
  for (Node *n : order)
    for (unsigned i = 0; i < n->getNumInputs(); i++) {
      Node *in = n->getNthInput(i).node;
      if (!isa<Storage>(in) && partOf[in] != partOf[n])
        parents[partOf[n]].insert(partOf[in]);
    }
  KILN_ASSIGN_OR_RETURN(std::vector<unsigned> porder, orderPartitions(parents, user));
  Cut cut;
  for (unsigned p : porder) {
    if (userParts[p].empty())
      continue;
    cut.parts.push_back(userParts[p]);
    cut.backends.push_back(backendOf[p]);
    cut.names.push_back(user.partitions[p].name);
  }
  return cut;
}

/// The backend of each node: the first that supports it and could hold it alone. A Save
/// stays with the value it saves when that backend can save. The error lists every node
/// that no backend can take.
Expected<std::unordered_map<const Node *, unsigned>>
placeNodes(const Function &f, const std::vector<Node *> &order,
           const std::vector<PartitionerBackend> &backends, const LiveUses &liveUses) {
  std::unordered_map<const Node *, unsigned> backendOf;
  std::string unplaceable;
  for (Node *n : order) {
    bool placed = false;
    std::string why;
    if (auto *s = dyn_cast<SaveNode>(n)) {
      auto it = backendOf.find(s->getInput().node);
      if (it != backendOf.end() && backends[it->second].backend->isOpSupported(*n)) {
        backendOf[n] = it->second;
        placed = true;
      }
    }
    for (unsigned b = 0; b < backends.size() && !placed; b++) {
      if (!backends[b].backend->isOpSupported(*n))
        continue;
      Footprint alone(liveUses);
      uint64_t need = alone.bytesWith(n);
      if (need > backends[b].deviceMemory) {
        why += " (" + backends[b].backend->getName() + " supports it but it needs " +
               std::to_string(need) + " bytes, its device has " +
               std::to_string(backends[b].deviceMemory) + ")";
        continue;
      }
      backendOf[n] = b;
      placed = true;
    }
    if (!placed)
      unplaceable += (unplaceable.empty() ? "" : "; ") + n->describe() + why;
  }
  if (unplaceable.empty())
    return backendOf;
  std::string list;
  for (const PartitionerBackend &b : backends)
    list += (list.empty() ? "" : ", ") + b.backend->getName();
  bool oom = unplaceable.find(" bytes, its device has ") != std::string::npos;
  return makeError(oom ? ErrorCode::OutOfMemory : ErrorCode::Unsupported, "partitioning '",
                   f.getName(), "': no backend among [", list, "] can run ", unplaceable);
}

/// Nodes grouped by (stage, backend), each group in topological order. An edge between
/// backends raises the stage, so the groups form a DAG.
std::map<std::pair<unsigned, unsigned>, std::vector<Node *>>
groupByStage(const std::vector<Node *> &order,
             std::unordered_map<const Node *, unsigned> &backendOf) {
  std::unordered_map<const Node *, unsigned> stage;
  std::map<std::pair<unsigned, unsigned>, std::vector<Node *>> groups;
  for (Node *n : order) {
    unsigned s = 0;
    for (unsigned i = 0; i < n->getNumInputs(); i++) {
      Node *in = n->getNthInput(i).node;
      if (isa<Storage>(in))
        continue;
      s = std::max(s, stage[in] + (backendOf[in] != backendOf[n] ? 1u : 0u));
    }
    stage[n] = s;
    groups[{s, backendOf[n]}].push_back(n);
  }
  return groups;
}

/// Cuts each group, in topological order, into pieces that fit its backend's device.
Cut cutToFit(std::map<std::pair<unsigned, unsigned>, std::vector<Node *>> groups,
             const std::vector<PartitionerBackend> &backends, const LiveUses &liveUses) {
  Cut cut;
  for (auto &g : groups) {
    const PartitionerBackend &b = backends[g.first.second];
    Footprint fp(liveUses);
    std::vector<Node *> cur;
    for (Node *n : g.second) {
      if (!cur.empty() && fp.bytesWith(n) > b.deviceMemory) {
        cut.parts.push_back(std::move(cur));
        cut.backends.push_back(b.backend->getName());
        cur.clear();
        fp = Footprint(liveUses);
      }
      fp.add(n);
      cur.push_back(n);
    }
    cut.parts.push_back(std::move(cur));
    cut.backends.push_back(b.backend->getName());
  }
  return cut;
}

bool nameLess(const Placeholder *a, const Placeholder *b) { return a->getName() < b->getName(); }

/// The placeholders \p p's function reads (inputs) and saves to (outputs), by name.
void collectIO(Partition &p) {
  std::set<Placeholder *> in, out;
  for (const auto &np : p.function->getNodes()) {
    Node *n = np.get();
    for (unsigned i = 0; i < n->getNumInputs(); i++) {
      auto *ph = dyn_cast<Placeholder>(n->getNthInput(i).node);
      if (!ph)
        continue;
      if (isa<SaveNode>(n) && i == SaveNode::OutputIdx)
        out.insert(ph);
      else
        in.insert(ph);
    }
  }
  p.inputs.assign(in.begin(), in.end());
  p.outputs.assign(out.begin(), out.end());
  std::sort(p.inputs.begin(), p.inputs.end(), nameLess);
  std::sort(p.outputs.begin(), p.outputs.end(), nameLess);
}

/// Creates a function per part of \p cut with clones of its nodes; a value that crosses
/// into another part is saved to a new placeholder (one of plan.intermediates) that the
/// consumer reads. Sets each partition's parents, children, inputs and outputs.
Error createPartitions(Function &f, const std::string &networkName, const Cut &cut,
                       PartitionPlan &plan) {
  const auto &parts = cut.parts;
  std::unordered_map<const Node *, unsigned> partOf;
  for (unsigned p = 0; p < parts.size(); p++)
    for (Node *n : parts[p])
      partOf[n] = p;
  Module *m = f.getParent();
  std::unordered_map<const Node *, Node *> cloneOf;
  for (unsigned i = 0; i < parts.size(); i++) {
    Partition p;
    std::string suffix =
        i < cut.names.size() && !cut.names[i].empty() ? cut.names[i] : "p" + std::to_string(i);
    p.function = m->createFunction(networkName + "." + suffix);
    p.name = p.function->getName();
    p.backendName = cut.backends[i];
    p.numNodes = parts[i].size();
    for (Node *n : parts[i])
      cloneOf[n] = p.function->addNode(n->clone());
    plan.partitions.push_back(std::move(p));
  }
  std::unordered_map<NodeValue, Placeholder *, NodeValueHash> carrier;
  std::vector<std::set<unsigned>> parents(parts.size()), children(parts.size());
  for (unsigned i = 0; i < parts.size(); i++) {
    for (Node *n : parts[i]) {
      Node *c = cloneOf[n];
      for (unsigned k = 0; k < n->getNumInputs(); k++) {
        NodeValue v = n->getNthInput(k);
        if (isa<Storage>(v.node))
          continue;
        unsigned q = partOf[v.node];
        if (q == i) {
          c->setNthInput(k, NodeValue(cloneOf[v.node], v.resNo));
          continue;
        }
        Placeholder *&ph = carrier[v];
        if (!ph) {
          std::string nm = networkName + "." + v.node->getName();
          if (v.node->getNumResults() > 1)
            nm += "." + v.node->getResultName(v.resNo);
          ph = m->createPlaceholder(v.getType(), nm);
          plan.intermediates.push_back(ph);
          plan.partitions[q].function->createSave(
              ph->getName() + ".save", NodeValue(cloneOf[v.node], v.resNo), NodeValue(ph));
        }
        c->setNthInput(k, NodeValue(ph));
        parents[i].insert(q);
        children[q].insert(i);
      }
    }
  }
  for (unsigned i = 0; i < parts.size(); i++) {
    Partition &p = plan.partitions[i];
    p.parents.assign(parents[i].begin(), parents[i].end());
    p.children.assign(children[i].begin(), children[i].end());
    collectIO(p);
  }
  return Error::success();
}

/// Network I/O: placeholders of the original that partitions read or write.
void setNetworkIO(PartitionPlan &plan) {
  std::set<Placeholder *> inter(plan.intermediates.begin(), plan.intermediates.end());
  std::set<Placeholder *> ins, outs;
  for (Partition &p : plan.partitions) {
    for (Placeholder *ph : p.inputs)
      if (!inter.count(ph))
        ins.insert(ph);
    for (Placeholder *ph : p.outputs)
      if (!inter.count(ph))
        outs.insert(ph);
  }
  plan.inputs.assign(ins.begin(), ins.end());
  plan.outputs.assign(outs.begin(), outs.end());
  std::sort(plan.inputs.begin(), plan.inputs.end(), nameLess);
  std::sort(plan.outputs.begin(), plan.outputs.end(), nameLess);
}

} // namespace

uint64_t estimateMemory(const Function &f) {
  std::unordered_set<const Node *> storage;
  uint64_t bytes = 0;
  for (const auto &p : f.getNodes()) {
    const Node *n = p.get();
    for (unsigned i = 0; i < n->getNumInputs(); i++) {
      const Node *in = n->getNthInput(i).node;
      if (isa<Storage>(in) && storage.insert(in).second)
        bytes += in->getType()->sizeInBytes();
    }
    if (!isFree(n))
      for (unsigned r = 0; r < n->getNumResults(); r++)
        bytes += n->getType(r)->sizeInBytes();
  }
  return bytes;
}

PartitionPlan::~PartitionPlan() {
  if (!created_)
    return;
  for (Partition &p : partitions)
    if (p.function && p.function != original)
      p.function->getParent()->eraseFunction(p.function);
}

std::string PartitionPlan::toString() const {
  std::ostringstream os;
  std::map<std::string, unsigned> perBackend;
  for (const Partition &p : partitions)
    perBackend[p.backendName]++;
  os << "plan for network '" << networkName << "': " << partitions.size() << " partition"
     << (partitions.size() == 1 ? "" : "s") << " (";
  bool first = true;
  for (const auto &kv : perBackend) {
    os << (first ? "" : ", ") << kv.first << ": " << kv.second;
    first = false;
  }
  os << ")\n";
  for (size_t i = 0; i < partitions.size(); i++) {
    const Partition &p = partitions[i];
    os << "  partition " << i << " '" << p.name << "' on " << p.backendName;
    if (!p.devices.empty()) {
      os << " [";
      for (size_t d = 0; d < p.devices.size(); d++)
        os << (d ? ", " : "") << p.devices[d];
      os << "]";
    }
    os << ": " << p.numNodes << (p.numNodes == 1 ? " node, " : " nodes, ")
       << humanBytes(p.memoryBytes) << "\n";
    // The operators it holds (not the saves added for values leaving it), a few by name.
    std::vector<std::string> ops;
    for (const auto &n : p.function->getNodes()) {
      auto *s = dyn_cast<SaveNode>(n.get());
      if (!s || !std::count(intermediates.begin(), intermediates.end(), s->getPlaceholder()))
        ops.push_back(n->getName());
    }
    os << "    nodes:   ";
    for (size_t j = 0; j < ops.size() && j < 8; j++)
      os << (j ? ", " : "") << ops[j];
    if (ops.size() > 8)
      os << ", ... (" << ops.size() - 8 << " more)";
    os << "\n    after:   ";
    if (p.parents.empty())
      os << "-";
    for (size_t j = 0; j < p.parents.size(); j++)
      os << (j ? ", " : "") << p.parents[j];
    os << "\n    inputs:  " << names(p.inputs) << "\n    outputs: " << names(p.outputs) << "\n";
  }
  return os.str();
}

std::string PartitionPlan::toDot() const {
  std::ostringstream os;
  os << "digraph \"" << networkName << "\" {\n  rankdir=TB;\n  node [shape=box];\n";
  for (size_t i = 0; i < partitions.size(); i++) {
    const Partition &p = partitions[i];
    os << "  p" << i << " [label=\"" << p.name << "\\n" << p.backendName;
    for (const std::string &d : p.devices)
      os << " " << d;
    os << "\\n"
       << p.numNodes << (p.numNodes == 1 ? " node, " : " nodes, ") << p.memoryBytes
       << " bytes\"];\n";
  }
  for (size_t i = 0; i < partitions.size(); i++)
    for (unsigned c : partitions[i].children) {
      std::string label;
      for (Placeholder *ph : partitions[i].outputs)
        if (std::count(partitions[c].inputs.begin(), partitions[c].inputs.end(), ph))
          label += (label.empty() ? "" : "\\n") + ph->getName() + " " + ph->getType()->toString();
      os << "  p" << i << " -> p" << c << " [label=\"" << label << "\"];\n";
    }
  os << "}\n";
  return os.str();
}

Expected<PartitionPlan> partitionFunction(Function *f, const std::string &networkName,
                                          const std::vector<PartitionerBackend> &backends,
                                          const PartitionConfig *user) {
  if (backends.empty())
    return makeError(ErrorCode::InvalidArgument, "partitioning '", f->getName(),
                     "': no backends to place it on");
  KILN_ASSIGN_OR_RETURN(std::vector<Node *> order, scheduleTopologically(f));
  if (order.empty())
    return makeError(ErrorCode::InvalidArgument, "partitioning '", f->getName(),
                     "': the function saves nothing");
  std::map<std::string, const PartitionerBackend *> byName;
  for (const PartitionerBackend &b : backends)
    byName.emplace(b.backend->getName(), &b);

  // 1. Which nodes go together, on which backend.
  Cut cut;
  if (user) {
    KILN_ASSIGN_OR_RETURN(cut, cutUserPartition(order, *user, byName));
  } else {
    LiveUses liveUses = countLiveUses(order);
    KILN_ASSIGN_OR_RETURN(auto backendOf, placeNodes(*f, order, backends, liveUses));
    cut = cutToFit(groupByStage(order, backendOf), backends, liveUses);
  }

  // 2. A function per partition (or the original, when nothing is split), and the network's
  // inputs and outputs.
  PartitionPlan plan;
  plan.networkName = networkName;
  plan.original = f;
  if (cut.parts.size() == 1 && !user) {
    Partition p;
    p.name = f->getName();
    p.backendName = cut.backends[0];
    p.function = f;
    p.numNodes = cut.parts[0].size();
    collectIO(p);
    plan.partitions.push_back(std::move(p));
  } else {
    plan.created_ = true;
    KILN_RETURN_IF_ERR(createPartitions(*f, networkName, cut, plan));
  }
  setNetworkIO(plan);

  // 3. Final sizes, checked against the devices (a user partition is not cut to fit).
  for (Partition &p : plan.partitions) {
    p.memoryBytes = estimateMemory(*p.function);
    uint64_t cap = byName.at(p.backendName)->deviceMemory;
    if (p.memoryBytes > cap)
      return makeError(ErrorCode::OutOfMemory, "partition '", p.name, "' of network '", networkName,
                       "' needs ", p.memoryBytes, " bytes but a ", p.backendName, " device has ",
                       cap);
  }
  return plan;
}

} // namespace kiln
