/// \file
/// The low-level IR: an address-only, instruction-based representation. Values are
/// buffers: WeightVars (the module's constants and placeholders, constant or mutable) and
/// the results of AllocActivation and TensorView instructions. Every other instruction
/// reads and writes buffers through operands marked `@in`, `@out` or `@inout`. Instruction
/// classes are generated from the operator table (AutoGenInstrs.h).
#ifndef KILN_IR_IR_H
#define KILN_IR_IR_H

#include "kiln/Graph/Graph.h"

#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace kiln {

enum class ValueKind { WeightVar, Instruction };
enum class OperandKind { In, Out, InOut };

/// "@in", "@out", "@inout".
const char *operandKindName(OperandKind k);

/// A buffer of the low-level IR: a WeightVar or the result of an instruction.
class Value {
public:
  Value(ValueKind vk, std::string name, TypeRef ty)
      : vk_(vk), name_(std::move(name)), type_(ty) {}
  virtual ~Value() = default;
  ValueKind getValueKind() const { return vk_; }
  const std::string &getName() const { return name_; }
  void setName(std::string n) { name_ = std::move(n); }
  /// The buffer type; null for instructions that do not define a buffer.
  TypeRef getType() const { return type_; }
  void setType(TypeRef t) { type_ = t; }

private:
  ValueKind vk_;
  std::string name_;
  TypeRef type_;
};

/// A buffer that lives outside the function's activations: a Constant (never written) or
/// a Placeholder (inputs and outputs, bound per run).
class WeightVar : public Value {
public:
  enum class Mutability { Constant, Mutable };
  WeightVar(std::string name, TypeRef ty, Mutability m, Storage *origin)
      : Value(ValueKind::WeightVar, std::move(name), ty), mut_(m), origin_(origin) {}
  static bool classof(const Value *v) { return v->getValueKind() == ValueKind::WeightVar; }
  Mutability getMutability() const { return mut_; }
  bool isConstant() const { return mut_ == Mutability::Constant; }
  /// The graph storage this buffer stands for.
  Storage *getOrigin() const { return origin_; }

private:
  Mutability mut_;
  Storage *origin_;
};

/// The closed set of instruction kinds.
enum class InstrKind : uint16_t {
#define DEF_INSTR(NAME) NAME,
#include "kiln/IR/AutoGenInstrs.def"
};
const char *getInstrKindName(InstrKind k);
bool parseInstrKind(const std::string &name, InstrKind &out);

class IRFunction;

/// An instruction of the low-level IR: it reads and writes buffers through its operands,
/// each marked \@in, \@out or \@inout. The per-kind subclasses are generated from the
/// operator table (AutoGenInstrs.h).
class Instruction : public Value {
public:
  using Operand = std::pair<Value *, OperandKind>;
  Instruction(InstrKind k, std::string name, TypeRef ty)
      : Value(ValueKind::Instruction, std::move(name), ty), kind_(k) {}
  static bool classof(const Value *v) { return v->getValueKind() == ValueKind::Instruction; }

  InstrKind getKind() const { return kind_; }
  const char *getKindName() const { return getInstrKindName(kind_); }
  unsigned getNumOperands() const { return unsigned(operands_.size()); }
  const Operand &getOperand(unsigned i) const { return operands_[i]; }
  const std::vector<Operand> &getOperands() const { return operands_; }
  void setOperand(unsigned i, Value *v) { operands_[i].first = v; }
  virtual std::string getOperandName(unsigned i) const = 0;
  virtual bool isDataParallel() const { return false; }
  virtual void visitAttrs(AttrVisitor &) {}
  /// A copy with the same operands and attributes, not inserted anywhere.
  virtual Instruction *clone() const = 0;
  IRFunction *getParent() const { return parent_; }
  void setParent(IRFunction *f) { parent_ = f; }

protected:
  void addOperand(Value *v, OperandKind k) { operands_.push_back({v, k}); }

private:
  InstrKind kind_;
  std::vector<Operand> operands_;
  IRFunction *parent_ = nullptr;
};

