// Partitioner: backend support first, then device memory; or the user's partition.
// See kiln/Runtime/Partitioner.h for the algorithm.

#include "kiln/Runtime/Partitioner.h"

#include "kiln/IR/IR.h"
#include "kiln/Memory/MemoryPipeline.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <memory>
#include <tuple>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace kiln {

namespace {

/// True for nodes whose results take no device memory of their own.
bool isFree(const Node *n) {
  return n->getKind() == NodeKind::Save || n->getKind() == NodeKind::Reshape;
}

struct NodeValueHash {
  size_t operator()(const NodeValue &v) const {
    return std::hash<const void *>()(v.node) * 31 + v.resNo;
  }
};

using LiveUses = std::unordered_map<NodeValue, unsigned, NodeValueHash>;

/// Activation buffers are rounded up to the memory planner's alignment.
constexpr uint64_t kActivationAlignment = 64;
/// Cuts whose slowest piece is within this fraction of the best are compared by the bytes
/// crossing them.
constexpr double kBalanceSlack = 0.05;
/// At most this many positions of a group are considered for cuts (the one with the
/// fewest crossing bytes in each window, for longer groups).
constexpr size_t kMaxCutPositions = 1024;
/// At most this many cuts are tried again after a backend's memory plan refused a device
/// load the model had fitted.
constexpr unsigned kMaxRecuts = 32;
/// Last use of a value needed after the sequence: live to its end.
constexpr uint32_t kToTheEnd = std::numeric_limits<uint32_t>::max();

uint64_t alignUp(uint64_t x) {
  return (x + kActivationAlignment - 1) / kActivationAlignment * kActivationAlignment;
}

/// How a backend's compile lays out device memory, as far as a piece's footprint goes
/// (BackendCompileSpec): the rules the piece model follows so that it counts what the
/// backend's plan allocates.
struct MemoryRules {
  /// Static plan: every buffer (weights too) rounded up to the planner's alignment.
  bool planned = false;
  /// The IR pass share-buffers runs with no in-place exception: an element-wise node
  /// writes its result into an operand's buffer that dies there (same element size and
  /// count), and a Save of a buffer that dies there makes that buffer the placeholder
  /// (copy-elimination).
  bool inPlace = false;
  /// Placeholders share the activation arena, each live only while the piece uses it
  /// (BackendCompileSpec::placeholdersInArena).
  bool ioInArena = false;
};

MemoryRules memoryRulesOf(const Backend *b, const CompileOptions &opts) {
  MemoryRules r;
  if (!b)
    return r;
  BackendCompileSpec spec = b->getCompileSpec(opts.forBackend(b->getName()));
  if (!spec.staticPlan)
    return r;
  r.planned = true;
  bool shares = std::find(spec.irPasses.begin(), spec.irPasses.end(), "share-buffers") !=
                    spec.irPasses.end() &&
                std::find(spec.irPasses.begin(), spec.irPasses.end(), "copy-elimination") !=
                    spec.irPasses.end();
  r.inPlace = shares && !spec.needsOwnBuffer;
  r.ioInArena = spec.placeholdersInArena;
  return r;
}

/// The rules of \p b's compile under the options it will be compiled with.
MemoryRules memoryRulesOf(const PartitionerBackend &b) {
  return memoryRulesOf(b.backend, b.compileOptions);
}

/// A sequence of nodes in topological order (a group, or one partition), and what any
/// range [start, end) of it needs as one partition: see Sweep.
class Sequence {
public:
  /// \p liveUses: uses of each value by all live nodes of the function (a use outside
  /// the sequence keeps a value to the end and makes it an output). \p backend (may be
  /// null: no cost, no backend rules) gives the cost model and the memory rules.
  Sequence(const std::vector<Node *> &nodes, const LiveUses &liveUses,
           const PartitionerBackend *backend);

  size_t size() const { return nodes_.size(); }
  Node *node(size_t t) const { return nodes_[t]; }
  /// Bytes of the values produced before position \p p and used at or after it (0 < p < size()).
  uint64_t cutBytes(size_t p) const { return width_[p]; }

  /// The partition of nodes [start, end), grown one node at a time: its weights, the
  /// placeholders and crossing values it reads and writes, the peak of its live
  /// activations, and its cost. Adding a node costs time proportional to its operands.
  class Sweep {
  public:
    Sweep(const Sequence &s, size_t start)
        : s_(&s), start_(start), end_(start), counted_(s.numIds_, 0) {}
    size_t end() const { return end_; }
    void add();
    PartitionFootprint footprint() const {
      PartitionFootprint f;
      f.weightBytes = weights_;
      f.activationBytes = peak_;
      if (s_->rules_.ioInArena)
        f.ioInActivations = true; // counted in the peak, while live
      else
        f.ioBytes = ioRegion_ + outRegion_;
      return f;
    }
    /// A part of the footprint that never shrinks as nodes are added.
    uint64_t lowerBound() const {
      return weights_ + peak_ + (s_->rules_.ioInArena ? 0 : ioRegion_);
    }
    double cost() const {
      uint64_t io = placeholders_ + in_ + out_;
      return seconds_ + (s_->backend_ ? s_->backend_->estimateTransferSeconds(io) : 0.0);
    }

  private:
    const Sequence *s_;
    size_t start_, end_;
    std::vector<char> counted_;
    uint64_t weights_ = 0, placeholders_ = 0, in_ = 0, out_ = 0, live_ = 0, peak_ = 0;
    /// Inputs, then outputs, as the plan lays them out (aligned when planned).
    uint64_t ioRegion_ = 0, outRegion_ = 0;
    double seconds_ = 0;
  };

private:
  enum class From { Constant, Placeholder, Outside, Inside };
  struct Operand {
    uint32_t id;   ///< Distinct per value of the function.
    uint32_t prod; ///< Inside: its producer's position.
    uint64_t bytes;
    From from;
    bool written = false; ///< A Save's destination.
  };
  /// Bytes produced at position prod that stop counting after some node.
  struct Release {
    uint32_t prod;
    uint64_t bytes;
    int root = -1; ///< The activation buffer (frees_ only).
  };
  /// An activation an element-wise node may write its result into (see the constructor).
  struct InPlace {
    int root = -1;
    uint32_t prod = 0;
    uint64_t bytes = 0;
  };
  std::vector<Node *> nodes_;
  const Backend *backend_;
  size_t numIds_ = 0;
  std::vector<std::vector<Operand>> operands_; ///< Distinct operands of each node.
  std::vector<uint64_t> ownBytes_;             ///< Activation bytes each node allocates.
  std::vector<uint64_t> outBytes_;             ///< Bytes of its results used after it.
  std::vector<uint64_t> outRegion_;            ///< The same as the plan lays them out.
  std::vector<std::vector<Release>> frees_;    ///< Activations dead after each node.
  std::vector<std::vector<Release>> lastUses_; ///< Values whose last use is each node.
  std::vector<InPlace> inPlace_;               ///< Per node (root -1: none).
  /// ioInArena: per node, the values read from outside the piece (placeholders, values of
  /// other pieces) whose last use in the sequence it is, and their aligned bytes.
  std::vector<std::vector<std::pair<uint32_t, uint64_t>>> lastReads_;
  MemoryRules rules_;
  std::vector<double> seconds_;
  std::vector<uint64_t> width_;

