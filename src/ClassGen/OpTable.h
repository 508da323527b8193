/// \file
/// Facts about each operator that the table (NodeTable.cpp) states and other layers read at
/// run time: the element kinds each backend supports, the ONNX operators that map to it,
/// and its lowering. Generated into AutoGenOpTable.cpp by nodegen; docs/Operators.md shows
/// the same facts.
#ifndef KILN_SRC_CLASSGEN_OPTABLE_H
#define KILN_SRC_CLASSGEN_OPTABLE_H

#include "kiln/Graph/Graph.h"

#include <string>
#include <vector>

namespace kiln::optable {

/// The backends the table has a column for.
enum class TableBackend { Interpreter, CPU, Sim };

/// True when backend \p b's column of the table accepts the element kinds of \p n's
/// operands and results (Placeholder and Constant: always). Conditions the table does not
/// state (ranks, attribute values) are the backend's own `isOpSupported` to add.
bool kindsSupported(const Node &n, TableBackend b);
/// The same by registry name ("Interpreter", "CPU", "Sim"); false for any other name.
bool kindsSupported(const Node &n, const std::string &backendName);

/// The ONNX op types whose converter produces a node of kind \p k for its output.
const std::vector<std::string> &onnxOpsOf(NodeKind k);

/// The name of \p k's lowering function in src/Lower (namespace kiln::lower), or "".
const char *loweringOf(NodeKind k);

} // namespace kiln::optable

#endif // KILN_SRC_CLASSGEN_OPTABLE_H
