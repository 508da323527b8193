// The memory-aware scheduler (see kiln/Memory/Scheduler.h): a small model of the
// function's activations (which node allocates which buffer, who uses it), a simulator
// for the peak of an order, and heuristics that produce orders.

#include "kiln/Memory/Scheduler.h"

#include "kiln/IR/IR.h"

#include <algorithm>
#include <functional>
#include <unordered_map>

#include <glog/logging.h>

namespace kiln {

namespace {

uint64_t alignUp(uint64_t x, uint64_t a) { return a ? (x + a - 1) / a * a : x; }

/// The activations of a set of nodes. Buffers ("roots") are node results; a Reshape
/// result is its input's root.
struct Model {
  std::vector<Node *> nodes;
  std::unordered_map<const Node *, int> index;
  std::vector<uint64_t> rootSize;
  std::vector<unsigned> rootUses;          ///< Operand uses of the root (through reshapes).
  std::vector<std::vector<int>> own;       ///< Roots each node allocates.
  std::vector<std::vector<int>> inputs;    ///< Root of each operand use (-1: storage).
  std::vector<std::vector<int>> operands;  ///< Distinct operand nodes (indices).
  std::vector<std::vector<int>> users;     ///< Distinct user nodes (indices).

  Model(const std::vector<Node *> &order, uint64_t alignment) {
    for (Node *n : order)
      if (!isa<Storage>(n)) {
        index[n] = int(nodes.size());
        nodes.push_back(n);
      }
    size_t N = nodes.size();
    own.resize(N);
    inputs.resize(N);
    operands.resize(N);
    users.resize(N);
    std::unordered_map<const Node *, std::vector<int>> resultRoot;
    // Operands come first in `order`, so roots of inputs exist when a node is reached.
    for (size_t i = 0; i < N; i++) {
      Node *n = nodes[i];
      for (unsigned k = 0; k < n->getNumInputs(); k++) {
        NodeValue v = n->getNthInput(k);
        auto it = index.find(v.node);
        if (it == index.end()) {
          inputs[i].push_back(-1);
          continue;
        }
        int r = resultRoot[v.node][v.resNo];
        inputs[i].push_back(r);
        if (r >= 0)
          rootUses[r]++;
        if (std::find(operands[i].begin(), operands[i].end(), it->second) == operands[i].end()) {
          operands[i].push_back(it->second);
          users[it->second].push_back(int(i));
        }
      }
      auto &rr = resultRoot[n];
      if (isa<ReshapeNode>(n)) {
        rr.push_back(inputs[i].empty() ? -1 : inputs[i][0]);
        continue;
      }
      for (unsigned k = 0; k < n->getNumResults(); k++) {
        rr.push_back(int(rootSize.size()));
        own[i].push_back(int(rootSize.size()));
        rootSize.push_back(alignUp(n->getType(k)->sizeInBytes(), alignment));
        rootUses.push_back(0);
      }
    }
  }

  uint64_t ownBytes(int i) const {
    uint64_t s = 0;
    for (int r : own[i])
      s += rootSize[r];
    return s;
  }
};

/// Runs nodes one at a time and tracks live bytes.
class Simulator {
public:
  explicit Simulator(const Model &m) : m_(m), remaining_(m.rootUses) {}

  /// Bytes freed right after node \p i runs.
  uint64_t freedBy(int i) const {
    uint64_t s = 0;
    std::vector<int> seen;
    for (int r : m_.inputs[i]) {
      if (r < 0 || std::find(seen.begin(), seen.end(), r) != seen.end())
        continue;
      seen.push_back(r);
      unsigned usesHere = unsigned(std::count(m_.inputs[i].begin(), m_.inputs[i].end(), r));
      if (remaining_[r] == usesHere)
        s += m_.rootSize[r];
    }
    for (int r : m_.own[i])
      if (m_.rootUses[r] == 0)
        s += m_.rootSize[r];
    return s;
  }

  void run(int i) {
    live_ += m_.ownBytes(i);
    peak_ = std::max(peak_, live_);
    for (int r : m_.inputs[i])
      if (r >= 0 && --remaining_[r] == 0)
        live_ -= m_.rootSize[r];
    for (int r : m_.own[i])
      if (m_.rootUses[r] == 0)
        live_ -= m_.rootSize[r];
  }

