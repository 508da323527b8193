// The value layer of the graph IR's text parser: types (`float<1x3>`, `i8q<4:0.5:-3>`),
// constant data (`[...]`, `splat(v)`, `elided(hash)`), attribute values, and the
// assignment of attribute values to a node's attributes by name through its AttrVisitor,
// converting each to the attribute's C++ type.

#include "ParserImpl.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace kiln::textparse {

namespace {

/// Constants larger than this are rejected rather than allocated.
constexpr uint64_t kMaxConstantBytes = uint64_t(1) << 32;

/// Assigns parsed attribute values by name, converting to each attribute's C++ type.
class AttrSetter : public AttrVisitor {
public:
  AttrSetter(AttrList &attrs, const std::string &kind, Pos kindPos)
      : attrs_(attrs), kind_(kind), kindPos_(kindPos) {}

  Error err = Error::success();
  std::string declared; ///< Names the operator declares, for messages.

  void visit(const char *name, dim_t &v) override {
    if (AttrValue *a = find(name, AttrValue::Num, "an integer"))
      fail(toDim(a->num, v));
  }
  void visit(const char *name, int64_t &v) override {
    if (AttrValue *a = find(name, AttrValue::Num, "an integer"))
      fail(toInt64(a->num, v));
  }
  void visit(const char *name, float &v) override {
    if (AttrValue *a = find(name, AttrValue::Num, "a number"))
      fail(toFloat(a->num, v));
  }
  void visit(const char *name, bool &v) override {
    if (AttrValue *a = find(name, AttrValue::Bool, "true or false"))
      v = a->b;
  }
  void visit(const char *name, std::vector<dim_t> &v) override { list(name, v, toDim); }
  void visit(const char *name, std::vector<int64_t> &v) override { list(name, v, toInt64); }
  void visit(const char *name, std::string &v) override {
    if (AttrValue *a = find(name, AttrValue::Str, "a string"))
      v = a->str;
  }

private:
  template <typename T, typename Conv> void list(const char *name, std::vector<T> &v, Conv c) {
    if (AttrValue *a = find(name, AttrValue::List, "a list [...]")) {
      v.assign(a->list.size(), 0);
      for (size_t i = 0; i < a->list.size(); i++)
        fail(c(a->list[i], v[i]));
    }
  }
  void fail(Error e) {
    if (e && !err)
      err = std::move(e);
  }
  AttrValue *find(const char *name, AttrValue::Kind kind, const char *expected) {
    declared += (declared.empty() ? "" : ", ") + std::string(name);
    for (auto &[n, a] : attrs_) {
      if (n != name)
        continue;
      a.used = true;
      if (a.kind != kind) {
        fail(parseError(a.pos, "attribute '" + n + "' of " + kind_ + " expects " + expected));
        return nullptr;
      }
      return &a;
    }
    fail(parseError(kindPos_, kind_ + " requires attribute '" + name + "'"));
    return nullptr;
  }

  AttrList &attrs_;
  const std::string &kind_;
  Pos kindPos_;
};

} // namespace

Error assignAttrs(Node &n, AttrList &attrs, Pos kindPos) {
  const std::string kindName = n.getKindName();
  AttrSetter setter(attrs, kindName, kindPos);
  n.visitAttrs(setter);
  KILN_RETURN_IF_ERR(std::move(setter.err));
  for (auto &[an, av] : attrs)
    if (!av.used)
      return parseError(av.pos,
                        kindName + " has no attribute '" + an + "'" +
                            (setter.declared.empty() ? std::string(" (it has none)")
                                                     : " (attributes: " + setter.declared + ")"));
  return Error::success();
}

Expected<TypeRef> TextParser::type() {
  skipSpace();
  Pos p = here();
  KILN_ASSIGN_OR_RETURN(std::string kn, expectIdent("a type"));
  ElemKind kind;
  if (!parseElemKind(kn, kind))
    return parseError(p, "unknown element kind '" + kn + "'");
  KILN_RETURN_IF_ERR(expect('<', "after the element kind"));
  Dims dims;
  uint64_t bytes = elemSize(kind);
  skipSpace();
  if (isDigit(peek())) {
    while (true) {
      KILN_ASSIGN_OR_RETURN(Number d, number());
      dim_t v;
      KILN_RETURN_IF_ERR(toDim(d, v));
      if (dims.size() == kMaxDims)
        return parseError(d.pos, "a type has at most " + std::to_string(kMaxDims) + " dimensions");
      dims.push_back(v);
      bytes = v && bytes > std::numeric_limits<uint64_t>::max() / 2 / v ? ~uint64_t(0) : bytes * v;
      if (!consume('x'))
        break;
      skipSpace();
      if (!isDigit(peek()))
        return parseError(here(), "expected a dimension, found " + describeHere());
    }
  }
  if (bytes == ~uint64_t(0))
    return parseError(p, "type is too large");
  float scale = 1.0f;
  int64_t offset = 0;
  if (isQuantized(kind)) {
    KILN_RETURN_IF_ERR(expect(':', "before the scale of a quantized type"));
    KILN_ASSIGN_OR_RETURN(Number s, number());
    KILN_RETURN_IF_ERR(toFloat(s, scale));
    if (!std::isfinite(scale))
      return parseError(s.pos, "the scale of a quantized type must be finite");
    KILN_RETURN_IF_ERR(expect(':', "before the offset of a quantized type"));
    KILN_ASSIGN_OR_RETURN(Number o, number());
    KILN_RETURN_IF_ERR(toInRange(o, INT32_MIN, INT32_MAX, offset));
  } else if (consume(':')) {
    return parseError(p, "only quantized element kinds have a scale and an offset");
  }
  KILN_RETURN_IF_ERR(expect('>', "to close the type"));
  return m_.uniqueType(Type(kind, dims, scale, int32_t(offset)));
}

