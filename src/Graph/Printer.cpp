// The text form of the graph IR: Module::toString() and Function::toString(). The grammar
// is documented in include/kiln/Graph/TextIR.h; Parser.cpp reads it back.

#include "kiln/Graph/Graph.h"
#include "kiln/Graph/TextIR.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace kiln {

namespace {

/// Characters a name may contain without quotes (the parser accepts the same set).
bool isBareNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '_' || c == '.' || c == '$' || c == '-';
}

/// Appends \p s as a string literal with C-style escapes.
void appendQuoted(std::string &out, const std::string &s) {
  out += '"';
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += ch;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c >= 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", unsigned(c));
      out += buf;
    } else {
      out += ch;
    }
  }
  out += '"';
}

/// A name as printed after a sigil: bare when possible, quoted otherwise.
std::string printName(const std::string &name) {
  bool bare = !name.empty();
  for (char c : name)
    bare = bare && isBareNameChar(c);
  if (bare)
    return name;
  std::string out;
  appendQuoted(out, name);
  return out;
}

/// A float with 9 significant digits (exact for float32); `inf`, `-inf`, `nan`.
std::string printFloat(double v) {
  if (std::isnan(v))
    return "nan";
  if (std::isinf(v))
    return v < 0 ? "-inf" : "inf";
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

std::string printType(TypeRef t) { return t ? t->toString() : std::string("<untyped>"); }

/// Prints attributes as `Name=value` pieces.
class AttrPrinter : public AttrVisitor {
public:
  std::vector<std::string> parts;

  void visit(const char *name, dim_t &v) override { add(name, std::to_string(v)); }
  void visit(const char *name, int64_t &v) override { add(name, std::to_string(v)); }
  void visit(const char *name, float &v) override { add(name, printFloat(v)); }
  void visit(const char *name, bool &v) override { add(name, v ? "true" : "false"); }
  void visit(const char *name, std::vector<dim_t> &v) override { add(name, list(v)); }
  void visit(const char *name, std::vector<int64_t> &v) override { add(name, list(v)); }
  void visit(const char *name, std::string &v) override {
    std::string s;
    appendQuoted(s, v);
    add(name, s);
  }

private:
  void add(const char *name, const std::string &value) {
    parts.push_back(std::string(name) + "=" + value);
  }
  template <typename T> static std::string list(const std::vector<T> &v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); i++)
      s += (i ? "," : "") + std::to_string(v[i]);
    return s + "]";
  }
};

/// Element \p i of \p t as a literal of its kind (quantized kinds: the raw integer).
std::string printElement(const Tensor &t, size_t i) {
  const char *p = t.getUnsafePtr();
  switch (t.getElementType()) {
  case ElemKind::Float:
    return printFloat(reinterpret_cast<const float *>(p)[i]);
  case ElemKind::Float16:
  case ElemKind::BFloat16:
    return printFloat(t.getAsDouble(i));
  case ElemKind::Int8Q:
    return std::to_string(int(reinterpret_cast<const int8_t *>(p)[i]));
  case ElemKind::UInt8Q:
    return std::to_string(unsigned(reinterpret_cast<const uint8_t *>(p)[i]));
  case ElemKind::Int32Q:
  case ElemKind::Int32I:
    return std::to_string(reinterpret_cast<const int32_t *>(p)[i]);
  case ElemKind::Int64I:
    return std::to_string(reinterpret_cast<const int64_t *>(p)[i]);
  case ElemKind::Bool:
    return reinterpret_cast<const bool *>(p)[i] ? "true" : "false";
  }
  return "0";
}

/// True when elements \p i and \p j print the same (equal bytes, or both NaN).
bool sameElement(const Tensor &t, size_t i, size_t j) {
  size_t sz = t.getType().elemBytes();
  const char *p = t.getUnsafePtr();
  if (std::memcmp(p + i * sz, p + j * sz, sz) == 0)
    return true;
  return isFloatKind(t.getElementType()) && std::isnan(t.getAsDouble(i)) &&
         std::isnan(t.getAsDouble(j));
}

/// 64-bit FNV-1a of the payload bytes, as 16 hex digits.
std::string payloadHash(const Tensor &t) {
  uint64_t h = 0xcbf29ce484222325ull;
  const unsigned char *p = reinterpret_cast<const unsigned char *>(t.getUnsafePtr());
  for (size_t i = 0, e = t.getSizeInBytes(); i < e; i++) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  char buf[24];
  std::snprintf(buf, sizeof(buf), "%016" PRIx64, h);
  return buf;
}

