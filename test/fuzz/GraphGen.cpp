// The graph generator (GraphGen.h). Everything here is generic over the operator table: the
// only per-name knowledge is the attribute domain table (attrValue*), keyed by attribute
// name, which gives the ranges the table does not state.

#include "GraphGen.h"
#include "Oracle.h"

#include "src/ClassGen/OpTable.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace kiln::fuzz {

namespace {

const NodeKind kOperatorKinds[] = {
#define DEF_NODE(NAME) NodeKind::NAME,
#include "kiln/Graph/AutoGenNodes.def"
};

using Rng = std::mt19937_64;

/// The attribute values of one node, recorded in visit order so that a node accepted on
/// scratch operands can be rebuilt on the real ones with the same attributes.
struct AttrTape {
  struct Item {
    dim_t d = 0;
    int64_t i = 0;
    float f = 0;
    bool b = false;
    std::vector<dim_t> dv;
    std::vector<int64_t> iv;
    std::string s;
  };
  std::vector<Item> items;
};

class Replayer : public AttrVisitor {
public:
  explicit Replayer(const AttrTape &t) : t_(t) {}
  void visit(const char *, dim_t &v) override { v = t_.items[pos_++].d; }
  void visit(const char *, int64_t &v) override { v = t_.items[pos_++].i; }
  void visit(const char *, float &v) override { v = t_.items[pos_++].f; }
  void visit(const char *, bool &v) override { v = t_.items[pos_++].b; }
  void visit(const char *, std::vector<dim_t> &v) override { v = t_.items[pos_++].dv; }
  void visit(const char *, std::vector<int64_t> &v) override { v = t_.items[pos_++].iv; }
  void visit(const char *, std::string &v) override { v = t_.items[pos_++].s; }

private:
  const AttrTape &t_;
  size_t pos_ = 0;
};

template <typename T> const T &pick(Rng &rng, const std::vector<T> &v) {
  return v[std::uniform_int_distribution<size_t>(0, v.size() - 1)(rng)];
}
int64_t uni(Rng &rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, std::max(lo, hi))(rng);
}
bool coin(Rng &rng, double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; }

dim_t numElems(const Dims &d) {
  dim_t n = 1;
  for (dim_t x : d)
    n *= x;
  return n;
}

/// The attribute domain table: values for each attribute by its name and C++ type, given
/// the node's operand types. Names not listed get a generic value of their type.
class RandomAttrs : public AttrVisitor {
public:
  RandomAttrs(Rng &rng, const std::vector<TypeRef> &ops, const std::vector<dim_t> &dimPool,
              AttrTape &tape)
      : rng_(rng), ops_(ops), pool_(dimPool), tape_(tape) {}

