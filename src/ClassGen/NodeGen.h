/// \file
/// The little language the operator table is written in, and the emitters that turn the
/// table into C++ (node classes, builders, instruction classes, kind lists). Run at build
/// time by the `nodegen` tool; see NodeTable.cpp for the table itself.
#ifndef KILN_CLASSGEN_NODEGEN_H
#define KILN_CLASSGEN_NODEGEN_H

#include <initializer_list>
#include <string>
#include <vector>

namespace kiln::classgen {

/// Attribute kinds and their C++ types:
///   Dim: dim_t, Dims: std::vector<dim_t>, Int: int64_t, Ints: std::vector<int64_t>,
///   Float: float, Bool: bool, String: std::string,
///   Axis / Axes: stored as dim_t / std::vector<dim_t>; builders take int64_t values and
///   normalise negative axes against the rank of the first operand.
enum class AttrKind { Dim, Dims, Int, Ints, Float, Bool, String, Axis, Axes };

/// How result types are derived.
enum class TypeRule {
  Custom,        ///< Hand-written `computeResultTypes` (src/Graph/<Family>.cpp, TypeRules.cpp).
  SameAsInput,   ///< One result, the type of the first operand.
  SameAsInputs,  ///< One result; all operands must have the first operand's kind and shape.
  BoolOfInputs,  ///< Comparisons: operands of equal kind and shape, a Bool result.
  Explicit,      ///< The builder takes the result type; a hand-written rule checks it.
  NoResult,      ///< No results (Save).
};

/// How a node becomes low-level IR.
enum class IRGenKind {
  Default, ///< Allocate each result, emit the same-named instruction.
  Custom,  ///< Hand-written in src/IRGen (Save, Reshape).
};

enum class OperandKind { In, Out, InOut };

/// The backends the table has a support column for (docs/Operators.md).
enum class BackendCol { Interpreter, CPU, Sim };
constexpr unsigned kNumBackendCols = 3;

/// What one backend supports of an operator: the element kinds of its operands and results,
/// in the notation below, and a note for the docs naming the conditions the table cannot
/// say (ranks, attribute values), which the backend's `isOpSupported` adds by hand.
///
/// Kinds: alternatives separated by ";" (any one may match), each one of
///   `none`                 the backend does not run the operator;
///   `uniform(SET)`         every operand and result has one element kind, from SET;
///   `uniform type`         every operand and result has one element type (kind, and scale
///                          and offset when quantized), any kind;
///   `OP0, OP1, ... -> RES` operand i's kind is in OPi (operands past the list are free),
///                          result 0's kind in RES (no "->": free);
///                          an OP or RES is a SET, `*` (any) or `=` (operand 0's kind).
/// SET: names joined by "|": f32 f16 bf16 i8q u8q i32q i32 i64 bool, floats (f32|f16|bf16),
///   quantized (i8q|u8q|i32q), index (i32|i64), numeric (floats|index), plain
///   (numeric|bool: every unquantized kind), all.
struct Support {
  bool stated = false;
  std::string kinds;
  std::string note;
};

struct Attr {
  AttrKind kind;
  std::string name;
  std::string doc;
};

struct NodeDef {
  std::string name;
  std::string doc;
  std::vector<std::string> inputs;
  std::string variadicInput; ///< Name of a trailing list operand, or empty.
  std::vector<Attr> attrs;
  std::vector<std::string> results;
  TypeRule rule = TypeRule::Custom;
  bool dataParallel = false;
  IRGenKind irgen = IRGenKind::Default;
  std::vector<std::string> extraDecls; ///< Hand-written members (defined in src/Graph).
  /// The lowering function in src/Lower (namespace kiln::lower, `NodeValue fn(Function *,
  /// XNode *)`); empty with `noLowering()`. One of the two must be stated.
  std::string loweringFn;
  std::string loweringDoc; ///< What it lowers to, for docs/Operators.md.
  bool loweringStated = false;
  /// ONNX op types whose converter (src/Importer) produces this node for its output.
  std::vector<std::string> onnxOps;
  Support support[kNumBackendCols];

  NodeDef &input(const std::string &n) { inputs.push_back(n); return *this; }
  NodeDef &variadic(const std::string &n) { variadicInput = n; return *this; }
  NodeDef &attr(AttrKind k, const std::string &n, const std::string &d = "") {
    attrs.push_back({k, n, d});
    return *this;
  }
  NodeDef &result(const std::string &n) { results.push_back(n); return *this; }
  NodeDef &typeRule(TypeRule r) { rule = r; return *this; }
  NodeDef &dataParallelOp() { dataParallel = true; return *this; }
  NodeDef &customIRGen() { irgen = IRGenKind::Custom; return *this; }
  NodeDef &describe(const std::string &d) { doc = d; return *this; }
  NodeDef &extraMethod(const std::string &decl) { extraDecls.push_back(decl); return *this; }
  NodeDef &lowering(const std::string &fn, const std::string &what) {
    loweringFn = fn;
    loweringDoc = what;
    loweringStated = true;
    return *this;
  }
  NodeDef &noLowering() { loweringStated = true; return *this; }
  NodeDef &onnx(std::initializer_list<const char *> ops) {
    onnxOps.insert(onnxOps.end(), ops.begin(), ops.end());
    return *this;
  }
  NodeDef &supports(BackendCol b, const std::string &kinds, const std::string &note = "") {
    Support &s = support[unsigned(b)];
    s.stated = true;
    s.kinds = kinds;
    s.note = note;
    return *this;
  }
  NodeDef &interpreter(const std::string &k, const std::string &note = "") {
    return supports(BackendCol::Interpreter, k, note);
  }
  NodeDef &cpu(const std::string &k, const std::string &note = "") {
    return supports(BackendCol::CPU, k, note);
  }
  NodeDef &sim(const std::string &k, const std::string &note = "") {
    return supports(BackendCol::Sim, k, note);
  }
};

/// An instruction that exists only in the low-level IR (not generated from a node).
struct InstrDef {
  std::string name;
  std::string doc;
  std::vector<std::pair<std::string, OperandKind>> operands;
  std::vector<Attr> attrs;
  InstrDef &operand(const std::string &n, OperandKind k) { operands.push_back({n, k}); return *this; }
  InstrDef &attr(AttrKind k, const std::string &n, const std::string &d = "") {
    attrs.push_back({k, n, d});
    return *this;
  }
  InstrDef &describe(const std::string &d) { doc = d; return *this; }
};

struct Table {
  std::vector<NodeDef> nodes;
  std::vector<InstrDef> instrs;
  NodeDef &node(const std::string &name) {
    nodes.push_back(NodeDef());
    nodes.back().name = name;
    return nodes.back();
  }
  InstrDef &instr(const std::string &name) {
    instrs.push_back(InstrDef());
    instrs.back().name = name;
    return instrs.back();
  }
};

/// Fills \p t with every operator (NodeTable.cpp).
void defineOperators(Table &t);

} // namespace kiln::classgen

#endif // KILN_CLASSGEN_NODEGEN_H