  // The constructor's phases: each node's operands (and the buffers its result could
  // overwrite in place), then its results; the last reads from outside (ioInArena); the
  // values' lifetimes: outputs, releases, in-place reuse and the cut widths.
  struct Scan;
  void scanOperands(uint32_t t, Scan &scan);
  void scanResults(uint32_t t, Scan &scan);
  void findLastReads();
  void findLifetimes(const LiveUses &liveUses, Scan &scan);
};

/// What the constructor gathers while it scans the sequence: positions, value ids, and
/// the values produced inside with the activation buffers ("roots") they live in.
struct Sequence::Scan {
  std::unordered_map<const Node *, uint32_t> pos;
  std::unordered_map<NodeValue, uint32_t, NodeValueHash> ids;
  uint32_t idOf(NodeValue v) {
    auto it = ids.emplace(v, uint32_t(ids.size())).first;
    return it->second;
  }
  // Values produced inside: last use (inside, and kToTheEnd when used outside too), uses
  // inside, and the activation buffer ("root") they live in: a Reshape is a view.
  struct Produced {
    uint32_t prod, lastInside, uses = 0;
    int root;
    uint64_t bytes;
  };
  std::unordered_map<NodeValue, Produced, NodeValueHash> produced;
  std::vector<uint64_t> rootBytes;
  std::vector<uint32_t> rootProd, rootLast;
  // Per node: the roots of its operands that its result could overwrite in place.
  std::vector<std::vector<int>> inPlaceCands;
};

Sequence::Sequence(const std::vector<Node *> &nodes, const LiveUses &liveUses,
                   const PartitionerBackend *backend)
    : backend_(backend ? backend->backend : nullptr),
      rules_(backend ? memoryRulesOf(*backend) : MemoryRules()) {
  for (Node *n : nodes)
    if (!isa<Storage>(n))
      nodes_.push_back(n);
  const size_t N = nodes_.size();
  Scan scan;
  for (size_t t = 0; t < N; t++)
    scan.pos[nodes_[t]] = uint32_t(t);
  scan.inPlaceCands.resize(N);
  operands_.resize(N);
  ownBytes_.assign(N, 0);
  outBytes_.assign(N, 0);
  outRegion_.assign(N, 0);
  frees_.resize(N);
  lastUses_.resize(N);
  seconds_.assign(N, 0);
  for (uint32_t t = 0; t < N; t++) {
    scanOperands(t, scan);
    scanResults(t, scan);
    seconds_[t] = backend_ ? backend_->estimateNodeSeconds(*nodes_[t]) : 0.0;
  }
  numIds_ = scan.ids.size();
  if (rules_.ioInArena)
    findLastReads();
  findLifetimes(liveUses, scan);
}

void Sequence::scanOperands(uint32_t t, Scan &scan) {
  Node *n = nodes_[t];
  for (unsigned k = 0; k < n->getNumInputs(); k++) {
    NodeValue v = n->getNthInput(k);
    Operand op;
    op.id = scan.idOf(v);
    op.prod = 0;
    op.bytes = v.getType()->sizeInBytes();
    op.written = isa<SaveNode>(n) && k == SaveNode::OutputIdx;
    if (isa<Constant>(v.node)) {
      op.from = From::Constant;
    } else if (isa<Storage>(v.node)) {
      op.from = From::Placeholder;
    } else if (scan.pos.count(v.node)) {
      op.from = From::Inside;
      Scan::Produced &p = scan.produced.at(v);
      op.prod = p.prod;
      p.lastInside = t;
      p.uses++;
      if (p.root >= 0)
        scan.rootLast[p.root] = t;
    } else {
      op.from = From::Outside;
    }
    if (rules_.inPlace && op.from == From::Inside && n->isDataParallel() && !isFree(n) &&
        n->getNumResults() == 1) {
      const Scan::Produced &p = scan.produced.at(v);
      TypeRef rt = n->getType(0);
      if (p.root >= 0 && scan.rootProd[p.root] == p.prod && !isa<ReshapeNode>(v.node) &&
          v.getType()->elemBytes() == rt->elemBytes() &&
          v.getType()->numElements() == rt->numElements())
        scan.inPlaceCands[t].push_back(p.root);
    }
    if (rules_.inPlace && rules_.ioInArena && op.from == From::Inside && isa<SaveNode>(n) &&
        k == SaveNode::InputIdx) {
      const Scan::Produced &p = scan.produced.at(v);
      if (p.root >= 0 && alignUp(v.getType()->sizeInBytes()) == scan.rootBytes[p.root])
        scan.inPlaceCands[t].push_back(p.root);
    }
    bool dup = false;
    for (const Operand &o : operands_[t])
      dup |= o.id == op.id;
    if (!dup)
      operands_[t].push_back(op);
  }
}

void Sequence::scanResults(uint32_t t, Scan &scan) {
  Node *n = nodes_[t];
  for (unsigned r = 0; r < n->getNumResults(); r++) {
    Scan::Produced p;
    p.prod = p.lastInside = t;
    p.bytes = n->getType(r)->sizeInBytes();
    if (isa<ReshapeNode>(n)) {
      NodeValue in = n->getNthInput(0);
      auto it = scan.produced.find(in);
      p.root = it == scan.produced.end() ? -1 : it->second.root;
    } else {
      p.root = int(scan.rootBytes.size());
      scan.rootBytes.push_back(alignUp(p.bytes));
      scan.rootProd.push_back(t);
      scan.rootLast.push_back(t);
      ownBytes_[t] += scan.rootBytes.back();
    }
    scan.produced.emplace(NodeValue(n, r), p);
    scan.idOf(NodeValue(n, r));
  }
}

void Sequence::findLastReads() {
  // The last read of each value a piece may get from outside; a value some node writes
  // (a Save's destination) stays to the end.
  const size_t N = nodes_.size();
  std::vector<uint32_t> last(numIds_, 0);
  std::vector<char> reads(numIds_, 0), writes(numIds_, 0);
  std::vector<uint64_t> bytes(numIds_, 0);
  for (uint32_t t = 0; t < N; t++)
    for (const Operand &op : operands_[t]) {
      if (op.from == From::Constant)
        continue;
      (op.written ? writes : reads)[op.id] = 1;
      last[op.id] = t;
      bytes[op.id] = alignUp(op.bytes);
    }
  lastReads_.resize(N);
  for (uint32_t id = 0; id < numIds_; id++)
    if (reads[id] && !writes[id])
      lastReads_[last[id]].push_back({id, bytes[id]});
}

void Sequence::findLifetimes(const LiveUses &liveUses, Scan &scan) {
  const size_t N = nodes_.size();
  std::vector<int64_t> delta(N + 1, 0);
  for (auto &[v, p] : scan.produced) {
    auto u = liveUses.find(v);
    unsigned uses = u == liveUses.end() ? 0 : u->second;
    uint32_t last = uses > p.uses ? kToTheEnd : p.lastInside;
    if (last == kToTheEnd && p.root >= 0)
      scan.rootLast[p.root] = kToTheEnd;
    if (last > p.prod)
      outBytes_[p.prod] += p.bytes;
    if (last > p.prod)
      outRegion_[p.prod] += rules_.planned ? alignUp(p.bytes) : p.bytes;
    if (last > p.prod && last != kToTheEnd)
      lastUses_[last].push_back({p.prod, p.bytes});
    if (p.lastInside > p.prod) { // crosses every position in (prod, lastInside]
      delta[p.prod + 1] += int64_t(p.bytes);
      delta[p.lastInside + 1] -= int64_t(p.bytes);
    }
  }
  for (size_t r = 0; r < scan.rootBytes.size(); r++)
    if (scan.rootLast[r] != kToTheEnd)
      frees_[scan.rootLast[r]].push_back({scan.rootProd[r], scan.rootBytes[r], int(r)});
  inPlace_.resize(N);
  for (uint32_t t = 0; t < N; t++)
    for (int r : scan.inPlaceCands[t])
      if (scan.rootLast[r] == t) {
        inPlace_[t] = {r, scan.rootProd[r], scan.rootBytes[r]};
        break;
      }
  width_.assign(N + 1, 0);
  int64_t w = 0;
  for (size_t p = 0; p <= N; p++) {
    w += delta[p];
    width_[p] = uint64_t(w);
  }
}

void Sequence::Sweep::add() {
  const size_t t = end_++;
  const MemoryRules &rules = s_->rules_;
  const InPlace &ip = s_->inPlace_[t];
  int reused = ip.root >= 0 && ip.prod >= start_ ? ip.root : -1;
  for (const Operand &op : s_->operands_[t]) {
    if (op.from == From::Inside && op.prod >= start_)
      continue; // computed here
    if (counted_[op.id])
      continue;
    counted_[op.id] = 1;
    uint64_t bytes = rules.planned ? alignUp(op.bytes) : op.bytes;
    if (op.from == From::Constant) {
      weights_ += bytes;
      continue;
    }
    if (op.from == From::Placeholder)
      placeholders_ += op.bytes;
    else
      in_ += op.bytes; // produced by another partition: read from a placeholder
    ioRegion_ += bytes;
    if (!rules.ioInArena)
      continue;
    if (op.written) {
      // A Save's destination, live from here to the end; it takes over the saved buffer
      // when that dies here.
      if (reused < 0)
        live_ += bytes;
    } else {
      // Copied in before the piece starts: live at every position so far.
      live_ += bytes;
      peak_ += bytes;
    }
  }
  live_ += s_->ownBytes_[t] - (reused >= 0 && !isa<SaveNode>(s_->nodes_[t]) ? ip.bytes : 0);
  peak_ = std::max(peak_, live_);
  for (const Release &r : s_->frees_[t])
    if (r.prod >= start_ && r.root != reused)
      live_ -= r.bytes;
  if (rules.ioInArena)
    for (const auto &[id, bytes] : s_->lastReads_[t])
      if (counted_[id])
        live_ -= bytes;
  out_ += s_->outBytes_[t];
  outRegion_ += s_->outRegion_[t];
  for (const Release &r : s_->lastUses_[t])
    if (r.prod >= start_)
      out_ -= r.bytes, outRegion_ -= s_->rules_.planned ? alignUp(r.bytes) : r.bytes;
  seconds_ += s_->seconds_[t];
}

/// The footprint and cost of all of \p seq as one partition.
std::pair<PartitionFootprint, double> measureAll(const Sequence &seq) {
  Sequence::Sweep sw(seq, 0);
  while (sw.end() < seq.size())
    sw.add();
  return {sw.footprint(), sw.cost()};
}

/// The groups of one backend, in stage order, as one sequence of positions cut into
/// consecutive device loads that each fit one device: a load that spans the end of a
/// group holds a partition of each group it covers. Loads start only at group
/// boundaries and inside the groups that may be cut.
class DeviceCutter {
public:
  /// \p banned: device loads [start, end) known not to fit (by the backend's own plan).
  DeviceCutter(const std::vector<const Sequence *> &groups, const std::vector<bool> &divisible,
               uint64_t capacity, const std::set<std::pair<size_t, size_t>> *banned = nullptr);
  /// The fewest device loads that fit (always possible when every node fits alone).
  unsigned minDevices() const { return minDevices_; }
  /// The slowest load of the best cut into at most \p k loads (infinity: none fits).
  double bottleneck(unsigned k);
  /// Start positions of the loads of the cut into at most \p k loads whose slowest load is
  /// within kBalanceSlack of bottleneck(k) and whose crossing bytes are fewest.
  std::vector<size_t> cut(unsigned k);
  /// The group of position \p p and its position in that group.
  std::pair<size_t, size_t> locate(size_t p) const {
    size_t g = std::upper_bound(offset_.begin(), offset_.end(), p) - offset_.begin() - 1;
    return {g, p - offset_[g]};
  }
  size_t size() const { return offset_.back(); }
  /// What the load of positions [start, end) needs: the footprints of its partitions (one
  /// per group it covers), summed.
  PartitionFootprint loadFootprint(size_t start, size_t end) const;
  /// The first and last node of positions [start, end).
  std::pair<const Node *, const Node *> ends(size_t start, size_t end) const {
    auto [g0, t0] = locate(start);
    auto [g1, t1] = locate(end - 1);
    return {groups_[g0]->node(t0), groups_[g1]->node(t1)};
  }

private:
  struct Segment {
    uint32_t end; ///< Index in cand_.
    double cost;
  };
  /// Bytes crossing a cut at position \p p: none at a group boundary (those values cross
  /// anyway).
  uint64_t cutBytes(size_t p) const {
    auto [g, t] = locate(p);
    return t == 0 ? 0 : groups_[g]->cutBytes(t);
  }