  void visit(const char *name, dim_t &v) override {
    std::string n = name;
    const Dims *d0 = op(0);
    if (n == "Group") {
      v = 1;
      if (d0 && d0->size() >= 2 && coin(rng_, 0.6)) {
        std::vector<dim_t> divs;
        for (dim_t g = 1; g <= (*d0)[1]; g++)
          if ((*d0)[1] % g == 0)
            divs.push_back(g);
        v = pick(rng_, divs);
      }
    } else if (n == "K") {
      v = d0 && !d0->empty() ? dim_t(uni(rng_, 1, std::max<int64_t>(1, (*d0)[d0->size() - 1]))) : 1;
    } else if (n == "Axis" || n == "ChannelIdx") { // axes (normalised: 0..rank-1)
      v = d0 && !d0->empty() ? dim_t(uni(rng_, 0, int64_t(d0->size()) - 1)) : 0;
    } else if (n == "BatchDims") {
      v = dim_t(uni(rng_, 0, 1));
    } else if (n == "SamplingRatio") {
      v = dim_t(uni(rng_, 0, 2));
    } else {
      v = coin(rng_, 0.5) && !pool_.empty() ? pick(rng_, pool_) : dim_t(uni(rng_, 1, 4));
    }
    tape_.items.push_back({});
    tape_.items.back().d = v;
  }
  void visit(const char *, int64_t &v) override { // axes
    int64_t r = op(0) ? int64_t(op(0)->size()) : 1;
    v = r == 0 ? 0 : uni(rng_, -r, r - 1);
    tape_.items.push_back({});
    tape_.items.back().i = v;
  }
  void visit(const char *name, float &v) override {
    std::string n = name;
    if (n == "Epsilon")
      v = pick(rng_, std::vector<float>{1e-5f, 1e-3f, 0.1f});
    else if (n == "Alpha")
      v = pick(rng_, std::vector<float>{0.01f, 0.1f, 0.2f, 1.0f / 6, -1.0f});
    else if (n == "Beta")
      v = pick(rng_, std::vector<float>{0.5f, 1.0f, 6.0f});
    else if (n == "Min")
      v = pick(rng_, std::vector<float>{-1.0f, 0.0f, -0.5f, -INFINITY});
    else if (n == "Max")
      v = pick(rng_, std::vector<float>{1.0f, 6.0f, 0.5f, INFINITY});
    else if (n == "SpatialScale")
      v = pick(rng_, std::vector<float>{1.0f, 0.5f, 0.25f});
    else if (n == "Value")
      v = pick(rng_, std::vector<float>{0.0f, 1.0f, -1.5f, 2.0f});
    else
      v = std::uniform_real_distribution<float>(-2, 2)(rng_);
    tape_.items.push_back({});
    tape_.items.back().f = v;
  }
  void visit(const char *, bool &v) override {
    v = coin(rng_, 0.5);
    tape_.items.push_back({});
    tape_.items.back().b = v;
  }
  void visit(const char *name, std::vector<dim_t> &v) override {
    std::string n = name;
    const Dims *d0 = op(0);
    size_t r = d0 ? d0->size() : 0;
    v.clear();
    if (n == "Kernels") {
      const Dims *d1 = op(1);
      if (d1 && d1->size() == 4 && coin(rng_, 0.8))
        v = {(*d1)[2], (*d1)[3]};
      else
        v = {dim_t(uni(rng_, 1, 3)), dim_t(uni(rng_, 1, 3))};
    } else if (n == "Strides") {
      v = {dim_t(coin(rng_, 0.6) ? 1 : uni(rng_, 2, 3)), dim_t(coin(rng_, 0.6) ? 1 : uni(rng_, 2, 3))};
    } else if (n == "Dilations") {
      v = {dim_t(coin(rng_, 0.7) ? 1 : 2), dim_t(coin(rng_, 0.7) ? 1 : 2)};
    } else if (n == "Pads") {
      size_t len = coin(rng_, 0.5) ? 4 : 2 * r;
      for (size_t i = 0; i < len; i++)
        v.push_back(coin(rng_, 0.5) ? 0 : dim_t(uni(rng_, 1, 2)));
    } else if (n == "Starts") {
      starts_.clear();
      for (size_t i = 0; i < r; i++)
        starts_.push_back(coin(rng_, 0.5) ? 0 : dim_t(uni(rng_, 0, int64_t((*d0)[i]) - 1)));
      v = starts_;
    } else if (n == "Ends") {
      for (size_t i = 0; i < r; i++) {
        dim_t s = i < starts_.size() ? starts_[i] : 0;
        v.push_back(coin(rng_, 0.5) ? (*d0)[i] : dim_t(uni(rng_, int64_t(s) + 1, int64_t((*d0)[i]))));
      }
    } else if (n == "Dims") { // a new shape of the same element count
      dim_t total = d0 ? numElems(*d0) : 1;
      size_t rank = size_t(uni(rng_, 1, 4));
      for (size_t i = 0; i + 1 < rank; i++) {
        std::vector<dim_t> divs;
        for (dim_t x = 1; x <= total && x <= 64; x++)
          if (total % x == 0)
            divs.push_back(x);
        dim_t x = pick(rng_, divs);
        v.push_back(x);
        total /= x;
      }
      v.push_back(total);
      std::shuffle(v.begin(), v.end(), rng_);
    } else if (n == "Axes") { // distinct axes, in order
      for (size_t i = 0; i < r; i++)
        if (coin(rng_, 0.4))
          v.push_back(i);
      if (v.empty() && r)
        v.push_back(dim_t(uni(rng_, 0, int64_t(r) - 1)));
    } else if (n == "Shuffle") {
      for (size_t i = 0; i < r; i++)
        v.push_back(i);
      std::shuffle(v.begin(), v.end(), rng_);
    } else if (n == "Repeats") {
      for (size_t i = 0; i < r; i++)
        v.push_back(coin(rng_, 0.7) ? 1 : dim_t(uni(rng_, 2, 3)));
    } else if (n == "TargetDims") {
      if (coin(rng_, 0.3))
        v.push_back(dim_t(uni(rng_, 1, 4)));
      for (size_t i = 0; i < r; i++)
        v.push_back((*d0)[i] == 1 && coin(rng_, 0.7) ? dim_t(uni(rng_, 1, 5)) : (*d0)[i]);
    } else if (n == "Offsets") {
      const Dims *d1 = op(1);
      for (size_t i = 0; i < r; i++) {
        int64_t room = d1 && d1->size() == r ? int64_t((*d0)[i]) - int64_t((*d1)[i]) : 0;
        v.push_back(room > 0 ? dim_t(uni(rng_, 0, room)) : 0);
      }
    } else if (n == "OutputSize") {
      for (size_t i = 2; i < 4; i++)
        v.push_back(d0 && r > i ? dim_t(uni(rng_, 1, int64_t((*d0)[i]))) : 1);
    } else {
      size_t len = coin(rng_, 0.5) ? r : 2;
      for (size_t i = 0; i < len; i++)
        v.push_back(dim_t(uni(rng_, 1, 3)));
    }
    tape_.items.push_back({});
    tape_.items.back().dv = v;
  }
  void visit(const char *, std::vector<int64_t> &v) override { // Axes
    size_t r = op(0) ? op(0)->size() : 0;
    v.clear();
    for (size_t i = 0; i < r; i++)
      if (coin(rng_, 0.4))
        v.push_back(int64_t(i));
    if (v.empty() && r)
      v.push_back(uni(rng_, 0, int64_t(r) - 1));
    tape_.items.push_back({});
    tape_.items.back().iv = v;
  }
  void visit(const char *name, std::string &v) override {
    std::string n = name;
    if (n == "Activation")
      v = pick(rng_, std::vector<std::string>{"None", "Relu", "Clip", "LeakyRelu", "Sigmoid",
                                              "Tanh", "Swish", "HardSwish", "HardSigmoid",
                                              "Gelu", "GeluTanh"});
    else if (n == "Mode")
      v = pick(rng_, std::vector<std::string>{"bilinear", "nearest", "bicubic", "avg", "max"});
    else if (n == "PaddingMode")
      v = pick(rng_, std::vector<std::string>{"zeros", "border", "reflection"});
    else if (n == "Reduction")
      v = pick(rng_, std::vector<std::string>{"none", "none", "add", "mul", "max", "min"});
    else
      v = "";
    tape_.items.push_back({});
    tape_.items.back().s = v;
  }

private:
  const Dims *op(size_t i) const { return i < ops_.size() ? &ops_[i]->dims : nullptr; }
  Rng &rng_;
  const std::vector<TypeRef> &ops_;
  const std::vector<dim_t> &pool_;
  AttrTape &tape_;
  std::vector<dim_t> starts_;
};

