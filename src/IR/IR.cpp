#include "kiln/IR/IR.h"

#include <cctype>
#include <sstream>
#include <unordered_set>

namespace kiln {

const char *operandKindName(OperandKind k) {
  switch (k) {
  case OperandKind::In:
    return "@in";
  case OperandKind::Out:
    return "@out";
  case OperandKind::InOut:
    return "@inout";
  }
  return "?";
}

const std::string &IRFunction::getName() const {
  static const std::string kAnon = "anonymous";
  if (graph_)
    return graph_->getName();
  return name_.empty() ? kAnon : name_;
}

WeightVar *IRFunction::createWeightVar(const std::string &name, TypeRef ty,
                                       WeightVar::Mutability m, Storage *origin) {
  weights_.push_back(std::make_unique<WeightVar>(name, ty, m, origin));
  WeightVar *w = weights_.back().get();
  if (origin)
    weightByStorage_[origin] = w;
  return w;
}

WeightVar *IRFunction::getWeightForStorage(const Storage *s) const {
  auto it = weightByStorage_.find(s);
  return it == weightByStorage_.end() ? nullptr : it->second;
}

void IRFunction::insertImpl(InstrList::iterator where, Instruction *inst) {
  std::string base = inst->getName().empty() ? "i" : inst->getName();
  unsigned &c = nameCounts_[base];
  if (c++)
    inst->setName(base + "__" + std::to_string(c - 1));
  inst->setParent(this);
  instrs_.emplace(where, inst);
}

dim_t viewElementOffset(const TensorViewInst *tv) {
  Dims strides = tv->getSrc()->getType()->strides();
  const auto &offs = tv->getOffsets();
  dim_t offset = 0;
  for (size_t i = 0; i < offs.size() && i < strides.size(); i++)
    offset += offs[i] * strides[i];
  return offset;
}

dim_t elementOffsetInRoot(const Value *v) {
  dim_t offset = 0;
  for (; auto *tv = dyn_cast<TensorViewInst>(v); v = tv->getSrc())
    offset += viewElementOffset(tv);
  return offset;
}

namespace {

/// The buffer an operand ultimately lives in (looking through views).
const Value *rootOf(const Value *v) {
  while (auto *tv = dyn_cast<TensorViewInst>(v))
    v = tv->getSrc();
  return v;
}

/// Names made of [A-Za-z0-9_.$-] print bare; others print quoted with `\"` and `\\`
/// escaped (IRParser.h reads both).
std::string printName(const std::string &n) {
  bool plain = !n.empty();
  for (char c : n)
    plain &= std::isalnum((unsigned char)c) || c == '_' || c == '.' || c == '$' || c == '-';
  if (plain)
    return n;
  std::string q = "\"";
  for (char c : n) {
    if (c == '"' || c == '\\')
      q += '\\';
    q += c;
  }
  return q + "\"";
}

std::string valueRef(const Value *v) {
  if (!v)
    return "<null>";
  return (isa<WeightVar>(v) ? "@" : "%") + printName(v->getName());
}

class AttrPrinter : public AttrVisitor {
public:
  std::ostringstream os;
  bool first = true;
  void sep(const char *name) {
    os << (first ? " {" : ", ") << name << "=";
    first = false;
  }
  void visit(const char *n, dim_t &v) override { sep(n), os << v; }
  void visit(const char *n, int64_t &v) override { sep(n), os << v; }
  void visit(const char *n, float &v) override {
    sep(n);
    os.precision(9);
    os << v;
  }
  void visit(const char *n, bool &v) override { sep(n), os << (v ? "true" : "false"); }
  void visit(const char *n, std::vector<dim_t> &v) override {
    sep(n);
    os << "[";
    for (size_t i = 0; i < v.size(); i++)
      os << (i ? "," : "") << v[i];
    os << "]";
  }
  void visit(const char *n, std::vector<int64_t> &v) override {
    sep(n);
    os << "[";
    for (size_t i = 0; i < v.size(); i++)
      os << (i ? "," : "") << v[i];
    os << "]";
  }
  void visit(const char *n, std::string &v) override { sep(n), os << '"' << v << '"'; }
  std::string str() { return first ? "" : os.str() + "}"; }
};

} // namespace

std::string IRFunction::toString() const {
  std::ostringstream os;
  os << "function " << printName(getName()) << "\n";
  os << "weights:\n";
  for (const auto &w : weights_)
    os << "  " << valueRef(w.get()) << " : " << w->getType()->toString()
       << (w->isConstant() ? " const" : " mutable") << "\n";
  os << "code:\n";
  for (const auto &ip : instrs_) {
    const Instruction *I = ip.get();
    os << "  ";
    if (I->getKind() == InstrKind::AllocActivation || I->getKind() == InstrKind::TensorView)
      os << valueRef(I) << " = ";
    os << I->getKindName();
    for (unsigned i = 0; i < I->getNumOperands(); i++)
      os << (i ? ", " : " ") << operandKindName(I->getOperand(i).second) << " "
         << valueRef(I->getOperand(i).first);
    AttrPrinter ap;
    const_cast<Instruction *>(I)->visitAttrs(ap);
    os << ap.str();
    if (I->getKind() == InstrKind::AllocActivation || I->getKind() == InstrKind::TensorView)
      os << " : " << I->getType()->toString();
    os << "\n";
  }
  return os.str();
}

Error IRFunction::verify() const {
  std::unordered_set<const Value *> live, dead, weights;
  for (const auto &w : weights_)
    weights.insert(w.get());
  auto fail = [&](const Instruction *I, const std::string &what) {
    return makeError(ErrorCode::Internal, "IR verifier: instruction '", I->getName(), "' (",
                     I->getKindName(), ") in function '", getName(), "': ", what);
  };
  for (const auto &ip : instrs_) {
    const Instruction *I = ip.get();
    for (unsigned i = 0; i < I->getNumOperands(); i++) {
      const Value *v = I->getOperand(i).first;
      if (!v)
        return fail(I, "operand " + I->getOperandName(i) + " is null");
      const Value *root = rootOf(v);
      if (weights.count(root)) {
        auto *w = cast<WeightVar>(root);
        if (w->isConstant() && I->getOperand(i).second != OperandKind::In)
          return fail(I, "writes constant weight @" + w->getName());
        continue;
      }
      if (!isa<AllocActivationInst>(root))
        return fail(I, "operand " + I->getOperandName(i) + " is not a buffer");
      if (!live.count(root))
        return fail(I, "operand " + I->getOperandName(i) + " uses %" + root->getName() +
                           (dead.count(root) ? " after its dealloc" : " before its alloc"));
    }
    if (I->getKind() == InstrKind::AllocActivation) {
      live.insert(I);
    } else if (auto *d = dyn_cast<DeallocActivationInst>(I)) {
      const Value *root = d->getSrc();
      if (!isa<AllocActivationInst>(root))
        return fail(I, "deallocates something that is not an activation");
      live.erase(root);
      dead.insert(root);
    } else if (auto *tv = dyn_cast<TensorViewInst>(I)) {
      const Value *src = tv->getSrc();
      if (tv->getType()->sizeInBytes() > src->getType()->sizeInBytes())
        return fail(I, "view " + tv->getType()->toString() + " is larger than its source " +
                           src->getType()->toString());
    }
  }
  return Error::success();
}

} // namespace kiln
