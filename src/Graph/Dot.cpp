// Graphviz DOT of a Function: Function::toDot() and Function::dumpDot(path).
//
// Every operator node is a record (kind, name, attributes, result types); the storage the
// function uses appears once each, placeholders as rounded boxes and constants as
// cylinders. Edges go from an operand to its user and are labelled with the operand name
// (prefixed by the result name when the operand's node has several results); a Save's
// Output edge points from the Save into its placeholder.

#include "kiln/Graph/Graph.h"
#include "kiln/Graph/TextIR.h"

#include <fstream>
#include <unordered_map>

namespace kiln {

namespace {

/// Escapes \p s for a double-quoted DOT string (and, with \p record, a record label).
std::string escape(const std::string &s, bool record) {
  std::string out;
  for (char c : s) {
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    if (c == '"' || c == '\\' ||
        (record && (c == '{' || c == '}' || c == '|' || c == '<' || c == '>')))
      out += '\\';
    out += c;
  }
  return out;
}

/// Splits `{A=1, B=[1,2], C="x, y"}` into `A=1`, `B=[1,2]`, `C="x, y"`.
std::vector<std::string> splitAttrs(const std::string &attrs) {
  std::vector<std::string> parts;
  if (attrs.size() < 2)
    return parts;
  std::string body = attrs.substr(1, attrs.size() - 2), cur;
  int depth = 0;
  bool inString = false;
  for (size_t i = 0; i < body.size(); i++) {
    char c = body[i];
    if (inString) {
      cur += c;
      if (c == '\\' && i + 1 < body.size())
        cur += body[++i];
      else if (c == '"')
        inString = false;
      continue;
    }
    if (c == '"')
      inString = true;
    depth += c == '[' ? 1 : c == ']' ? -1 : 0;
    if (c == ',' && depth == 0) {
      parts.push_back(cur);
      cur.clear();
      if (i + 1 < body.size() && body[i + 1] == ' ')
        i++;
      continue;
    }
    cur += c;
  }
  if (!cur.empty())
    parts.push_back(cur);
  return parts;
}

std::string typeString(TypeRef t) { return t ? t->toString() : std::string("<untyped>"); }

} // namespace

std::string Function::toDot() const {
  std::string os;
  os += "digraph \"" + escape(name_, false) + "\" {\n";
  os += "  rankdir=TB;\n";
  os += "  node [fontname=\"Helvetica\", fontsize=10];\n";
  os += "  edge [fontname=\"Helvetica\", fontsize=9];\n";

  std::unordered_map<const Node *, std::string> ids;
  unsigned numStorage = 0;
  auto storageId = [&](const Node *s) -> const std::string & {
    auto it = ids.find(s);
    if (it != ids.end())
      return it->second;
    std::string id = "s" + std::to_string(numStorage++);
    bool isPh = isa<Placeholder>(s);
    os += "  " + id + " [shape=" + (isPh ? "box, style=\"rounded,filled\", fillcolor=\"#dbe9f6\""
                                         : "cylinder, style=filled, fillcolor=\"#f3e7c9\"");
    os += ", label=\"" + std::string(isPh ? "Placeholder" : "Constant") + "\\n@" +
          escape(s->getName(), false) + "\\n" + escape(typeString(s->getType()), false) +
          "\"];\n";
    return ids[s] = id;
  };

  unsigned numNodes = 0;
  for (const auto &p : nodes_)
    ids[p.get()] = "n" + std::to_string(numNodes++);

  for (const auto &p : nodes_) {
    const Node *n = p.get();
    std::string label = "{" + escape(n->getKindName(), true) + "|" +
                        escape(n->getName(), true);
    std::vector<std::string> attrs = splitAttrs(printNodeAttrs(*n));
    if (!attrs.empty()) {
      label += "|";
      for (const std::string &a : attrs)
        label += escape(a, true) + "\\l";
    }
    if (n->getNumResults()) {
      label += "|";
      for (unsigned r = 0; r < n->getNumResults(); r++) {
        if (n->getNumResults() > 1)
          label += escape(n->getResultName(r), true) + ": ";
        label += escape(typeString(n->getType(r)), true) + "\\l";
      }
    }
    label += "}";
    os += "  " + ids[n] + " [shape=record, label=\"" + label + "\"];\n";
  }

  for (const auto &p : nodes_) {
    const Node *n = p.get();
    for (unsigned i = 0; i < n->getNumInputs(); i++) {
      NodeValue v = n->getNthInput(i);
      if (!v.node)
        continue;
      std::string from;
      if (isa<Storage>(v.node)) {
        from = storageId(v.node);
      } else {
        auto it = ids.find(v.node);
        if (it == ids.end())
          continue; // a node of another function; the verifier rejects it
        from = it->second;
      }
      std::string label = n->getInputName(i);
      if (v.node->getNumResults() > 1)
        label = v.node->getResultName(v.resNo) + " -> " + label;
      if (isa<SaveNode>(n) && i == SaveNode::OutputIdx)
        os += "  " + ids[n] + " -> " + from + " [label=\"" + escape(label, false) +
              "\", style=dashed];\n";
      else
        os += "  " + from + " -> " + ids[n] + " [label=\"" + escape(label, false) + "\"];\n";
    }
  }
  os += "}\n";
  return os;
}

Error Function::dumpDot(const std::string &path) const {
  std::ofstream out(path);
  if (!out)
    return makeError(ErrorCode::InvalidArgument, "dumpDot: cannot open '", path,
                     "' for writing");
  out << toDot();
  out.close();
  if (!out)
    return makeError(ErrorCode::InvalidArgument, "dumpDot: failed to write '", path, "'");
  return Error::success();
}

} // namespace kiln