/// A leaf to create if the node is kept: a placeholder or a constant of a type.
struct LeafSpec {
  Type type;
  bool constant = false;
};

/// One operand of a candidate: an existing value or a new leaf.
struct OperandChoice {
  NodeValue existing;
  LeafSpec leaf;
  bool isLeaf = false;
};

const std::vector<ElemKind> kLeafKinds = {ElemKind::Float,  ElemKind::Float,   ElemKind::Float,
                                          ElemKind::Float,  ElemKind::Float,   ElemKind::Float16,
                                          ElemKind::BFloat16, ElemKind::Int32I, ElemKind::Int64I,
                                          ElemKind::Int64I, ElemKind::Bool,    ElemKind::Int8Q};

class Generator {
public:
  Generator(uint64_t seed, const GenOptions &opts, GenStats *stats)
      : rng_(seed * 0x9E3779B97F4A7C15ull + 1), opts_(opts), stats_(stats),
        m_(std::make_unique<Module>()) {
    f_ = m_->createFunction("main");
    for (NodeKind k : kOperatorKinds) {
      if (k == NodeKind::Save)
        continue;
      if (!opts.kinds.empty() && !opts.kinds.count(getNodeKindName(k)))
        continue;
      kinds_.push_back(k);
    }
  }

  std::unique_ptr<Module> run() {
    unsigned target = unsigned(uni(rng_, opts_.minNodes, opts_.maxNodes));
    unsigned fails = 0;
    while (numOps_ < target && fails < 40 && !kinds_.empty()) {
      NodeKind k = pick(rng_, kinds_);
      if (!tryKind(k))
        fails++;
    }
    // Outputs: every unused result, and now and then a used one (fan-out to an output).
    std::vector<NodeValue> outs;
    for (const NodeValue &v : pool_) {
      if (isa<Storage>(v.node))
        continue;
      if (v.node->getNumUsesOf(v.resNo) == 0 || coin(rng_, 0.15))
        outs.push_back(v);
    }
    unsigned i = 0;
    for (const NodeValue &v : outs)
      f_->createSave("out" + std::to_string(i++), v);
    return std::move(m_);
  }

private:
  ElemKind randomKind() {
    return pick(rng_, opts_.leafKinds.empty() ? kLeafKinds : opts_.leafKinds);
  }