/// The data of a constant: `[...]`, `splat(v)` or `elided(hash)`.
std::string printPayload(const Tensor &t, const PrintOptions &opts) {
  size_t n = t.size();
  if (n > 0 && !t.getUnsafePtr())
    return "elided(0000000000000000)";
  bool splat = n >= 2;
  for (size_t i = 1; splat && i < n; i++)
    splat = sameElement(t, i, 0);
  if (splat)
    return "splat(" + printElement(t, 0) + ")";
  if (n > opts.maxConstantElements)
    return "elided(" + payloadHash(t) + ")";
  std::string s = "[";
  for (size_t i = 0; i < n; i++) {
    if (i)
      s += ", ";
    s += printElement(t, i);
  }
  return s + "]";
}

std::string printOperand(NodeValue v) {
  if (!v.node)
    return "<null>";
  if (isa<Storage>(v.node))
    return "@" + printName(v.node->getName());
  std::string s = "%" + printName(v.node->getName());
  if (v.resNo)
    s += "#" + std::to_string(v.resNo);
  return s;
}

/// The nodes of \p f with operands before users, keeping creation order where the graph
/// allows it. Edges that close a cycle are ignored (such a graph does not verify anyway).
std::vector<const Node *> topologicalOrder(const Function &f) {
  enum State { Unseen, Open, Done };
  std::unordered_map<const Node *, State> state;
  for (const auto &p : f.getNodes())
    state[p.get()] = Unseen;
  std::vector<const Node *> order;
  order.reserve(f.numNodes());
  for (const auto &p : f.getNodes()) {
    if (state[p.get()] != Unseen)
      continue;
    std::vector<std::pair<const Node *, unsigned>> stack{{p.get(), 0}};
    state[p.get()] = Open;
    while (!stack.empty()) {
      auto &[n, i] = stack.back();
      if (i < n->getNumInputs()) {
        const Node *in = n->getNthInput(i++).node;
        auto it = state.find(in);
        if (it != state.end() && it->second == Unseen) {
          it->second = Open;
          stack.push_back({in, 0});
        }
        continue;
      }
      state[n] = Done;
      order.push_back(n);
      stack.pop_back();
    }
  }
  return order;
}

/// One statement line (without indentation or newline).
std::string printStatement(const Node &n) {
  std::string s;
  // A Save named like its placeholder prints in the short form `Save(%v, @name)`.
  bool shortSave = false;
  if (auto *save = dyn_cast<SaveNode>(&n))
    shortSave = save->getNumInputs() == 2 && save->getOutput().node &&
                save->getOutput().node->getName() == n.getName();
  if (!shortSave)
    s += "%" + printName(n.getName()) + " = ";
  s += n.getKindName();
  s += "(";
  for (unsigned i = 0; i < n.getNumInputs(); i++) {
    if (i)
      s += ", ";
    s += printOperand(n.getNthInput(i));
  }
  s += ")";
  std::string attrs = printNodeAttrs(n);
  if (!attrs.empty())
    s += " " + attrs;
  for (unsigned r = 0; r < n.getNumResults(); r++)
    s += (r ? ", " : " : ") + printType(n.getType(r));
  return s;
}

} // namespace

std::string printNodeAttrs(const Node &n) {
  AttrPrinter p;
  const_cast<Node &>(n).visitAttrs(p);
  if (p.parts.empty())
    return "";
  std::string s = "{";
  for (size_t i = 0; i < p.parts.size(); i++)
    s += (i ? ", " : "") + p.parts[i];
  return s + "}";
}

std::string printFunction(const Function &f) {
  std::string s = "function " + printName(f.getName()) + " {\n";
  for (const Node *n : topologicalOrder(f))
    s += "  " + printStatement(*n) + "\n";
  return s + "}\n";
}

std::string printModule(const Module &m, const PrintOptions &opts) {
  std::string s;
  for (const auto &ph : m.getPlaceholders())
    s += "placeholder @" + printName(ph->getName()) + " : " + printType(ph->getType()) + "\n";
  for (const auto &c : m.getConstants())
    s += "constant @" + printName(c->getName()) + " : " + printType(c->getType()) + " = " +
         printPayload(c->getPayload(), opts) + "\n";
  for (const auto &f : m.getFunctions()) {
    if (!s.empty())
      s += "\n";
    s += printFunction(*f);
  }
  return s;
}

std::string Function::toString() const { return printFunction(*this); }

std::string Module::toString() const { return printModule(*this); }

} // namespace kiln