  std::vector<const Sequence *> groups_;
  std::vector<size_t> offset_;             ///< First position of each group, then the end.
  std::vector<size_t> cand_;               ///< Where a load may start, and the end.
  std::vector<std::vector<Segment>> fits_; ///< From each candidate: the loads that fit.
  std::vector<std::vector<double>> best_;  ///< best_[k][b]: slowest load over k loads.
  unsigned minDevices_ = 0;
};

DeviceCutter::DeviceCutter(const std::vector<const Sequence *> &groups,
                           const std::vector<bool> &divisible, uint64_t capacity,
                           const std::set<std::pair<size_t, size_t>> *banned)
    : groups_(groups) {
  offset_.push_back(0);
  size_t inside = 0; // positions inside groups that may be cut
  for (size_t g = 0; g < groups.size(); g++) {
    offset_.push_back(offset_.back() + groups[g]->size());
    if (divisible[g] && groups[g]->size() > 1)
      inside += groups[g]->size() - 1;
  }
  // Inside long groups, the position with the fewest crossing bytes in each window.
  size_t window = std::max<size_t>(1, (inside + kMaxCutPositions - 1) / kMaxCutPositions);
  for (size_t g = 0; g < groups.size(); g++) {
    cand_.push_back(offset_[g]);
    const Sequence &seq = *groups[g];
    if (!divisible[g])
      continue;
    for (size_t lo = 1; lo < seq.size(); lo += window) {
      size_t bestT = lo;
      for (size_t t = lo; t < std::min(seq.size(), lo + window); t++)
        if (seq.cutBytes(t) < seq.cutBytes(bestT))
          bestT = t;
      cand_.push_back(offset_[g] + bestT);
    }
  }
  cand_.push_back(offset_.back());
  const size_t M = cand_.size();
  fits_.resize(M);
  for (size_t a = 0; a + 1 < M; a++) {
    // Loads from cand_[a]: the partitions of the groups it has passed, then the one being
    // grown.
    auto [g, t] = locate(cand_[a]);
    std::unique_ptr<Sequence::Sweep> sw(new Sequence::Sweep(*groups_[g], t));
    uint64_t doneBytes = 0;
    double doneCost = 0;
    size_t p = cand_[a];
    for (size_t b = a + 1; b < M; b++) {
      for (; p < cand_[b]; p++) {
        if (p == offset_[g + 1]) { // the next group: a partition of its own
          doneBytes += sw->footprint().total();
          doneCost += sw->cost();
          g++;
          sw.reset(new Sequence::Sweep(*groups_[g], 0));
        }
        sw->add();
      }
      if (doneBytes + sw->lowerBound() > capacity)
        break;
      if (doneBytes + sw->footprint().total() <= capacity &&
          !(banned && banned->count({cand_[a], cand_[b]})))
        fits_[a].push_back({uint32_t(b), doneCost + sw->cost()});
    }
  }
  std::vector<unsigned> fewest(M, std::numeric_limits<unsigned>::max());
  fewest[0] = 0;
  for (size_t a = 0; a < M; a++)
    if (fewest[a] != std::numeric_limits<unsigned>::max())
      for (const Segment &s : fits_[a])
        fewest[s.end] = std::min(fewest[s.end], fewest[a] + 1);
  minDevices_ = fewest[M - 1];
  best_.push_back(std::vector<double>(M, std::numeric_limits<double>::infinity()));
  best_[0][0] = 0;
}

PartitionFootprint DeviceCutter::loadFootprint(size_t start, size_t end) const {
  PartitionFootprint sum;
  for (size_t p = start; p < end;) {
    auto [g, t] = locate(p);
    Sequence::Sweep sw(*groups_[g], t);
    size_t stop = std::min(end, offset_[g + 1]);
    for (; p < stop; p++)
      sw.add();
    PartitionFootprint f = sw.footprint();
    sum.weightBytes += f.weightBytes;
    sum.ioBytes += f.ioBytes;
    sum.activationBytes += f.activationBytes;
    sum.ioInActivations |= f.ioInActivations;
  }
  return sum;
}

double DeviceCutter::bottleneck(unsigned k) {
  const size_t M = cand_.size();
  while (best_.size() <= k) {
    const std::vector<double> &prev = best_.back();
    std::vector<double> next(M, std::numeric_limits<double>::infinity());
    for (size_t a = 0; a < M; a++)
      if (prev[a] != std::numeric_limits<double>::infinity())
        for (const Segment &s : fits_[a])
          next[s.end] = std::min(next[s.end], std::max(prev[a], s.cost));
    best_.push_back(std::move(next));
  }
  double b = std::numeric_limits<double>::infinity();
  for (unsigned j = 1; j <= k; j++)
    b = std::min(b, best_[j].back());
  return b;
}

std::vector<size_t> DeviceCutter::cut(unsigned k) {
  const size_t M = cand_.size();
  const double limit = bottleneck(k) * (1 + kBalanceSlack) * (1 + 1e-12);
  // Per number of loads: fewest crossing bytes, then the slowest load.
  struct State {
    uint64_t bytes = std::numeric_limits<uint64_t>::max();
    double slowest = 0;
    uint32_t from = 0;
  };
  std::vector<std::vector<State>> dp(k + 1, std::vector<State>(M));
  dp[0][0].bytes = 0;
  for (unsigned j = 0; j < k; j++)
    for (size_t a = 0; a < M; a++) {
      const State &s = dp[j][a];
      if (s.bytes == std::numeric_limits<uint64_t>::max())
        continue;
      uint64_t crossing = s.bytes + (a ? cutBytes(cand_[a]) : 0);
      for (const Segment &seg : fits_[a]) {
        if (seg.cost > limit)
          continue;
        State &t = dp[j + 1][seg.end];
        double slowest = std::max(s.slowest, seg.cost);
        if (crossing < t.bytes || (crossing == t.bytes && slowest < t.slowest)) {
          t.bytes = crossing;
          t.slowest = slowest;
          t.from = uint32_t(a);
        }
      }
    }
  unsigned bestJ = 0;
  for (unsigned j = 1; j <= k; j++) {
    const State &s = dp[j][M - 1];
    if (s.bytes == std::numeric_limits<uint64_t>::max())
      continue;
    const State &b = dp[bestJ][M - 1];
    if (!bestJ || s.bytes < b.bytes || (s.bytes == b.bytes && s.slowest < b.slowest))
      bestJ = j;
  }
  std::vector<size_t> starts;
  for (size_t b = M - 1; bestJ > 0; bestJ--) {
    b = dp[bestJ][b].from;
    starts.push_back(cand_[b]);
  }
  std::reverse(starts.begin(), starts.end());
  return starts;
}

/// The footprint of \p n as a partition of its own (what Sequence would say).
uint64_t aloneBytes(const Node *n, const LiveUses &liveUses, const MemoryRules &rules) {
  uint64_t bytes = 0;
  std::vector<NodeValue> seen;
  for (unsigned i = 0; i < n->getNumInputs(); i++) {
    NodeValue v = n->getNthInput(i);
    if (std::find(seen.begin(), seen.end(), v) != seen.end())
      continue;
    seen.push_back(v);
    bytes += v.getType()->sizeInBytes();
  }
  for (unsigned r = 0; r < n->getNumResults(); r++) {
    uint64_t b = n->getType(r)->sizeInBytes();
    if (!isFree(n))
      bytes += alignUp(b);
    auto u = liveUses.find(NodeValue(const_cast<Node *>(n), r));
    if (u != liveUses.end() && u->second && !rules.ioInArena) // else the output is that buffer
      bytes += b;
  }
  return bytes;
}

/// \p b (at least 1024) in KiB, MiB, GiB or TiB, whichever keeps it below 1000 at three
/// significant digits: "12.9 KiB", "0.981 MiB" (never "1e+03 KiB").
std::string scaledBytes(uint64_t b) {
  static const char *const units[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = double(b) / 1024.0;
  unsigned u = 0;
  while (u + 1 < 4 && v >= 999.5) {
    v /= 1024.0;
    u++;
  }
  std::ostringstream os;
  os.precision(3);
  os << v << " " << units[u];
  return os.str();
}

/// "256 bytes", "9.77 KiB (10000 bytes)".
std::string humanBytes(uint64_t b) {
  if (b < 1024)
    return std::to_string(b) + " bytes";
  return scaledBytes(b) + " (" + std::to_string(b) + " bytes)";
}

/// The activations and the inputs and outputs of \p f, in words.
std::string memoryParts(const PartitionFootprint &f) {
  if (f.ioInActivations)
    return "activations with the inputs and outputs, each while live, at their planned peak " +
           humanBytes(f.activationBytes);
  return "activations at their planned peak " + humanBytes(f.activationBytes) +
         ", inputs and outputs " + humanBytes(f.ioBytes);
}

/// "144 B", "3.2 KiB", "24.1 MiB".
std::string shortBytes(uint64_t b) {
  return b < 1024 ? std::to_string(b) + " B" : scaledBytes(b);
}

/// "3 ns", "12.3 us", "4.56 ms", "1.2 s" (the unit that keeps it below 1000).
std::string seconds(double s) {
  std::ostringstream os;
  os.precision(3);
  if (s * 1e9 < 999.5)
    os << s * 1e9 << " ns";
  else if (s * 1e6 < 999.5)
    os << s * 1e6 << " us";
  else if (s * 1e3 < 999.5)
    os << s * 1e3 << " ms";
  else
    os << s << " s";
  return os.str();
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
  std::vector<int> devices; ///< Partition::device of each part (empty: -1).
  /// Per part cut to fit a backend's devices: the backend's index and the positions
  /// [start, end) of its device load among that backend's groups (loads that fit whole:
  /// all of them).
  std::vector<std::tuple<unsigned, size_t, size_t>> loads;
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
  std::vector<MemoryRules> rules;
  for (const PartitionerBackend &b : backends)
    rules.push_back(memoryRulesOf(b));
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
      uint64_t need = aloneBytes(n, liveUses, rules[b]);
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

/// Which of \p groups may be cut inside on devices of \p capacity bytes: those that do not
/// fit one device whole (the rule of cutToFit).
std::vector<bool> divisibleAt(const std::vector<uint64_t> &groupBytes, uint64_t capacity) {
  std::vector<bool> d;
  for (uint64_t bytes : groupBytes)
    d.push_back(bytes > capacity);
  return d;
}

/// The error for the groups of backend \p b that cannot be cut into \p limit device loads
/// that each fit one device: the bytes needed against those the devices hold, the fewest
/// devices it takes, the smallest device memory that \p limit loads would need (with the
/// largest load of that cut: its nodes, weights, activations and I/O), and the largest
/// node (which cannot be cut).
Error shortfall(const Function &f, const PartitionerBackend &b, unsigned limit,
                const std::vector<const Sequence *> &groups, unsigned fewest,
                const LiveUses &liveUses) {
  PartitionFootprint need;
  uint64_t largest = 0;
  const Node *largestNode = nullptr;
  std::vector<uint64_t> groupBytes;
  for (const Sequence *seq : groups) {
    PartitionFootprint g = measureAll(*seq).first;
    groupBytes.push_back(g.total());
    need.weightBytes += g.weightBytes;
    need.ioBytes += g.ioBytes;
    need.activationBytes += g.activationBytes;
    need.ioInActivations |= g.ioInActivations;
    for (size_t t = 0; t < seq->size(); t++) {
      uint64_t alone = aloneBytes(seq->node(t), liveUses, memoryRulesOf(b));
      if (alone > largest) {
        largest = alone;
        largestNode = seq->node(t);
      }
    }
  }
  // The smallest device memory with which `limit` loads fit: more than the devices have,
  // at most everything on one device (always fits).
  uint64_t lo = b.deviceMemory, hi = std::max(need.total(), b.deviceMemory + 1);
  while (hi - lo > 1) {
    uint64_t mid = lo + (hi - lo) / 2;
    if (DeviceCutter(groups, divisibleAt(groupBytes, mid), mid).minDevices() <= limit)
      hi = mid;
    else
      lo = mid;
  }
  DeviceCutter atNeed(groups, divisibleAt(groupBytes, hi), hi);
  std::vector<size_t> loads = atNeed.cut(limit);
  PartitionFootprint worst;
  std::pair<const Node *, const Node *> worstEnds{nullptr, nullptr};
  for (size_t l = 0; l < loads.size(); l++) {
    size_t end = l + 1 < loads.size() ? loads[l + 1] : atNeed.size();
    PartitionFootprint fp = atNeed.loadFootprint(loads[l], end);
    if (fp.total() > worst.total()) {
      worst = fp;
      worstEnds = atNeed.ends(loads[l], end);
    }
  }

  const std::string name = b.backend->getName();
  const uint64_t avail = uint64_t(limit) * b.deviceMemory;
  std::ostringstream os;
  os << "partitioning '" << f.getName() << "': it does not fit on " << limit << " " << name
     << " device" << (limit == 1 ? "" : "s") << " of " << humanBytes(b.deviceMemory) << " ("
     << humanBytes(avail) << " in all): it needs " << humanBytes(need.total())
     << " uncut (weights " << humanBytes(need.weightBytes) << ", " << memoryParts(need) << ")";
  if (need.total() > avail)
    os << ", " << humanBytes(need.total() - avail) << " more than the devices hold";
  else
    os << ", " << humanBytes((need.total() + limit - 1) / limit) << " per device on average, "
       << "but a piece ends only between nodes, keeps its own activations at their peak and "
          "stores each value crossing a cut on both sides";
  os << "; cut into pieces that each fit one device it takes " << fewest << " devices";
  if (limit > 1 && worstEnds.first) {
    os << "; cut into " << limit << " pieces the best cut needs devices of " << humanBytes(hi)
       << ", " << humanBytes(hi - b.deviceMemory) << " more than each has: its largest piece ('"
       << worstEnds.first->getName() << "' to '" << worstEnds.second->getName() << "') needs "
       << "weights " << humanBytes(worst.weightBytes) << ", " << memoryParts(worst);
  }
  os << "; the largest node, which cannot be cut, needs " << humanBytes(largest);
  if (largestNode)
    os << " (" << largestNode->describe() << ")";
  return makeError(ErrorCode::OutOfMemory, os.str());
}

/// For each backend: when its groups fit one device together, each stays whole on one
/// device. Otherwise its groups, in stage order, are cut into at most its device count of
/// consecutive device loads (DeviceCutter); only groups too large for one device are cut
/// inside, and a load that spans groups holds a partition of each. \p banned: per backend,
/// device loads (positions among its groups) that its own memory plan showed not to fit.
Expected<Cut> cutToFit(const Function &f,
                       const std::map<std::pair<unsigned, unsigned>, std::vector<Node *>> &groups,
                       const std::vector<PartitionerBackend> &backends, const LiveUses &liveUses,
                       const std::vector<std::set<std::pair<size_t, size_t>>> &banned) {
  std::vector<std::unique_ptr<Sequence>> seqs;
  std::vector<unsigned> backendOf;
  for (const auto &g : groups) {
    seqs.emplace_back(new Sequence(g.second, liveUses, &backends[g.first.second]));
    backendOf.push_back(g.first.second);
  }
  // Per group: its partitions' start positions, device loads and the loads' positions.
  struct Start {
    size_t t;
    int load;
    size_t loadStart, loadEnd;
  };
  std::vector<std::vector<Start>> starts(seqs.size());
  for (unsigned bi = 0; bi < backends.size(); bi++) {
    const PartitionerBackend &b = backends[bi];
    std::vector<size_t> mine;
    std::vector<const Sequence *> mySeqs;
    std::vector<bool> divisible;
    uint64_t total = 0;
    for (size_t g = 0; g < seqs.size(); g++) {
      if (backendOf[g] != bi)
        continue;
      uint64_t bytes = measureAll(*seqs[g]).first.total();
      total += bytes;
      mine.push_back(g);
      mySeqs.push_back(seqs[g].get());
      divisible.push_back(bytes > b.deviceMemory);
    }
    if (mine.empty())
      continue;
    size_t positions = 0;
    for (const Sequence *seq : mySeqs)
      positions += seq->size();
    if (total <= b.deviceMemory && !banned[bi].count({0, positions})) {
      for (size_t g : mine)
        starts[g] = {{0, 0, 0, positions}};
      continue;
    }
    if (total <= b.deviceMemory) // by the model; the backend's plan says otherwise
      divisible.assign(divisible.size(), true);
    DeviceCutter cutter(mySeqs, divisible, b.deviceMemory, &banned[bi]);
    unsigned k = b.numDevices ? b.numDevices : cutter.minDevices();
    if (cutter.minDevices() > k)
      return shortfall(f, b, k, mySeqs, cutter.minDevices(), liveUses);
    std::vector<size_t> loads = cutter.cut(k);
    // A partition starts at each load's start and at each group's start.
    for (size_t l = 0; l < loads.size(); l++) {
      size_t end = l + 1 < loads.size() ? loads[l + 1] : cutter.size();
      for (size_t p = loads[l]; p < end;) {
        auto [gi, t] = cutter.locate(p);
        starts[mine[gi]].push_back({t, int(l), loads[l], end});
        p += mySeqs[gi]->size() - t; // to the group's end
      }
    }
  }
  Cut cut;
  for (size_t g = 0; g < seqs.size(); g++) {
    const std::string name = backends[backendOf[g]].backend->getName();
    for (size_t k = 0; k < starts[g].size(); k++) {
      const Start &st = starts[g][k];
      size_t end = k + 1 < starts[g].size() ? starts[g][k + 1].t : seqs[g]->size();
      std::vector<Node *> part;
      for (size_t t = st.t; t < end; t++)
        part.push_back(seqs[g]->node(t));
      cut.parts.push_back(std::move(part));
      cut.backends.push_back(name);
      cut.devices.push_back(st.load);
      cut.loads.push_back({backendOf[g], st.loadStart, st.loadEnd});
    }
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

/// Creates a function per part of \p cut with clones of its nodes (in \p into, with
/// stand-ins for the storage they read, when given: for measuring); a value that crosses
/// into another part is saved to a new placeholder (one of plan.intermediates) that the
/// consumer reads. Sets each partition's parents, children, inputs and outputs.
Error createPartitions(Function &f, const std::string &networkName, const Cut &cut,
                       PartitionPlan &plan, Module *into = nullptr) {
  const auto &parts = cut.parts;
  std::unordered_map<const Node *, unsigned> partOf;
  for (unsigned p = 0; p < parts.size(); p++)
    for (Node *n : parts[p])
      partOf[n] = p;
  Module *m = into ? into : f.getParent();
  std::unordered_map<const Node *, Node *> cloneOf;
  for (unsigned i = 0; i < parts.size(); i++) {
    Partition p;
    std::string suffix =
        i < cut.names.size() && !cut.names[i].empty() ? cut.names[i] : "p" + std::to_string(i);
    p.function = m->createFunction(networkName + "." + suffix);
    p.name = p.function->getName();
    p.backendName = cut.backends[i];
    p.device = i < cut.devices.size() ? cut.devices[i] : -1;
    p.numNodes = parts[i].size();
    for (Node *n : parts[i])
      cloneOf[n] = p.function->addNode(n->clone());
    plan.partitions.push_back(std::move(p));
  }
  std::unordered_map<NodeValue, Placeholder *, NodeValueHash> carrier;
  std::unordered_map<const Storage *, Storage *> standIn;
  std::vector<std::set<unsigned>> parents(parts.size()), children(parts.size());
  for (unsigned i = 0; i < parts.size(); i++) {
    for (Node *n : parts[i]) {
      Node *c = cloneOf[n];
      for (unsigned k = 0; k < n->getNumInputs(); k++) {
        NodeValue v = n->getNthInput(k);
        if (auto *st = dyn_cast<Storage>(v.node)) {
          if (m != f.getParent()) { // the same storage, by name and type, in that module
            Storage *&own = standIn[st];
            if (!own)
              own = isa<Constant>(st)
                        ? static_cast<Storage *>(m->createConstant(st->getType(), st->getName()))
                        : static_cast<Storage *>(m->createPlaceholder(st->getType(), st->getName()));
            c->setNthInput(k, NodeValue(own, v.resNo));
          }
          continue;
        }
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

/// True for a backend whose devices are charged what its compile's static memory plan
/// lays out (the partitioner measures its partitions with Backend::planIR); a device of
/// unbounded memory needs no measuring.
bool chargedByPlan(const PartitionerBackend &b) {
  return memoryRulesOf(b).planned &&
         b.deviceMemory != std::numeric_limits<uint64_t>::max();
}

/// What a function takes on a device: the regions of the memory plan \p P its compile
/// makes (Backend::preparePlan runs the same schedule, IR passes and planner as
/// Backend::compile, under the options of that compile).
PartitionFootprint plannedFootprint(const PlannedIR &P) {
  PartitionFootprint fp;
  fp.weightBytes = P.plan.constantBytes;
  fp.ioBytes = P.plan.mutableBytes;
  fp.activationBytes = P.plan.activationBytes;
  fp.ioInActivations = P.plan.placeholdersInArena;
  return fp;
}

/// True when \p b's pieces are counted with buffer reuse (in place, placeholders in the
/// arena): the model may then count less than the plan where the planner or the schedule
/// does worse than the model, so the cut is checked against the plan before it is kept.
bool checkedAgainstPlan(const PartitionerBackend &b) {
  MemoryRules r = memoryRulesOf(b);
  return chargedByPlan(b) && (r.inPlace || r.ioInArena);
}

/// Builds the partitions of \p cut in a scratch module, measures those of backends
/// checkedAgainstPlan, and adds each device load that does not fit its device to \p banned;
/// true when it added any. A cut that leaves \p f whole measures \p f itself, and its plan
/// is kept in \p whole for the partition that compiles it.
Expected<bool> banLoadsThatDoNotFit(Function &f, const std::string &networkName, const Cut &cut,
                                    const std::vector<PartitionerBackend> &backends,
                                    std::vector<std::set<std::pair<size_t, size_t>>> &banned,
                                    PreparedPlan &whole) {
  whole = PreparedPlan();
  bool measure = false;
  for (const auto &load : cut.loads)
    measure |= checkedAgainstPlan(backends[std::get<0>(load)]);
  if (!measure)
    return false;
  Module scratch;
  PartitionPlan parts;
  std::vector<Function *> fns;
  if (cut.parts.size() == 1) {
    fns.push_back(&f); // compiled as it is
  } else {
    KILN_RETURN_IF_ERR(createPartitions(f, networkName, cut, parts, &scratch));
    for (const Partition &p : parts.partitions)
      fns.push_back(p.function);
  }
  std::map<std::tuple<unsigned, size_t, size_t>, uint64_t> loadBytes;
  for (size_t i = 0; i < cut.parts.size(); i++) {
    const PartitionerBackend &b = backends[std::get<0>(cut.loads[i])];
    if (!checkedAgainstPlan(b))
      continue;
    KILN_ASSIGN_OR_RETURN(PreparedPlan P, b.backend->preparePlan(fns[i], b.compileOptions));
    loadBytes[cut.loads[i]] += plannedFootprint(*P.ir).total();
    if (fns[i] == &f)
      whole = std::move(P);
  }
  bool added = false;
  for (const auto &[load, bytes] : loadBytes) {
    auto [bi, start, end] = load;
    if (bytes > backends[bi].deviceMemory)
      added |= banned[bi].insert({start, end}).second;
  }
  return added;
}

} // namespace

std::vector<unsigned> packDeviceLoads(const std::vector<uint64_t> &loadBytes,
                                      const std::vector<uint64_t> &freeBytes) {
  const size_t L = loadBytes.size(), D = freeBytes.size();
  if (!L)
    return {};
  if (!D)
    return {};
  std::vector<size_t> order(L);
  for (size_t i = 0; i < L; i++)
    order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return loadBytes[a] > loadBytes[b]; });
  std::vector<uint64_t> room = freeBytes;
  std::vector<unsigned> at(L, 0);
  // Depth-first over the loads in that order; at each load the devices are tried most
  // room first, skipping a device with the same room as one already tried (the same
  // subproblem).
  constexpr size_t kMaxSteps = 1000000;
  size_t steps = 0;
  std::function<bool(size_t)> place = [&](size_t k) -> bool {
    if (k == L)
      return true;
    if (++steps > kMaxSteps)
      return false;
    const size_t i = order[k];
    std::vector<unsigned> devs(D);
    for (unsigned d = 0; d < D; d++)
      devs[d] = d;
    std::stable_sort(devs.begin(), devs.end(),
                     [&](unsigned a, unsigned b) { return room[a] > room[b]; });
    std::vector<uint64_t> tried;
    for (unsigned d : devs) {
      if (room[d] < loadBytes[i])
        break; // the rest have less room
      if (std::find(tried.begin(), tried.end(), room[d]) != tried.end())
        continue;
      tried.push_back(room[d]);
      room[d] -= loadBytes[i];
      at[i] = d;
      if (place(k + 1))
        return true;
      room[d] += loadBytes[i];
    }
    return false;
  };
  if (!place(0))
    return {};
  return at;
}

Expected<PartitionFootprint> estimateFootprint(Function &f) {
  KILN_ASSIGN_OR_RETURN(std::vector<Node *> order, scheduleTopologically(&f));
  LiveUses liveUses = countLiveUses(order);
  return measureAll(Sequence(order, liveUses, nullptr)).first;
}

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
  for (Partition &p : partitions) // their IR refers to the functions
    p.prepared.ir.reset();
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
       << humanBytes(p.memoryBytes) << "\n    memory:  weights " << shortBytes(p.footprint.weightBytes)
       << (p.footprint.ioInActivations ? ", activations with I/O " : ", activations ")
       << shortBytes(p.footprint.activationBytes);
    if (!p.footprint.ioInActivations)
      os << ", I/O " << shortBytes(p.footprint.ioBytes);
    os << "; cost " << seconds(p.costSeconds) << "\n";
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
      os << (j ? ", " : "") << p.parents[j]
         << (j < p.parentBytes.size() ? " (" + shortBytes(p.parentBytes[j]) + ")" : "");
    os << "\n    inputs:  " << names(p.inputs) << "\n    outputs: " << names(p.outputs) << "\n";
  }
  return os.str();
}

namespace {

/// \p s inside a double-quoted DOT string: quotes and backslashes escaped, a line break
/// as DOT's \n.
std::string dotQuoted(const std::string &s) {
  std::string out;
  for (char c : s) {
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    if (c == '"' || c == '\\')
      out += '\\';
    out += c;
  }
  return out;
}

} // namespace

std::string PartitionPlan::toDot() const {
  std::ostringstream os;
  os << "digraph \"" << dotQuoted(networkName) << "\" {\n  rankdir=TB;\n  node [shape=box];\n";
  for (size_t i = 0; i < partitions.size(); i++) {
    const Partition &p = partitions[i];
    os << "  p" << i << " [label=\"" << dotQuoted(p.name) << "\\n" << dotQuoted(p.backendName);
    for (const std::string &d : p.devices)
      os << " " << dotQuoted(d);
    os << "\\n"
       << p.numNodes << (p.numNodes == 1 ? " node, " : " nodes, ") << p.memoryBytes
       << " bytes\"];\n";
  }
  for (size_t i = 0; i < partitions.size(); i++)
    for (unsigned c : partitions[i].children) {
      std::string label;
      for (Placeholder *ph : partitions[i].outputs)
        if (std::count(partitions[c].inputs.begin(), partitions[c].inputs.end(), ph))
          label += (label.empty() ? "" : "\\n") + dotQuoted(ph->getName()) + " " +
                   dotQuoted(ph->getType()->toString());
      os << "  p" << i << " -> p" << c << " [label=\"" << label << "\"];\n";
    }
  os << "}\n";
  return os.str();
}

namespace {

/// Phase 1: which nodes go together, on which backend. The model of a piece's memory
/// follows the backend's rules but is not its planner; cuts whose device loads its plan
/// shows not to fit are banned and the cut made again. \p whole receives the plan of f when
/// the cut measured it whole.
Expected<Cut> cutFunction(Function *f, const std::string &networkName,
                          const std::vector<Node *> &order,
                          const std::vector<PartitionerBackend> &backends,
                          const PartitionConfig *user, const ByName &byName,
                          const LiveUses &liveUses, PreparedPlan &whole) {
  if (user)
    return cutUserPartition(order, *user, byName);
  KILN_ASSIGN_OR_RETURN(auto backendOf, placeNodes(*f, order, backends, liveUses));
  auto groups = groupByStage(order, backendOf);
  std::vector<std::set<std::pair<size_t, size_t>>> banned(backends.size());
  for (unsigned attempt = 0;; attempt++) {
    KILN_ASSIGN_OR_RETURN(Cut cut, cutToFit(*f, groups, backends, liveUses, banned));
    KILN_ASSIGN_OR_RETURN(bool recut,
                          banLoadsThatDoNotFit(*f, networkName, cut, backends, banned, whole));
    if (!recut)
      return cut;
    if (attempt == kMaxRecuts)
      return makeError(ErrorCode::OutOfMemory, "partitioning '", f->getName(), "': after ",
                       kMaxRecuts + 1, " cuts whose pieces the model fitted but the ",
                       "backends' memory plans did not, no cut fits");
  }
}

/// Phase 3: each partition's size and cost (by the rule the cuts were made with, or the
/// plan its compile takes over where the backend is charged by plan), the bytes it reads
/// from its parents, and a check that it fits one device alone.
Error sizePartitions(PartitionPlan &plan, const Cut &cut, const ByName &byName,
                     const LiveUses &liveUses, PreparedPlan &whole) {
  std::unordered_map<const Placeholder *, unsigned> producer;
  for (unsigned i = 0; i < plan.partitions.size(); i++)
    for (Placeholder *ph : plan.partitions[i].outputs)
      producer[ph] = i;
  for (unsigned i = 0; i < plan.partitions.size(); i++) {
    Partition &p = plan.partitions[i];
    const PartitionerBackend &b = *byName.at(p.backendName);
    std::tie(p.footprint, p.costSeconds) = measureAll(Sequence(cut.parts[i], liveUses, &b));
    if (chargedByPlan(b)) { // what its device will hold: the plan its compile takes over
      if (whole.ir && whole.function == p.function && whole.backend == p.backendName) {
        p.prepared = std::move(whole);
      } else {
        KILN_ASSIGN_OR_RETURN(p.prepared, b.backend->preparePlan(p.function, b.compileOptions));
      }
      p.footprint = plannedFootprint(*p.prepared.ir);
    }
    p.memoryBytes = p.footprint.total();
    if (p.memoryBytes > b.deviceMemory)
      return makeError(ErrorCode::OutOfMemory, "partition '", p.name, "' of network '",
                       plan.networkName, "' needs ", p.memoryBytes, " bytes but a ",
                       p.backendName, " device has ", b.deviceMemory);
    p.parentBytes.assign(p.parents.size(), 0);
    for (Placeholder *ph : p.inputs) {
      auto it = producer.find(ph);
      if (it == producer.end())
        continue;
      auto at = std::find(p.parents.begin(), p.parents.end(), it->second);
      if (at != p.parents.end())
        p.parentBytes[at - p.parents.begin()] += ph->getType()->sizeInBytes();
    }
  }
  return Error::success();
}

/// Phase 4: the partitions of each backend, all together, placed on its devices as the
/// Provisioner places them (packDeviceLoads): partitions with one device number together,
/// the others alone.
Error checkDeviceLoads(const Function &f, const PartitionPlan &plan,
                       const std::vector<PartitionerBackend> &backends) {
  for (const PartitionerBackend &b : backends) {
    if (!b.numDevices)
      continue;
    std::map<int, uint64_t> planned;
    std::vector<std::pair<uint64_t, std::string>> loads;
    uint64_t total = 0;
    for (const Partition &p : plan.partitions) {
      if (p.backendName != b.backend->getName())
        continue;
      total += p.memoryBytes;
      if (p.device >= 0)
        planned[p.device] += p.memoryBytes;
      else
        loads.push_back({p.memoryBytes, "partition '" + p.name + "'"});
    }
    for (const auto &kv : planned)
      loads.push_back({kv.second, "device load " + std::to_string(kv.first)});
    std::vector<uint64_t> bytes;
    for (const auto &load : loads)
      bytes.push_back(load.first);
    if (loads.empty() ||
        !packDeviceLoads(bytes, std::vector<uint64_t>(b.numDevices, b.deviceMemory)).empty())
      continue;
    std::stable_sort(loads.begin(), loads.end(),
                     [](const auto &x, const auto &y) { return x.first > y.first; });
    const auto &largest = loads.front();
    std::ostringstream sizes;
    for (size_t i = 0; i < loads.size(); i++)
      sizes << (i ? ", " : "") << loads[i].second << " " << shortBytes(loads[i].first);
    return makeError(ErrorCode::OutOfMemory, "partitioning '", f.getName(), "': its ",
                     b.backend->getName(), " partitions need ", humanBytes(total),
                     " in all but cannot be placed on ", b.numDevices, " devices of ",
                     humanBytes(b.deviceMemory), " (each load on one device; the largest, ",
                     largest.second, ", needs ", humanBytes(largest.first), "): ", sizes.str());
  }
  return Error::success();
}

} // namespace

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
  ByName byName;
  for (const PartitionerBackend &b : backends)
    byName.emplace(b.backend->getName(), &b);

  LiveUses liveUses = countLiveUses(order);
  PreparedPlan whole;
  KILN_ASSIGN_OR_RETURN(Cut cut,
                        cutFunction(f, networkName, order, backends, user, byName, liveUses, whole));

  // 2. A function per partition (or the original, when nothing is split), and the network's
  // inputs and outputs.
  PartitionPlan plan;
  plan.networkName = networkName;
  plan.original = f;
  if (cut.parts.size() == 1 && !user) {
    Partition p;
    p.name = f->getName();
    p.backendName = cut.backends[0];
    p.device = cut.devices.empty() ? -1 : cut.devices[0];
    p.function = f;
    p.numNodes = cut.parts[0].size();
    collectIO(p);
    plan.partitions.push_back(std::move(p));
  } else {
    plan.created_ = true;
    KILN_RETURN_IF_ERR(createPartitions(*f, networkName, cut, plan));
  }
  setNetworkIO(plan);

  KILN_RETURN_IF_ERR(sizePartitions(plan, cut, byName, liveUses, whole));
  KILN_RETURN_IF_ERR(checkDeviceLoads(*f, plan, backends));
  return plan;
}

} // namespace kiln