  uint64_t peak() const { return peak_; }

private:
  const Model &m_;
  std::vector<unsigned> remaining_;
  uint64_t live_ = 0, peak_ = 0;
};

uint64_t simulate(const Model &m, const std::vector<int> &order) {
  Simulator sim(m);
  for (int i : order)
    sim.run(i);
  return sim.peak();
}

/// Depth-first from the outputs; at each node the operand subtree that needs the most
/// memory (less what it leaves behind) goes first (Sethi-Ullman numbering, exact on trees).
std::vector<int> dfsByNeed(const Model &m, const std::vector<int> &outputs) {
  size_t N = m.nodes.size();
  std::vector<uint64_t> need(N, 0);
  std::vector<std::vector<int>> sorted(N);
  // Operands have smaller indices (the model is built from a topological order).
  for (size_t i = 0; i < N; i++) {
    std::vector<int> ch = m.operands[i];
    std::stable_sort(ch.begin(), ch.end(), [&](int a, int b) {
      return int64_t(need[a] - m.ownBytes(a)) > int64_t(need[b] - m.ownBytes(b));
    });
    uint64_t acc = 0, best = 0;
    for (int c : ch) {
      best = std::max(best, acc + need[c]);
      acc += m.ownBytes(c);
    }
    need[i] = std::max(best, acc + m.ownBytes(int(i)));
    sorted[i] = std::move(ch);
  }
  std::vector<int> order;
  std::vector<char> done(N, 0);
  std::function<void(int)> visit = [&](int i) {
    if (done[i])
      return;
    done[i] = 1;
    for (int c : sorted[i])
      visit(c);
    order.push_back(i);
  };
  for (int o : outputs)
    visit(o);
  return order;
}

/// List scheduling: among the ready nodes, run the one with the smallest key; ties go to
/// the node that became ready last (which keeps chains together).
std::vector<int> greedy(const Model &m,
                        const std::function<std::pair<int64_t, int64_t>(const Simulator &, int)> &key) {
  size_t N = m.nodes.size();
  std::vector<unsigned> pending(N);
  std::vector<std::pair<int, uint64_t>> ready; // (node, stamp)
  uint64_t stamp = 0;
  for (size_t i = 0; i < N; i++) {
    pending[i] = unsigned(m.operands[i].size());
    if (!pending[i])
      ready.push_back({int(i), stamp++});
  }
  Simulator sim(m);
  std::vector<int> order;
  while (!ready.empty()) {
    size_t best = 0;
    std::pair<int64_t, int64_t> bestKey = key(sim, ready[0].first);
    for (size_t k = 1; k < ready.size(); k++) {
      auto kk = key(sim, ready[k].first);
      if (kk < bestKey || (kk == bestKey && ready[k].second > ready[best].second)) {
        best = k;
        bestKey = kk;
      }
    }
    int i = ready[best].first;
    ready.erase(ready.begin() + best);
    sim.run(i);
    order.push_back(i);
    for (int u : m.users[i])
      if (--pending[u] == 0)
        ready.push_back({u, stamp++});
  }
  return order;
}

} // namespace

uint64_t computePeakLiveBytes(const std::vector<Node *> &order, uint64_t alignment) {
  Model m(order, alignment);
  std::vector<int> idx(m.nodes.size());
  for (size_t i = 0; i < idx.size(); i++)
    idx[i] = int(i);
  return simulate(m, idx);
}

Expected<Schedule> scheduleForMemory(Function *f, const SchedulerOptions &opts) {
  KILN_ASSIGN_OR_RETURN(std::vector<Node *> topo, scheduleTopologically(f));
  Model m(topo, opts.alignment);
  std::vector<int> outputs;
  for (size_t i = 0; i < m.nodes.size(); i++)
    if (isa<SaveNode>(m.nodes[i]))
      outputs.push_back(int(i));

  std::vector<std::pair<std::string, std::vector<int>>> cands;
  {
    std::vector<int> idx(m.nodes.size());
    for (size_t i = 0; i < idx.size(); i++)
      idx[i] = int(i);
    cands.push_back({"topological", idx});
  }
  cands.push_back({"dfs-by-need", dfsByNeed(m, outputs)});
  cands.push_back({"greedy-delta", greedy(m, [&](const Simulator &s, int i) {
                     return std::make_pair(int64_t(m.ownBytes(i)) - int64_t(s.freedBy(i)),
                                           int64_t(0));
                   })});
  cands.push_back({"greedy-alloc", greedy(m, [&](const Simulator &s, int i) {
                     return std::make_pair(int64_t(m.ownBytes(i)),
                                           int64_t(m.ownBytes(i)) - int64_t(s.freedBy(i)));
                   })});

  Schedule best;
  for (auto &[name, order] : cands) {
    CHECK_EQ(order.size(), m.nodes.size()) << "scheduler '" << name << "' lost nodes";
    uint64_t peak = simulate(m, order);
    best.candidates.push_back({name, peak});
    if (name == "topological")
      best.topologicalPeakBytes = peak;
    if (best.order.empty() || peak < best.peakBytes) {
      best.peakBytes = peak;
      best.strategy = name;
      best.order.clear();
      for (int i : order)
        best.order.push_back(m.nodes[i]);
    }
  }
  return best;
}

} // namespace kiln
