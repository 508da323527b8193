// Reduced float precision: a float32 function run in bfloat16 or float16
// (kiln/Quantization/ReducedPrecision.h).

#include "kiln/Quantization/ReducedPrecision.h"
#include "kiln/Base/Float16.h"
#include "src/ClassGen/OpTable.h"

#include <map>
#include <sstream>
#include <unordered_set>

namespace kiln {

std::string PrecisionReport::toString() const {
  std::ostringstream os;
  os << convertedNodes << " nodes converted, " << convertedConstants << " constants converted, "
     << entryConverts << " ConvertTo at region entries, " << exitConverts << " at region exits, "
     << keptFloat.size() << " nodes kept in float32";
  for (const auto &k : keptFloat)
    os << "\n  " << k.first << ": " << k.second;
  return os.str();
}

Expected<ElemKind> parsePrecision(const std::string &s) {
  if (s == "bf16" || s == "bfloat16")
    return ElemKind::BFloat16;
  if (s == "fp16" || s == "float16")
    return ElemKind::Float16;
  return makeError(ErrorCode::InvalidArgument, "unknown precision '", s,
                   "' (expected bf16 or fp16)");
}

namespace {

bool hasFloat(const Node &n) {
  for (unsigned i = 0; i < n.getNumInputs(); i++)
    if (n.getNthInput(i).getElementType() == ElemKind::Float)
      return true;
  for (unsigned r = 0; r < n.getNumResults(); r++)
    if (n.getType(r)->kind == ElemKind::Float)
      return true;
  return false;
}

Type narrowed(const Type &t, ElemKind k) { return t.kind == ElemKind::Float ? Type(k, t.dims) : t; }

/// True when the Interpreter's column of the operator table accepts \p n with every float32
/// operand and result made \p k (checked on a copy in a scratch module).
bool interpreterAccepts(const Node &n, ElemKind k) {
  Module scratch;
  Function *g = scratch.createFunction("narrow");
  Node *c = g->addNode(n.clone());
  for (unsigned i = 0; i < n.getNumInputs(); i++)
    c->setNthInput(
        i, scratch.createPlaceholder(scratch.uniqueType(narrowed(*n.getNthInput(i).getType(), k)),
                                     "in" + std::to_string(i)));
  for (unsigned r = 0; r < n.getNumResults(); r++)
    c->setType(r, scratch.uniqueType(narrowed(*n.getType(r), k)));
  return optable::kindsSupported(*c, optable::TableBackend::Interpreter);
}

/// A copy of float32 constant \p c's payload in kind \p k (round to nearest even).
Tensor narrowPayload(const Tensor &src, ElemKind k) {
  Tensor t(Type(k, src.getType().dims));
  auto in = src.getHandle<float>();
  if (k == ElemKind::BFloat16) {
    auto out = t.getHandle<bfloat16>();
    for (size_t i = 0; i < in.size(); i++)
      out.raw(i) = bfloat16(in.raw(i));
  } else {
    auto out = t.getHandle<float16>();
    for (size_t i = 0; i < in.size(); i++)
      out.raw(i) = float16(in.raw(i));
  }
  return t;
}

class Converter {
public:
  Converter(Function *f, const PrecisionOptions &o) : f_(f), m_(f->getParent()), opts_(o) {}

  Expected<PrecisionReport> run() {
    const ElemKind k = opts_.kind;
    // 1. Which nodes run in 16 bits: each is decided on its own (its kind, its name, the
    // Interpreter's column), so the regions are whatever connected sets that leaves.
    std::vector<Node *> nodes;
    for (const auto &up : f_->getNodes()) {
      Node *n = up.get();
      if (!hasFloat(*n) || isa<SaveNode>(n) || isa<ConvertToNode>(n))
        continue;
      const std::string who = n->getName() + " (" + n->getKindName() + ")";
      if (opts_.keepFloat.count(n->getKindName()) || opts_.keepFloat.count(n->getName())) {
        report_.keptFloat.push_back({who, "keep-float"});
        continue;
      }
      if (!interpreterAccepts(*n, k)) {
        report_.keptFloat.push_back(
            {who, std::string("the Interpreter has no ") + elemKindName(k) + " form"});
        continue;
      }
      nodes.push_back(n);
      converted_.insert(n);
    }
    // 2. Operands: inside a region as they are; constants narrowed once; other float32
    // values through one ConvertTo each.
    for (Node *n : nodes)
      for (unsigned i = 0; i < n->getNumInputs(); i++) {
        NodeValue v = n->getNthInput(i);
        if (v.getElementType() == ElemKind::Float && !converted_.count(v.node))
          n->setNthInput(i, enter(v));
      }
    // 3. Results: narrowed; every user outside the region reads one ConvertTo(float).
    for (Node *n : nodes) {
      for (unsigned r = 0; r < n->getNumResults(); r++) {
        TypeRef t = n->getType(r);
        if (t->kind != ElemKind::Float)
          continue;
        n->setType(r, m_->uniqueType(narrowed(*t, k)));
        std::vector<NodeUse> uses = n->getUsers();
        NodeValue back;
        for (const NodeUse &u : uses) {
          if (u.user->getNthInput(u.idx) != NodeValue(n, r) || converted_.count(u.user))
            continue;
          if (!back) {
            back = NodeValue(f_->createConvertTo(n->getName() + ".to_float", t, NodeValue(n, r)));
            report_.exitConverts++;
          }
          u.user->setNthInput(u.idx, back);
        }
      }
      report_.convertedNodes++;
    }
    f_->eraseDeadNodes();
    m_->eraseUnusedConstants();
    if (Error e = f_->verify())
      return makeError(ErrorCode::Internal,
                       "precision conversion produced an invalid graph: ", e.message());
    return report_;
  }

private:
  /// \p v (float32, produced outside every region) as a 16-bit operand.
  NodeValue enter(NodeValue v) {
    auto it = entered_.find(v);
    if (it != entered_.end())
      return it->second;
    NodeValue h;
    auto *w = dyn_cast<ConvertToNode>(v.node);
    if (w && w->getInput().getElementType() == opts_.kind) {
      // A ConvertTo(float) of a value of this kind: widening is exact, so narrowing it
      // back gives the same bits; read the source.
      h = w->getInput();
    } else if (auto *c = dyn_cast<Constant>(v.node)) {
      h = NodeValue(m_->createConstant(c->getName() + "." + elemKindName(opts_.kind),
                                       narrowPayload(c->getPayload(), opts_.kind)));
      report_.convertedConstants++;
    } else {
      h = NodeValue(f_->createConvertTo(
          (v.resNo ? v.node->getName() + ":" + std::to_string(v.resNo) : v.node->getName()) +
              ".to_" + elemKindName(opts_.kind),
          m_->uniqueType(narrowed(*v.getType(), opts_.kind)), v));
      report_.entryConverts++;
    }
    entered_[v] = h;
    return h;
  }

  Function *f_;
  Module *m_;
  const PrecisionOptions &opts_;
  PrecisionReport report_;
  std::unordered_set<const Node *> converted_;
  std::map<NodeValue, NodeValue> entered_;
};

} // namespace

Expected<PrecisionReport> convertPrecision(Function *f, const PrecisionOptions &options) {
  if (options.kind != ElemKind::BFloat16 && options.kind != ElemKind::Float16)
    return makeError(ErrorCode::InvalidArgument, "convertPrecision: kind ",
                     elemKindName(options.kind), " is not bfloat16 or float16");
  KILN_RETURN_IF_ERR(f->verify());
  return Converter(f, options).run();
}

} // namespace kiln