Error TextParser::element(Tensor &t, size_t i) {
  skipSpace();
  ElemKind k = t.getElementType();
  if (k == ElemKind::Bool && (startsWord("true") || startsWord("false"))) {
    t.getHandle<bool>().raw(i) = ident() == "true";
    return Error::success();
  }
  KILN_ASSIGN_OR_RETURN(Number n, number());
  int64_t v = 0;
  if (isFloatKind(k)) {
    float f;
    KILN_RETURN_IF_ERR(toFloat(n, f));
    t.setFromDouble(i, f); // exact for float; one rounding for float16 and bfloat16
  } else if (k == ElemKind::Int64I) {
    KILN_RETURN_IF_ERR(toInt64(n, v));
    t.getHandle<int64_t>().raw(i) = v; // not through double: all 64 bits are kept
  } else {
    int64_t lo = k == ElemKind::Int8Q    ? INT8_MIN
                 : k == ElemKind::UInt8Q ? 0
                 : k == ElemKind::Bool   ? 0
                                         : INT32_MIN;
    int64_t hi = k == ElemKind::Int8Q    ? INT8_MAX
                 : k == ElemKind::UInt8Q ? UINT8_MAX
                 : k == ElemKind::Bool   ? 1
                                         : INT32_MAX;
    KILN_RETURN_IF_ERR(toInRange(n, lo, hi, v));
    t.setFromDouble(i, double(v)); // exact within the range
  }
  return Error::success();
}

Expected<Tensor> TextParser::payload(TypeRef ty, Pos declPos) {
  if (uint64_t(ty->sizeInBytes()) > kMaxConstantBytes)
    return parseError(declPos, "constant of type " + ty->toString() + " is too large");
  skipSpace();
  Pos p = here();
  Tensor t(*ty);
  size_t n = t.size();
  if (consume('[')) {
    size_t i = 0;
    KILN_RETURN_IF_ERR(commaList(']', "between values", [&]() -> Error {
      skipSpace();
      if (i == n)
        return parseError(here(), "too many values for " + ty->toString() + " (" +
                                      std::to_string(n) + " expected)");
      return element(t, i++);
    }));
    if (i != n)
      return parseError(p, "expected " + std::to_string(n) + " values for " + ty->toString() +
                               ", found " + std::to_string(i));
    return t;
  }
  std::string w = isIdentStart(peek()) ? ident() : "";
  if (w == "splat") {
    KILN_RETURN_IF_ERR(expect('(', "after 'splat'"));
    if (n == 0)
      return parseError(p, "splat of an empty type");
    KILN_RETURN_IF_ERR(element(t, 0));
    KILN_RETURN_IF_ERR(expect(')', "after the splat value"));
    size_t sz = ty->elemBytes();
    char *d = t.getUnsafePtr();
    for (size_t i = 1; i < n; i++)
      std::memcpy(d + i * sz, d, sz);
    return t;
  }
  if (w == "elided") {
    KILN_RETURN_IF_ERR(expect('(', "after 'elided'"));
    skipSpace();
    skipIdentChars();
    KILN_RETURN_IF_ERR(expect(')', "after the elided hash"));
    return t; // zero-filled
  }
  return parseError(p, "expected constant data ('[', 'splat' or 'elided'), found " +
                           (w.empty() ? describeHere() : "'" + w + "'"));
}

Expected<AttrValue> TextParser::attrValue() {
  skipSpace();
  AttrValue a;
  a.pos = here();
  if (peek() == '"') {
    a.kind = AttrValue::Str;
    KILN_ASSIGN_OR_RETURN(a.str, quoted());
  } else if (consume('[')) {
    a.kind = AttrValue::List;
    KILN_RETURN_IF_ERR(commaList(']', "between list elements", [&]() -> Error {
      KILN_ASSIGN_OR_RETURN(Number n, number());
      a.list.push_back(std::move(n));
      return Error::success();
    }));
  } else if (isIdentStart(peek()) && !startsWord("inf") && !startsWord("nan")) {
    std::string w = ident();
    if (w != "true" && w != "false")
      return parseError(a.pos, "expected an attribute value, found '" + w + "'");
    a.kind = AttrValue::Bool;
    a.b = w == "true";
  } else {
    KILN_ASSIGN_OR_RETURN(a.num, number());
  }
  return a;
}

Expected<AttrList> TextParser::attrList() {
  AttrList attrs;
  if (!consume('{'))
    return attrs;
  KILN_RETURN_IF_ERR(commaList('}', "between attributes", [&]() -> Error {
    skipSpace();
    Pos ap = here();
    KILN_ASSIGN_OR_RETURN(std::string an, expectIdent("an attribute name"));
    for (auto &kv : attrs)
      if (kv.first == an)
        return parseError(ap, "duplicate attribute '" + an + "'");
    KILN_RETURN_IF_ERR(expect('=', "after the attribute name"));
    KILN_ASSIGN_OR_RETURN(AttrValue v, attrValue());
    attrs.emplace_back(an, std::move(v));
    return Error::success();
  }));
  return attrs;
}

} // namespace kiln::textparse
