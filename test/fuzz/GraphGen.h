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
};

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
