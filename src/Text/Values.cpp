// The value layer of both IRs' text parsers: types, attribute values and lists, and the
// assignment of attribute values by name (see Values.h).

#include "src/Text/Values.h"

#include <cmath>
#include <limits>

namespace kiln::text {

namespace {

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
    fail(parseError(kindPos_, "missing attribute '" + std::string(name) + "': " + kind_ +
                                  " requires attribute '" + name + "' (" + expected + ")"));
    return nullptr;
  }

  AttrList &attrs_;
  const std::string &kind_;
  Pos kindPos_;
};

} // namespace

Error assignAttrs(AttrList &attrs, const std::string &kindName, Pos kindPos,
                  const std::function<void(AttrVisitor &)> &visitAttrs) {
  AttrSetter setter(attrs, kindName, kindPos);
  visitAttrs(setter);
  KILN_RETURN_IF_ERR(std::move(setter.err));
  for (auto &[an, av] : attrs)
    if (!av.used)
      return parseError(av.pos,
                        kindName + " has no attribute '" + an + "'" +
                            (setter.declared.empty() ? std::string(" (it has none)")
                                                     : " (attributes: " + setter.declared + ")"));
  return Error::success();
}

Expected<Type> parseType(Lexer &lx) {
  lx.skipSpace();
  Pos p = lx.here();
  KILN_ASSIGN_OR_RETURN(std::string kn, lx.expectIdent("a type"));
  ElemKind kind;
  if (!parseElemKind(kn, kind))
    return parseError(p, "unknown element kind '" + kn + "'");
  KILN_RETURN_IF_ERR(lx.expect('<', "after the element kind"));
  Dims dims;
  uint64_t bytes = elemSize(kind);
  lx.skipSpace();
  if (isDigit(lx.peek())) {
    while (true) {
      KILN_ASSIGN_OR_RETURN(Number d, lx.number());
      dim_t v;
      KILN_RETURN_IF_ERR(toDim(d, v));
      if (dims.size() == kMaxDims)
        return parseError(d.pos, "a type has at most " + std::to_string(kMaxDims) + " dimensions");
      dims.push_back(v);
      bytes = v && bytes > std::numeric_limits<uint64_t>::max() / 2 / v ? ~uint64_t(0) : bytes * v;
      if (!lx.consume('x'))
        break;
      lx.skipSpace();
      if (!isDigit(lx.peek()))
        return parseError(lx.here(), "expected a dimension" + lx.found());
    }
  }
  if (bytes == ~uint64_t(0))
    return parseError(p, "type is too large");
  float scale = 1.0f;
  int64_t offset = 0;
  if (isQuantized(kind)) {
    KILN_RETURN_IF_ERR(lx.expect(':', "before the scale of a quantized type"));
    KILN_ASSIGN_OR_RETURN(Number s, lx.number());
    KILN_RETURN_IF_ERR(toFloat(s, scale));
    if (!std::isfinite(scale))
      return parseError(s.pos, "the scale of a quantized type must be finite");
    KILN_RETURN_IF_ERR(lx.expect(':', "before the offset of a quantized type"));
    KILN_ASSIGN_OR_RETURN(Number o, lx.number());
    KILN_RETURN_IF_ERR(toInRange(o, INT32_MIN, INT32_MAX, offset));
  } else if (lx.consume(':')) {
    return parseError(p, "only quantized element kinds have a scale and an offset");
  }
  KILN_RETURN_IF_ERR(lx.expect('>', "to close the type"));
  return Type(kind, dims, scale, int32_t(offset));
}

Expected<AttrValue> parseAttrValue(Lexer &lx) {
  lx.skipSpace();
  AttrValue a;
  a.pos = lx.here();
  if (lx.peek() == '"') {
    a.kind = AttrValue::Str;
    KILN_ASSIGN_OR_RETURN(a.str, lx.quoted());
  } else if (lx.consume('[')) {
    a.kind = AttrValue::List;
    KILN_RETURN_IF_ERR(lx.commaList(']', "between list elements", [&]() -> Error {
      KILN_ASSIGN_OR_RETURN(Number n, lx.number());
      a.list.push_back(std::move(n));
      return Error::success();
    }));
  } else if (isIdentStart(lx.peek()) && !lx.startsWord("inf") && !lx.startsWord("nan")) {
    std::string w = lx.ident();
    if (w != "true" && w != "false")
      return parseError(a.pos, "expected an attribute value, found '" + w + "'");
    a.kind = AttrValue::Bool;
    a.b = w == "true";
  } else {
    KILN_ASSIGN_OR_RETURN(a.num, lx.number());
  }
  return a;
}

Expected<AttrList> parseAttrList(Lexer &lx) {
  AttrList attrs;
  if (!lx.consume('{'))
    return attrs;
  KILN_RETURN_IF_ERR(lx.commaList('}', "between attributes", [&]() -> Error {
    lx.skipSpace();
    Pos ap = lx.here();
    KILN_ASSIGN_OR_RETURN(std::string an, lx.expectIdent("an attribute name"));
    for (auto &kv : attrs)
      if (kv.first == an)
        return parseError(ap, "duplicate attribute '" + an + "'");
    KILN_RETURN_IF_ERR(lx.expect('=', "after the attribute name"));
    KILN_ASSIGN_OR_RETURN(AttrValue v, parseAttrValue(lx));
    attrs.emplace_back(an, std::move(v));
    return Error::success();
  }));
  return attrs;
}

} // namespace kiln::text
