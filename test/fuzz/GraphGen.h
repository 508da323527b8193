/// \file
/// A generator of random valid graphs over the operator table (test/fuzz/README.md).
///
/// Written once against the table: every operator kind of kiln/Graph/AutoGenNodes.def is a
/// candidate; a node is built generically (createNodeOfKind), its operands are picked from
/// the values built so far or made as new placeholders and constants, its attributes are
/// filled by an AttrVisitor from a per-attribute domain table, and it is kept only when the
/// operator's type rule (Node::computeResultTypes), Function::verify and the Interpreter's
/// column of the table accept it (rejection sampling). No code is written per operator.
#ifndef KILN_TEST_FUZZ_GRAPHGEN_H
#define KILN_TEST_FUZZ_GRAPHGEN_H

#include "kiln/Graph/Graph.h"

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace kiln::fuzz {

/// Options of generateGraph.
struct GenOptions {
  unsigned minNodes = 1;
  unsigned maxNodes = 30;
  /// Largest dimension of a new leaf and largest element count of any value.
  dim_t maxDim = 40;
  dim_t maxElements = 4096;
  /// Operator kinds allowed (names); empty: every kind of the table.
  std::set<std::string> kinds;
  /// Samples tried per node before another kind is drawn.
  unsigned triesPerKind = 2000;
  /// Element kinds of new leaves (empty: the default mix, float mostly).
  std::vector<ElemKind> leafKinds;
  /// Chance that a new leaf is a constant rather than a placeholder: as a node's first
  /// operand, and as a later one (a weight, a bias).
  double firstLeafConstant = 0.35, laterLeafConstant = 0.35;
};

/// A mix of operators the quantizer converts and the CPU backend runs in int8
/// (backends/CPU/README.md: convolutions, FullyConnected, the pools, Relu, Add, Sub, Mul),
/// float leaves only and weights mostly constant, from \p base's sizes: graphs that the
/// `quant-cpu` configuration can run rather than skip.
GenOptions quantizableMix(const GenOptions &base);

/// Per-kind counts of candidates tried and nodes kept, over many graphs.
struct GenStats {
  std::map<std::string, std::pair<uint64_t, uint64_t>> perKind; // tried, kept
};

/// A random valid module (one function "main", its outputs saved) from \p seed; the same
/// seed and options give the same module.
std::unique_ptr<Module> generateGraph(uint64_t seed, const GenOptions &opts,
                                      GenStats *stats = nullptr);

/// The names of all operator kinds of the table (not Placeholder, Constant).
std::vector<std::string> allOperatorKinds();

} // namespace kiln::fuzz

#endif // KILN_TEST_FUZZ_GRAPHGEN_H