// isa/cast/dyn_cast from Node.h work on Values too (they only call To::classof).

} // namespace kiln

#include "kiln/IR/AutoGenInstrs.h"

namespace kiln {

/// Where the view \p tv starts in its source, in elements: its offsets times the source's
/// row-major strides (a view is the source's elements from there on, in its own shape).
dim_t viewElementOffset(const TensorViewInst *tv);

/// Where \p v starts in the buffer it views through any chain of TensorViews, in elements
/// (0 for a buffer itself).
dim_t elementOffsetInRoot(const Value *v);

/// The low-level form of one graph Function.
class IRFunction {
public:
  using InstrList = std::list<std::unique_ptr<Instruction>>;

  explicit IRFunction(Function *graph = nullptr) : graph_(graph) {}
  /// A function not lowered from a graph (parsed from text), named \p name.
  explicit IRFunction(std::string name) : graph_(nullptr), name_(std::move(name)) {}
  IRFunction(const IRFunction &) = delete;
  IRFunction &operator=(const IRFunction &) = delete;

  Function *getGraph() const { return graph_; }
  const std::string &getName() const;

  // Weights.
  WeightVar *createWeightVar(const std::string &name, TypeRef ty, WeightVar::Mutability m,
                             Storage *origin);
  const std::vector<std::unique_ptr<WeightVar>> &getWeights() const { return weights_; }
  /// The buffer of a placeholder or constant, or null.
  WeightVar *getWeightForStorage(const Storage *s) const;

  // Instructions.
  InstrList &getInstrs() { return instrs_; }
  const InstrList &getInstrs() const { return instrs_; }
  /// Appends \p inst (taking ownership), giving it a unique name.
  template <typename I> I *push_back(I *inst) {
    insertImpl(instrs_.end(), inst);
    return inst;
  }
  /// Inserts \p inst before \p where.
  template <typename I> I *insert(InstrList::iterator where, I *inst) {
    insertImpl(where, inst);
    return inst;
  }
  InstrList::iterator erase(InstrList::iterator it) { return instrs_.erase(it); }

  /// Checks operand kinds, that buffers are allocated before use and deallocated once,
  /// and that operand types fit.
  Error verify() const;
  /// Text form:
  /// \verbatim
  ///   function main
  ///   weights:
  ///     @x : float<1x784> mutable
  ///   code:
  ///     %fc.res = AllocActivation : float<1x10>
  ///     FullyConnected @out %fc.res, @in @x, @in @fc.weights, @in @fc.bias
  /// \endverbatim
  std::string toString() const;

private:
  void insertImpl(InstrList::iterator where, Instruction *inst);

  Function *graph_;
  std::string name_;
  std::vector<std::unique_ptr<WeightVar>> weights_;
  std::unordered_map<const Storage *, WeightVar *> weightByStorage_;
  InstrList instrs_;
  std::unordered_map<std::string, unsigned> nameCounts_;
};

/// Lowers a verified graph function to the low-level IR: one WeightVar per placeholder
/// and constant it uses, AllocActivation/DeallocActivation around each intermediate result
/// (dealloc right after the last use), TensorView for reshapes, Copy for saves.
Expected<std::unique_ptr<IRFunction>> generateIR(Function *f);

/// Like generateIR(f), with instructions in the node order \p order (for example a
/// memory-aware schedule from kiln/Memory/Scheduler.h). \p order must list every node
/// that reaches a Save exactly once, operands before users; storage nodes are ignored.
Expected<std::unique_ptr<IRFunction>> generateIR(Function *f, const std::vector<Node *> &order);

/// The order generateIR(f) uses: operands before users, depth-first from the Saves in
/// order; nodes that reach no Save are left out. Storage nodes are not listed.
Expected<std::vector<Node *>> scheduleTopologically(Function *f);

} // namespace kiln

#endif // KILN_IR_IR_H