  Type leafType(ElemKind k, Dims dims) {
    if (k == ElemKind::Int8Q)
      return Type(k, dims, pick(rng_, std::vector<float>{0.01f, 0.05f, 0.125f}),
                  int32_t(uni(rng_, -10, 10)));
    return Type(k, dims);
  }

  dim_t randomDim() {
    int r = int(uni(rng_, 0, 99));
    if (r < 20)
      return 1;
    if (r < 60)
      return dim_t(uni(rng_, 2, 5));
    if (r < 80)
      return pick(rng_, std::vector<dim_t>{7, 9, 13, 17, 3, 6, 8, 16});
    if (r < 85)
      return dim_t(uni(rng_, 18, opts_.maxDim));
    return dimPool_.empty() ? 2 : pick(rng_, dimPool_);
  }

  Dims randomDims(size_t rank) {
    Dims d;
    for (size_t i = 0; i < rank; i++)
      d.push_back(randomDim());
    while (numElems(d) > opts_.maxElements) {
      size_t i = size_t(uni(rng_, 0, int64_t(rank) - 1));
      d[i] = std::max<dim_t>(1, d[i] / 2);
    }
    return d;
  }

  size_t randomRank() { return pick(rng_, std::vector<size_t>{0, 1, 1, 2, 2, 2, 3, 3, 4, 4, 4, 4}); }

  OperandChoice freshLeaf(Type t, bool first) {
    OperandChoice c;
    c.isLeaf = true;
    c.leaf.type = t;
    c.leaf.constant = coin(rng_, first ? opts_.firstLeafConstant : opts_.laterLeafConstant);
    return c;
  }

  OperandChoice chooseOperand(size_t idx, const std::vector<TypeRef> &earlier) {
    if (idx == 0 || earlier.empty()) {
      if (!pool_.empty() && coin(rng_, 0.75)) {
        OperandChoice c;
        size_t n = pool_.size();
        c.existing = coin(rng_, 0.5) ? pool_[size_t(uni(rng_, int64_t(n > 6 ? n - 6 : 0), int64_t(n) - 1))]
                                     : pick(rng_, pool_);
        return c;
      }
      return freshLeaf(leafType(randomKind(), randomDims(randomRank())), true);
    }
    const Type &e = coin(rng_, 0.5) ? *earlier.back() : *pick(rng_, earlier);
    ElemKind k = coin(rng_, 0.75) ? earlier[0]->kind : randomKind();
    int s = int(uni(rng_, 0, 99));
    if (s < 15 && !pool_.empty()) { // an existing value
      OperandChoice c;
      c.existing = pick(rng_, pool_);
      return c;
    }
    if (s < 30) { // an existing value of an earlier operand's type
      std::vector<NodeValue> same;
      for (const NodeValue &v : pool_)
        if (*v.getType() == e)
          same.push_back(v);
      if (!same.empty()) {
        OperandChoice c;
        c.existing = pick(rng_, same);
        return c;
      }
    }
    if (s < 50)
      return freshLeaf(e, false);
    if (s < 56) // a vector as long as one dimension of an earlier operand
      return freshLeaf(leafType(k, Dims{e.dims.empty() ? 1 : pick(rng_, e.dims.vec())}), false);
    if (s < 62) { // an earlier operand's dimensions with two swapped (the last two mostly)
      Dims d = e.dims;
      if (d.size() >= 2) {
        size_t a = d.size() - 2, b = d.size() - 1;
        if (coin(rng_, 0.3)) {
          a = size_t(uni(rng_, 0, int64_t(d.size()) - 1));
          b = size_t(uni(rng_, 0, int64_t(d.size()) - 1));
        }
        std::swap(d[a], d[b]);
      }
      return freshLeaf(leafType(k, d), false);
    }
    if (s < 72) { // a suffix of an earlier operand's dimensions
      size_t from = size_t(uni(rng_, 0, int64_t(e.dims.size())));
      return freshLeaf(leafType(k, Dims(std::vector<dim_t>(e.dims.begin() + from, e.dims.end()))), false);
    }
    if (s < 82) { // an earlier operand's dimensions with one changed
      Dims d = e.dims;
      if (!d.empty())
        d[size_t(uni(rng_, 0, int64_t(d.size()) - 1))] = randomDim();
      return freshLeaf(leafType(k, d), false);
    }
    // dimensions drawn from the earlier operands' and small ones
    std::vector<dim_t> vocab = {1, 2, 3};
    for (const TypeRef &t : earlier)
      for (dim_t x : t->dims)
        vocab.push_back(x);
    for (dim_t x : std::vector<dim_t>(vocab)) // the divisors too (groups)
      for (dim_t g = 2; g <= x / 2; g++)
        if (x % g == 0 && coin(rng_, 0.3))
          vocab.push_back(x / g);
    Dims d;
    size_t rank = coin(rng_, 0.5) ? e.dims.size() : randomRank();
    for (size_t i = 0; i < rank; i++)
      d.push_back(pick(rng_, vocab));
    if (numElems(d) > opts_.maxElements)
      d = {1};
    return freshLeaf(leafType(k, d), false);
  }

