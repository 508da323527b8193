/// \file
/// A well-formedness check of Graphviz DOT as Kiln writes it (Function::toDot,
/// PartitionPlan::toDot): one or more `digraph "name" { ... }` blocks, braces balanced
/// outside quoted strings, strings closed, and every edge's endpoints declared as nodes
/// of the same graph.
#ifndef KILN_TEST_TRACE_DOTCHECK_H
#define KILN_TEST_TRACE_DOTCHECK_H

#include <string>
#include <vector>

namespace kiln::test {

struct DotGraph {
  std::string name;
  std::vector<std::string> nodeLabels; ///< the label of each declared node
  size_t edges = 0;
};

/// Checks \p text; returns "" and the graphs in \p out, or what is wrong.
std::string checkDot(const std::string &text, std::vector<DotGraph> &out);

} // namespace kiln::test

#endif // KILN_TEST_TRACE_DOTCHECK_H