  /// Builds candidates of kind \p k until one is accepted or the tries run out.
  bool tryKind(NodeKind k) {
    std::unique_ptr<Node> probe(createNodeOfKind(k, "probe", {}));
    if (!probe)
      return false;
    unsigned fixed = probe->getNumFixedInputs();
    bool variadic = probe->getVariadicInputName() != nullptr;
    auto &st = stats_ ? stats_->perKind[getNodeKindName(k)] : dummy_;
    for (unsigned t = 0; t < opts_.triesPerKind; t++) {
      st.first++;
      unsigned nops = fixed;
      if (variadic)
        nops += unsigned(fixed ? uni(rng_, 0, 1) : uni(rng_, 1, 4));
      Module scratch;
      std::vector<OperandChoice> choices;
      std::vector<NodeValue> ops;
      std::vector<TypeRef> types;
      for (unsigned i = 0; i < nops; i++) {
        OperandChoice c = chooseOperand(i, types);
        if (c.isLeaf) {
          TypeRef ty = scratch.uniqueType(c.leaf.type);
          Storage *s;
          if (c.leaf.constant) {
            Tensor payload(*ty);
            fillTensor(payload);
            s = scratch.createConstant("c", std::move(payload));
          } else {
            s = scratch.createPlaceholder(ty, "p");
          }
          c.existing = NodeValue(s);
          ops.push_back(NodeValue(s));
        } else {
          ops.push_back(c.existing);
        }
        types.push_back(ops.back().getType());
        choices.push_back(std::move(c));
      }
      std::vector<dim_t> dimPool;
      for (const TypeRef &ty : types)
        for (dim_t x : ty->dims)
          dimPool.push_back(x);
      AttrTape tape;
      std::unique_ptr<Node> n(createNodeOfKind(k, "n", ops));
      {
        RandomAttrs ra(rng_, types, dimPool, tape);
        n->visitAttrs(ra);
      }
      // Result types for operators whose type is explicit (the rule checks them).
      for (unsigned r = 0; r < n->getNumResults(); r++) {
        Dims d = types.empty() || coin(rng_, 0.1) ? randomDims(randomRank()) : types[0]->dims;
        ElemKind rk = randomKind();
        n->setType(r, scratch.uniqueType(leafType(rk, d)));
      }
      Expected<std::vector<Type>> res = n->computeResultTypes();
      if (!res) {
        consumeError(res.takeError());
        continue;
      }
      bool ok = res->size() == n->getNumResults();
      for (unsigned r = 0; ok && r < res->size(); r++) {
        const Type &ty = (*res)[r];
        if (numElems(ty.dims) > opts_.maxElements || numElems(ty.dims) == 0)
          ok = false;
        else
          n->setType(r, scratch.uniqueType(ty));
      }
      if (!ok || !optable::kindsSupported(*n, optable::TableBackend::Interpreter))
        continue;
      std::vector<TypeRef> resultTypes;
      for (unsigned r = 0; r < n->getNumResults(); r++)
        resultTypes.push_back(n->getType(r));
      n.reset();
      // Accepted on scratch operands: build it for real.
      std::vector<NodeValue> realOps;
      for (OperandChoice &c : choices) {
        if (!c.isLeaf) {
          realOps.push_back(c.existing);
          continue;
        }
        TypeRef ty = m_->uniqueType(c.leaf.type);
        Storage *s;
        std::string nm = (c.leaf.constant ? "c" : "x") + std::to_string(numLeaves_++);
        if (c.leaf.constant) {
          const auto *sc = cast<Constant>(c.existing.node);
          s = m_->createConstant(nm, sc->getPayload().clone());
        } else {
          s = m_->createPlaceholder(ty, nm);
        }
        realOps.push_back(NodeValue(s));
      }
      Node *real = createNodeOfKind(k, std::string(1, char(std::tolower(getNodeKindName(k)[0]))) +
                                           std::string(getNodeKindName(k) + 1),
                                    realOps);
      Replayer rp(tape);
      real->visitAttrs(rp);
      for (unsigned r = 0; r < resultTypes.size(); r++)
        real->setType(r, m_->uniqueType(*resultTypes[r]));
      f_->addNode(real);
      if (Error e = f_->verify()) {
        consumeError(std::move(e));
        f_->eraseNode(real);
        for (const NodeValue &v : realOps) // new leaves stay unused; constants go
          if (auto *c = dyn_cast<Constant>(v.node))
            if (!c->hasUsers())
              m_->eraseConstant(c);
        continue;
      }
      st.second++;
      numOps_++;
      for (const NodeValue &v : realOps)
        if (isa<Storage>(v.node) && std::find(pool_.begin(), pool_.end(), v) == pool_.end())
          pool_.push_back(v);
      for (unsigned r = 0; r < real->getNumResults(); r++)
        pool_.push_back(NodeValue(real, r));
      for (dim_t x : dimPool)
        dimPool_.push_back(x);
      return true;
    }
    return false;
  }

  /// Constant payloads: floats in [-1, 1], integers in [-1, 1] (valid indices of any
  /// dimension as -1, 0; 1 where it is at least 2), Bool random, quantized the raw
  /// range [-20, 20].
  void fillTensor(Tensor &t) {
    for (size_t i = 0; i < t.size(); i++) {
      ElemKind k = t.getElementType();
      double v;
      if (isFloatKind(k))
        v = std::uniform_real_distribution<double>(-1, 1)(rng_);
      else if (k == ElemKind::Bool)
        v = double(uni(rng_, 0, 1));
      else if (isQuantized(k))
        v = double(uni(rng_, -20, 20));
      else
        v = double(uni(rng_, -1, 1));
      t.setFromDouble(i, v);
    }
  }

  Rng rng_;
  GenOptions opts_;
  GenStats *stats_;
  std::pair<uint64_t, uint64_t> dummy_;
  std::unique_ptr<Module> m_;
  Function *f_;
  std::vector<NodeKind> kinds_;
  std::vector<NodeValue> pool_;
  std::vector<dim_t> dimPool_;
  unsigned numOps_ = 0;
  unsigned numLeaves_ = 0;
};

} // namespace

std::unique_ptr<Module> generateGraph(uint64_t seed, const GenOptions &opts, GenStats *stats) {
  return Generator(seed, opts, stats).run();
}

GenOptions quantizableMix(const GenOptions &base) {
  GenOptions g = base;
  g.kinds = {"Convolution", "FullyConnected", "MaxPool", "AvgPool", "AdaptiveAvgPool",
             "Relu",        "Add",            "Sub",     "Mul"};
  g.leafKinds = {ElemKind::Float};
  g.firstLeafConstant = 0.1;
  g.laterLeafConstant = 0.9;
  return g;
}

std::vector<std::string> allOperatorKinds() {
  std::vector<std::string> out;
  for (NodeKind k : kOperatorKinds)
    out.push_back(getNodeKindName(k));
  return out;
}

} // namespace kiln::fuzz
