// The ONNX importer's driver: parses the model, checks it, creates placeholders and
// constants, converts nodes in order (folding constant subgraphs), and saves the outputs.

#include "ONNXImporter.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <map>
#include <set>

namespace kiln {

Placeholder *ONNXModel::getInput(const std::string &name) const {
  auto it = inputs.find(name);
  return it == inputs.end() ? nullptr : it->second;
}

Placeholder *ONNXModel::getOutputPlaceholder(const std::string &name) const {
  auto it = outputs.find(name);
  if (it == outputs.end())
    return nullptr;
  return dyn_cast<Placeholder>(it->second->getOutput().getNode());
}

namespace onnximport {

namespace {
/// The newest opset whose semantics the converters implement.
constexpr int64_t kMaxOpset = 17;

bool isDefaultDomain(const std::string &d) { return d.empty() || d == "ai.onnx"; }

/// The converter map's key of \p n: its op type, prefixed by its domain outside the ONNX
/// domain ("com.microsoft.QLinearAdd").
std::string converterKey(const onnx::NodeProto &n) {
  return isDefaultDomain(n.domain()) ? n.op_type() : n.domain() + "." + n.op_type();
}

} // namespace

Importer::Importer(Function *f, const ONNXLoadOptions &o) : F(f), M(f->getParent()), opts(o) {
  registerConvConverters(converters_);
  registerLinalgConverters(converters_);
  registerNormConverters(converters_);
  registerElementwiseConverters(converters_);
  registerDataConverters(converters_);
  registerReduceConverters(converters_);
  registerQuantConverters(converters_);
}

std::string Importer::nodeName(const onnx::NodeProto &n) const {
  if (!n.name().empty())
    return n.name();
  auto it = nodeIndex_.find(&n);
  return n.op_type() + "#" + std::to_string(it == nodeIndex_.end() ? -1 : it->second);
}

std::string Importer::opName(const onnx::NodeProto &n, const char *part) const {
  std::string base = n.name().empty() ? (n.output_size() ? n.output(0) : n.op_type())
                                      : n.name();
  return part ? base + "." + part : base;
}

std::string Importer::describe(const onnx::NodeProto &n) const {
  return "node '" + nodeName(n) + "' (" + n.op_type() + ", opset " + std::to_string(opset) +
         ")";
}

bool Importer::isOutputUsed(const onnx::NodeProto &n, int i) const {
  if (!hasOutput(n, i))
    return false;
  auto it = uses_.find(n.output(i));
  return it != uses_.end() && it->second > 0;
}

const Tensor *Importer::constInput(const onnx::NodeProto &n, int i) const {
  if (!hasInput(n, i))
    return nullptr;
  auto it = consts_.find(n.input(i));
  return it == consts_.end() ? nullptr : &it->second.get();
}

const Tensor *Importer::constInputAsStored(const onnx::NodeProto &n, int i) const {
  if (!hasInput(n, i))
    return nullptr;
  auto it = consts_.find(n.input(i));
  return it == consts_.end() ? nullptr : &it->second.asStored();
}

namespace {
/// Adds to \p uses every input of the nodes in \p n's subgraph attributes, at any depth.
void countBodyReads(const onnx::NodeProto &n, std::unordered_map<std::string, unsigned> &uses) {
  for (const auto &a : n.attribute()) {
    std::vector<const onnx::GraphProto *> bodies;
    if (a.has_g())
      bodies.push_back(&a.g());
    for (const auto &b : a.graphs())
      bodies.push_back(&b);
    for (const onnx::GraphProto *b : bodies)
      for (const auto &m : b->node()) {
        for (const auto &in : m.input())
          uses[in]++;
        countBodyReads(m, uses);
      }
  }
}
} // namespace

void Importer::releaseConstInput(const onnx::NodeProto &n, int i) {
  if (!hasInput(n, i))
    return;
  auto c = consts_.find(n.input(i));
  auto u = uses_.find(n.input(i));
  if (c == consts_.end() || c->second.c || u == uses_.end() || u->second != 1)
    return;
  consts_.erase(c); // a later reader would find no value: an error, never stale data
}

Expected<const Tensor *> Importer::requireConstInput(const onnx::NodeProto &n, int i,
                                                     const char *what) {
  if (!hasInput(n, i))
    return parseError(n, "the ", what, " input (input ", i, ") is missing");
  if (const Tensor *t = constInput(n, i))
    return t;
  return unsupported(n, "the ", what, " input '", n.input(i),
                     "' is computed at run time; kiln needs it constant at load time");
}

std::optional<std::vector<const Tensor *>>
Importer::allConst(const onnx::NodeProto &n) const {
  std::vector<const Tensor *> ins;
  for (int i = 0; i < n.input_size(); i++) {
    if (!hasInput(n, i)) {
      ins.push_back(nullptr);
      continue;
    }
    const Tensor *t = constInput(n, i);
    if (!t || t->size() > kMaxFoldElements)
      return std::nullopt;
    ins.push_back(t);
  }
  return ins;
}

Expected<NodeValue> Importer::input(const onnx::NodeProto &n, int i) {
  if (!hasInput(n, i))
    return parseError(n, "required input ", i, " is missing");
  const std::string &name = n.input(i);
  auto v = values_.find(name);
  if (v != values_.end())
    return v->second;
  auto c = consts_.find(name);
  if (c == consts_.end())
    return parseError(n, "input '", name, "' is not defined");
  Known &k = c->second;
  if (k.get().size() == 0)
    return unsupported(n, "input '", name, "' is an empty tensor (",
                       k.get().getType().toString(), ")");
  // An 8-bit initializer keeps its 8-bit tensor for the quantization converters.
  k.c = M->createConstant(name, isEightBitKind(k.owned.getElementType()) ? std::move(k.wide)
                                                                         : std::move(k.owned));
  NodeValue nv(k.c);
  values_[name] = nv;
  return nv;
}

Expected<Dims> Importer::inputDims(const onnx::NodeProto &n, int i) {
  if (const Tensor *t = constInput(n, i))
    return t->dims();
  KILN_ASSIGN_OR_RETURN(NodeValue v, input(n, i));
  return v.dims();
}

Expected<ElemKind> Importer::inputKind(const onnx::NodeProto &n, int i) {
  if (const Tensor *t = constInput(n, i))
    return t->getElementType();
  KILN_ASSIGN_OR_RETURN(NodeValue v, input(n, i));
  return v.getElementType();
}

void Importer::setOutput(const onnx::NodeProto &n, int i, NodeValue v) {
  if (hasOutput(n, i))
    values_[n.output(i)] = v;
}

void Importer::setOutputConst(const onnx::NodeProto &n, int i, Tensor t) {
  if (hasOutput(n, i)) {
    Known k;
    k.owned = std::move(t);
    consts_[n.output(i)] = std::move(k);
  }
}

const onnx::AttributeProto *Importer::attr(const onnx::NodeProto &n, const char *name) const {
  for (const auto &a : n.attribute())
    if (a.name() == name)
      return &a;
  return nullptr;
}

int64_t Importer::attrInt(const onnx::NodeProto &n, const char *name, int64_t def) const {
  const onnx::AttributeProto *a = attr(n, name);
  return a && a->has_i() ? a->i() : def;
}

float Importer::attrFloat(const onnx::NodeProto &n, const char *name, float def) const {
  const onnx::AttributeProto *a = attr(n, name);
  return a && a->has_f() ? a->f() : def;
}

std::string Importer::attrString(const onnx::NodeProto &n, const char *name,
                                 const std::string &def) const {
  const onnx::AttributeProto *a = attr(n, name);
  return a && a->has_s() ? a->s() : def;
}

std::vector<int64_t> Importer::attrInts(const onnx::NodeProto &n, const char *name) const {
  const onnx::AttributeProto *a = attr(n, name);
  if (!a)
    return {};
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

NodeValue Importer::makeConstant(const std::string &name, Tensor t) {
  return NodeValue(M->createConstant(name, std::move(t)));
}

NodeValue Importer::splat(const std::string &name, ElemKind k, const Dims &dims, double v) {
  return F->createSplat(name, M->uniqueType(k, dims), float(v));
}

Error Importer::broadcastAll(const onnx::NodeProto &n, std::vector<NodeValue> &vs) {
  Dims target = vs[0].dims();
  for (size_t i = 1; i < vs.size(); i++) {
    Dims out;
    if (!broadcastShapes(target, vs[i].dims(), out))
      return parseError(n, "operand shapes ", vs[0].getType()->toString(), " and ",
                        vs[i].getType()->toString(), " do not broadcast");
    target = out;
  }
  for (size_t i = 0; i < vs.size(); i++)
    if (vs[i].dims() != target)
      vs[i] = F->createBroadcast(opName(n, "broadcast"), vs[i], target.vec());
  return Error::success();
}

NodeValue Importer::reshape(const std::string &name, NodeValue v, const Dims &dims) {
  if (v.dims() == dims)
    return v;
  return F->createReshape(name, v, dims.vec());
}

Expected<Dims> Importer::toDims(const onnx::NodeProto &n, const std::vector<dim_t> &v) const {
  if (v.size() > kMaxDims)
    return unsupported(n, "a result of rank ", v.size(), " (kiln supports at most ", kMaxDims,
                       ")");
  uint64_t total = 1;
  for (dim_t d : v) {
    if (d != 0 && total > opts.maxTensorElements / d)
      return parseError(n, "a result shape is absurdly large");
    total *= d;
  }
  return Dims(v);
}

Expected<int64_t> Importer::normAxis(const onnx::NodeProto &n, int64_t axis, int64_t rank,
                                     bool inclusive) const {
  // Valid axes: [-rank, rank), or [-rank, rank] for \p inclusive (Flatten).
  if (axis < -rank || axis > (inclusive ? rank : rank - 1))
    return parseError(n, "axis ", axis, " is out of range for rank ", rank);
  return axis < 0 ? axis + rank : axis;
}

Error Importer::bindSymbols(const onnx::GraphProto &g) {
  symbols_.clear();
  for (const auto &kv : opts.symbolicDims)
    symbols_[kv.first] = kv.second;
  // Shapes the caller fixed give their symbols' values (the first one given wins; the
  // shapes replace the model's, so checkONNXInputShapes is where they are checked).
  for (const auto &vi : g.input()) {
    auto fixed = opts.inputShapes.find(vi.name());
    if (fixed == opts.inputShapes.end() || !vi.type().has_tensor_type() ||
        !vi.type().tensor_type().has_shape())
      continue;
    const onnx::TensorShapeProto &shape = vi.type().tensor_type().shape();
    if (size_t(shape.dim_size()) != fixed->second.size())
      continue;
    for (int i = 0; i < shape.dim_size(); i++)
      if (shape.dim(i).has_dim_param() && !shape.dim(i).dim_param().empty())
        symbols_.emplace(shape.dim(i).dim_param(), fixed->second[i]);
  }
  return Error::success();
}

Expected<Dims> Importer::inputShape(const onnx::ValueInfoProto &vi) {
  const std::string &name = vi.name();
  auto fixed = opts.inputShapes.find(name);
  if (fixed != opts.inputShapes.end()) {
    std::vector<int64_t> v;
    for (dim_t d : fixed->second) {
      if (d > dim_t(std::numeric_limits<int64_t>::max()))
        return makeError(ErrorCode::InvalidArgument, "input '", name, "': bad fixed shape");
      v.push_back(int64_t(d));
    }
    return checkedDims(v, opts.maxTensorElements, "input '" + name + "'");
  }
  if (!vi.type().has_tensor_type())
    return makeError(ErrorCode::Unsupported, "graph input '", name,
                     "' is not a tensor (sequences and maps are not supported)");
  const auto &tt = vi.type().tensor_type();
  if (!tt.has_shape())
    return makeError(ErrorCode::ModelParse, "graph input '", name,
                     "' has no shape; fix it with ONNXLoadOptions::inputShapes");
  std::vector<int64_t> v;
  for (const auto &d : tt.shape().dim()) {
    if (d.has_dim_value()) {
      v.push_back(d.dim_value());
      continue;
    }
    std::string sym = d.has_dim_param() ? d.dim_param() : "";
    auto s = symbols_.find(sym);
    if (!sym.empty() && s != symbols_.end()) {
      v.push_back(int64_t(s->second));
    } else if (opts.defaultSymbolicDim) {
      v.push_back(int64_t(opts.defaultSymbolicDim));
    } else {
      return makeError(ErrorCode::InvalidArgument, "graph input '", name, "' dimension ",
                       v.size(), " is symbolic ('", sym, "'); give its value in "
                       "ONNXLoadOptions::symbolicDims or inputShapes");
    }
  }
  return checkedDims(v, opts.maxTensorElements, "graph input '" + name + "'");
}

Error Importer::collectUnsupported(const onnx::GraphProto &g) {
  struct Info {
    unsigned count = 0;
    std::vector<std::string> names;
  };
  std::map<std::string, Info> bad;
  for (const auto &n : g.node()) {
    std::string key = converterKey(n);
    if (converters_.count(key))
      continue;
    Info &i = bad[key];
    i.count++;
    if (i.names.size() < 3)
      i.names.push_back(nodeName(n));
  }
  if (bad.empty())
    return Error::success();
  std::ostringstream os;
  os << "unsupported ONNX operators at opset " << opset << ": ";
  bool first = true;
  for (const auto &[op, info] : bad) {
    os << (first ? "" : "; ") << op << " (" << info.count << (info.count == 1 ? " node: " : " nodes: ");
    for (size_t k = 0; k < info.names.size(); k++)
      os << (k ? ", " : "") << "'" << info.names[k] << "'";
    os << (info.count > info.names.size() ? ", ...)" : ")");
    first = false;
  }
  return Error(ErrorCode::Unsupported, os.str());
}

Error Importer::checkOutputs(const onnx::NodeProto &n) {
  if (F->hasRecordedErrors()) {
    Error e = F->verify();
    std::string msg = e ? e.message() : std::string("a builder rejected its operands");
    return parseError(n, "inconsistent shapes or types: ", msg);
  }
  for (int i = 0; i < n.output_size(); i++) {
    if (!hasOutput(n, i))
      continue;
    const std::string &o = n.output(i);
    bool bound = values_.count(o) || consts_.count(o);
    if (!bound) {
      if (isOutputUsed(n, i))
        return unsupported(n, "output ", i, " ('", o, "') is not supported");
      continue;
    }
    auto v = values_.find(o);
    if (v != values_.end() && v->second.getType()->numElements() == 0)
      return unsupported(n, "output '", o, "' is an empty tensor (",
                         v->second.getType()->toString(), ")");
  }
  return Error::success();
}

Error Importer::convertNode(const onnx::NodeProto &n) {
  int required = converters_.requiredInputs(converterKey(n), opset);
  for (int i = 0; i < required; i++)
    if (!hasInput(n, i))
      return parseError(n, "expects at least ", required, " inputs; input ", i,
                        i < n.input_size() ? " is empty" : " is missing");
  for (int i = 0; i < n.input_size(); i++) {
    if (n.input(i).empty())
      continue;
    if (!values_.count(n.input(i)) && !consts_.count(n.input(i)))
      return parseError(n, "input '", n.input(i), "' is not defined (a missing initializer, "
                        "or the nodes are not in topological order)");
  }
  for (int i = 0; i < n.output_size(); i++)
    if (!n.output(i).empty() && (values_.count(n.output(i)) || consts_.count(n.output(i))))
      return parseError(n, "output '", n.output(i), "' is defined twice");

  if (n.op_type() == "Constant" && n.output_size() == 1)
    for (const auto &a : n.attribute())
      if (a.name() == "value" && a.has_t())
        onnxTypes_[n.output(0)] = a.t().data_type();
  KILN_RETURN_IF_ERR(converters_.at(converterKey(n))(*this, n));
  return checkOutputs(n);
}

Error Importer::convertSubgraph(const onnx::NodeProto &owner, const onnx::GraphProto &g,
                                std::vector<SubValue> ins, std::vector<SubValue> &outs) {
  if (int(ins.size()) > g.input_size())
    return parseError(owner, "the subgraph has ", g.input_size(), " inputs; ", ins.size(),
                      " are bound");
  if (g.sparse_initializer_size())
    return unsupported(owner, "sparse initializers in a subgraph are not supported");
  std::vector<std::string> defined;
  auto define = [&](const std::string &name, SubValue v) -> Error {
    if (name.empty())
      return Error::success();
    if (values_.count(name) || consts_.count(name))
      return parseError(owner, "subgraph name '", name, "' shadows an outer value");
    defined.push_back(name);
    if (v.c) {
      Known k;
      k.owned = std::move(*v.c);
      consts_[name] = std::move(k);
    } else {
      values_[name] = v.v;
    }
    return Error::success();
  };
  for (size_t i = 0; i < ins.size(); i++)
    KILN_RETURN_IF_ERR(define(g.input(int(i)).name(), std::move(ins[i])));
  for (const auto &t : g.initializer()) {
    Expected<Tensor> tt = tensorFromProto(t, opts.maxTensorElements);
    if (!tt)
      return tt.takeError().addContext(describe(owner));
    KILN_RETURN_IF_ERR(define(t.name(), SubValue{NodeValue(), std::move(tt).get()}));
  }
  for (const auto &n : g.node())
    for (const auto &in : n.input())
      uses_[in]++;
  for (const auto &o : g.output())
    uses_[o.name()]++;
  Error err = Error::success();
  for (const auto &n : g.node()) {
    if (!isDefaultDomain(n.domain()) || !converters_.count(n.op_type())) {
      err = unsupported(n, "operator ", n.op_type(), " inside a subgraph is not supported");
      break;
    }
    if ((err = convertNode(n)))
      break;
    for (const auto &o : n.output())
      if (!o.empty())
        defined.push_back(o);
  }
  outs.clear();
  for (int i = 0; !err && i < g.output_size(); i++) {
    const std::string &name = g.output(i).name();
    auto v = values_.find(name);
    auto c = consts_.find(name);
    if (v != values_.end())
      outs.push_back({v->second, std::nullopt});
    else if (c != consts_.end())
      outs.push_back({NodeValue(), c->second.get().clone()});
    else
      err = parseError(owner, "subgraph output '", name, "' is not produced");
  }
  for (const auto &n : g.node())
    for (const auto &in : n.input())
      uses_[in]--;
  for (const auto &o : g.output())
    uses_[o.name()]--;
  for (const std::string &name : defined) {
    values_.erase(name);
    consts_.erase(name);
  }
  return err;
}

void Importer::countUses(const onnx::GraphProto &g) {
  for (int i = 0; i < g.node_size(); i++)
    nodeIndex_[&g.node(i)] = i;
  for (const auto &n : g.node())
    for (const auto &in : n.input())
      uses_[in]++;
  for (const auto &o : g.output())
    uses_[o.name()]++;
  // Subgraphs (If, Loop, Scan bodies) may read outer values by name: they count as uses
  // too, so that releaseConstInput never frees a constant a body still reads.
  for (const auto &n : g.node())
    countBodyReads(n, uses_);
}

std::unordered_set<std::string> Importer::transposedOnLoad(const onnx::GraphProto &g) const {
  std::unordered_set<std::string> out;
  for (const auto &n : g.node()) {
    if (n.op_type() != "Gemm" || !isDefaultDomain(n.domain()) || n.input_size() < 2 ||
        !attrInt(n, "transB", 0))
      continue;
    auto u = uses_.find(n.input(1));
    if (u != uses_.end() && u->second == 1)
      out.insert(n.input(1));
  }
  return out;
}

Error Importer::importInitializers(const onnx::GraphProto &g) {
  // Only where the weights lie in a mapped file is reading them transposed a saving.
  std::unordered_set<std::string> transposed;
  if (&g == releasable_ && raw_ && file_)
    transposed = transposedOnLoad(g);
  for (int i = 0; i < g.initializer_size(); i++) {
    const onnx::TensorProto &t = g.initializer(i);
    if (t.name().empty())
      return makeError(ErrorCode::ModelParse, "an initializer has no name");
    if (consts_.count(t.name()))
      return makeError(ErrorCode::ModelParse, "initializer '", t.name(), "' is defined twice");
    const RawSpan *raw = &g == releasable_ && raw_ ? &(*raw_)[size_t(i)] : nullptr;
    RawSpan span;
    if (raw) { // read from the file itself where it is mapped (FileBytes::readInto)
      span = *raw;
      span.file = file_;
    }
    const bool transpose = transposed.count(t.name()) && t.dims_size() == 2 &&
                           t.data_type() == onnx::TensorProto::FLOAT;
    Expected<Tensor> tt =
        transpose ? transposedFromProto(t, opts.maxTensorElements, &span)
                  : tensorFromProto(t, opts.maxTensorElements, /*keepEightBit=*/true,
                                    raw ? &span : nullptr);
    if (!tt)
      return tt.takeError().addContext("initializer '" + t.name() + "'");
    if (raw && file_)
      file_->release(raw->data, raw->size);
    onnxTypes_[t.name()] = t.data_type();
    if (transpose)
      loadTransposed_.insert(t.name());
    Known k;
    k.owned = std::move(tt).get();
    consts_[t.name()] = std::move(k);
    // The tensor now holds the values: free the model's copy so that the weights are in
    // memory once, not twice, while the rest of the graph is imported.
    if (&g == releasable_)
      releaseTensorData(*releasable_->mutable_initializer(i));
  }
  return Error::success();
}

Error Importer::importInputs(const onnx::GraphProto &g, ONNXModel &out) {
  for (const auto &vi : g.input()) {
    const std::string &name = vi.name();
    if (consts_.count(name))
      continue; // An initializer: a constant, not a placeholder.
    if (name.empty())
      return makeError(ErrorCode::ModelParse, "a graph input has no name");
    if (values_.count(name))
      return makeError(ErrorCode::ModelParse, "graph input '", name, "' is declared twice");
    if (!vi.type().has_tensor_type())
      return makeError(ErrorCode::Unsupported, "graph input '", name, "' is not a tensor");
    onnxTypes_[name] = vi.type().tensor_type().elem_type();
    auto frozen = opts.constantInputs.find(name);
    if (frozen != opts.constantInputs.end() && frozen->second) {
      Known k;
      k.owned = frozen->second->clone();
      consts_[name] = std::move(k);
      continue;
    }
    KILN_ASSIGN_OR_RETURN(ElemKind kind, elemKindFromONNX(vi.type().tensor_type().elem_type()));
    KILN_ASSIGN_OR_RETURN(Dims dims, inputShape(vi));
    if (dims.product() == 0)
      return makeError(ErrorCode::Unsupported, "graph input '", name, "' is an empty tensor");
    Placeholder *ph = M->createPlaceholder(kind, dims, name);
    values_[name] = NodeValue(ph);
    out.inputNames.push_back(name);
    out.inputs[name] = ph;
  }
  return Error::success();
}

Error Importer::importOutputs(const onnx::GraphProto &g, ONNXModel &out) {
  for (const auto &o : g.output()) {
    const std::string &name = o.name();
    if (out.outputs.count(name))
      return makeError(ErrorCode::ModelParse, "graph output '", name, "' is declared twice");
    NodeValue v;
    auto it = values_.find(name);
    if (it != values_.end()) {
      v = it->second;
    } else {
      auto c = consts_.find(name);
      if (c == consts_.end())
        return makeError(ErrorCode::ModelParse, "graph output '", name,
                         "' is not produced by any node");
      if (c->second.get().size() == 0)
        return makeError(ErrorCode::Unsupported, "graph output '", name, "' is an empty tensor");
      if (!c->second.c) {
        Known &k = c->second;
        k.c = M->createConstant(name, isEightBitKind(k.owned.getElementType())
                                          ? k.owned.clone()
                                          : std::move(k.owned));
        values_[name] = NodeValue(c->second.c);
      }
      v = NodeValue(c->second.c);
    }
    out.outputNames.push_back(name);
    out.outputs[name] = F->createSave(name, v);
  }
  return Error::success();
}

Error Importer::importGraph(const onnx::GraphProto &g, ONNXModel &out) {
  graph_ = &g;
  countUses(g);
  KILN_RETURN_IF_ERR(bindSymbols(g)); // a shape the model refuses, before anything else
  KILN_RETURN_IF_ERR(collectUnsupported(g));
  if (g.sparse_initializer_size())
    return makeError(ErrorCode::Unsupported, "sparse initializers are not supported");
  KILN_RETURN_IF_ERR(importInitializers(g));
  KILN_RETURN_IF_ERR(importInputs(g, out));
  for (const auto &n : g.node()) {
    if (!converters_.count(converterKey(n)))
      return unsupported(n, "domain '", n.domain(), "' is not supported");
    KILN_RETURN_IF_ERR(convertNode(n));
  }
  KILN_RETURN_IF_ERR(importOutputs(g, out));
  if (F->hasRecordedErrors()) {
    Error e = F->verify();
    if (e)
      return makeError(ErrorCode::ModelParse, "inconsistent model: ", e.message());
  }
  return Error::success();
}

Expected<ONNXModel> Importer::import(onnx::ModelProto &model, const std::vector<RawSpan> *raw,
                                     const FileBytes *file) {
  if (raw && raw->size() != size_t(model.graph().initializer_size()))
    return makeError(ErrorCode::Internal, "the stripped model has ",
                     model.graph().initializer_size(), " initializers; its data has ",
                     raw->size());
  raw_ = raw;
  file_ = file;
  ONNXModel out;
  out.irVersion = model.ir_version();
  out.producer = model.producer_name();
  opset = 0;
  for (const auto &os : model.opset_import())
    if (isDefaultDomain(os.domain()))
      opset = os.version();
  if (model.opset_import_size() == 0)
    opset = 1; // IR version 1-2 models predate opset_import.
  if (!model.has_graph())
    return makeError(ErrorCode::ModelParse, "the model has no graph");
  if (opset <= 0) {
    // Only other domains: fine if no node uses the default one (they are reported as
    // unsupported operators).
    for (const auto &n : model.graph().node())
      if (isDefaultDomain(n.domain()))
        return makeError(ErrorCode::ModelParse, "the model imports no opset of the ONNX "
                         "domain but node '", n.name(), "' (", n.op_type(), ") uses it");
    opset = 1;
  }
  if (opset > kMaxOpset)
    return makeError(ErrorCode::Unsupported, "opset ", opset, " is newer than kiln supports (",
                     kMaxOpset, ")");
  if (F->hasRecordedErrors())
    return makeError(ErrorCode::InvalidArgument, "loadONNX: the target function '",
                     F->getName(), "' already has builder errors");
  out.opset = opset;
  releasable_ = model.mutable_graph();
  KILN_RETURN_IF_ERR(importGraph(model.graph(), out));
  return out;
}

} // namespace onnximport

namespace {
/// Imports a parsed model into \p f; the model's weight data is freed as it is imported.
/// With \p raw, the model was parsed stripped of its initializers' raw_data, which is
/// there (and in \p file's pages, released as they are read, when it is given).
Expected<ONNXModel> importParsed(onnx::ModelProto &model, Function *f, const ONNXLoadOptions &opts,
                                 const std::vector<onnximport::RawSpan> *raw = nullptr,
                                 const onnximport::FileBytes *file = nullptr) {
  onnximport::Importer imp(f, opts);
  return imp.import(model, raw, file);
}

/// Parses the serialized model in [data, data + size) without copying its initializers'
/// raw_data (the weights), which stay where they are until each is read into its tensor:
/// into \p model, with \p raw saying where each initializer's data is (\p stripped). Falls
/// back to a whole parse (raw empty) when the bytes do not scan, so that a malformed model
/// gets protobuf's verdict. False when nothing parses.
bool parseModel(const char *data, size_t size, onnx::ModelProto &model,
                std::vector<onnximport::RawSpan> &raw, bool &stripped) {
  std::string bytes;
  stripped = onnximport::stripInitializerData(data, size, bytes, raw) &&
             model.ParseFromArray(bytes.data(), int(bytes.size()));
  if (stripped)
    return true;
  raw.clear();
  model.Clear();
  return model.ParseFromArray(data, int(size));
}
} // namespace

static Expected<ONNXModel> loadBufferUnguarded(const void *data, size_t size, Function *f,
                                               const ONNXLoadOptions &opts) {
  if (!f)
    return makeError(ErrorCode::InvalidArgument, "loadONNX: null function");
  if (size > size_t(std::numeric_limits<int>::max()))
    return makeError(ErrorCode::ModelParse, "the model is too large for protobuf (", size,
                     " bytes; models with external data are not supported)");
  onnx::ModelProto model;
  std::vector<onnximport::RawSpan> raw;
  bool stripped = false;
  if (!parseModel(static_cast<const char *>(data), size, model, raw, stripped))
    return makeError(ErrorCode::ModelParse,
                     "cannot parse the ONNX model (the file is truncated or not an ONNX model)");
  return importParsed(model, f, opts, stripped ? &raw : nullptr);
}

Expected<ONNXModel> loadONNXFromBuffer(const void *data, size_t size, Function *f,
                                       const ONNXLoadOptions &opts) {
  return guardHostMemory("loading an ONNX model from memory",
                         [&] { return loadBufferUnguarded(data, size, f, opts); });
}

namespace {

using google::protobuf::io::CodedInputStream;
using WFL = google::protobuf::internal::WireFormatLite;

/// Reads the length-delimited field the stream is at into a sub-range [*p, *p + *n).
bool readDelimited(CodedInputStream &in, const uint8_t *base, const uint8_t **p, int *n) {
  uint32_t len;
  if (!in.ReadVarint32(&len) || len > uint32_t(std::numeric_limits<int>::max()))
    return false;
  const void *data;
  int avail;
  if (!in.GetDirectBufferPointer(&data, &avail) && len != 0)
    return false;
  if (len != 0 && avail < int(len))
    return false;
  *p = len ? static_cast<const uint8_t *>(data) : base;
  *n = int(len);
  return in.Skip(int(len));
}

/// The name (field 8) of the TensorProto in [p, p + n), skipping its data unparsed.
bool scanTensorName(const uint8_t *p, int n, std::string &name) {
  CodedInputStream in(p, n);
  while (uint32_t tag = in.ReadTag()) {
    if (tag == WFL::MakeTag(8, WFL::WIRETYPE_LENGTH_DELIMITED)) {
      if (!WFL::ReadString(&in, &name))
        return false;
    } else if (!WFL::SkipField(&in, tag)) {
      return false;
    }
  }
  return in.ConsumedEntireMessage();
}

/// The initializer names, graph inputs and (when \p outputs is given) graph outputs of the
/// GraphProto in [p, p + n).
bool scanGraph(const uint8_t *p, int n, std::vector<std::string> &inits,
               std::vector<onnx::ValueInfoProto> &inputs,
               std::vector<onnx::ValueInfoProto> *outputs = nullptr) {
  CodedInputStream in(p, n);
  while (uint32_t tag = in.ReadTag()) {
    if (tag == WFL::MakeTag(5, WFL::WIRETYPE_LENGTH_DELIMITED)) { // initializer
      const uint8_t *q;
      int m;
      std::string name;
      if (!readDelimited(in, p, &q, &m) || !scanTensorName(q, m, name))
        return false;
      inits.push_back(std::move(name));
    } else if (tag == WFL::MakeTag(11, WFL::WIRETYPE_LENGTH_DELIMITED)) { // input
      const uint8_t *q;
      int m;
      inputs.emplace_back();
      if (!readDelimited(in, p, &q, &m) || !inputs.back().ParseFromArray(q, m))
        return false;
    } else if (outputs && tag == WFL::MakeTag(12, WFL::WIRETYPE_LENGTH_DELIMITED)) { // output
      const uint8_t *q;
      int m;
      outputs->emplace_back();
      if (!readDelimited(in, p, &q, &m) || !outputs->back().ParseFromArray(q, m))
        return false;
    } else if (!WFL::SkipField(&in, tag)) {
      return false;
    }
  }
  return in.ConsumedEntireMessage();
}

/// The graph inputs that are not initializers, without parsing the weights: walks the
/// wire format of the ModelProto in [data, data + size) for the graph's (field 7)
/// initializer names and inputs. Repeated graph fields merge, as in a full parse. False
/// when the bytes do not scan.
bool scanInputs(const char *data, size_t size, std::vector<onnx::ValueInfoProto> &out,
                std::vector<onnx::ValueInfoProto> *outputs = nullptr) {
  if (size > size_t(std::numeric_limits<int>::max()))
    return false;
  const uint8_t *base = reinterpret_cast<const uint8_t *>(data);
  CodedInputStream in(base, int(size));
  std::vector<std::string> inits;
  std::vector<onnx::ValueInfoProto> inputs;
  while (uint32_t tag = in.ReadTag()) {
    if (tag == WFL::MakeTag(7, WFL::WIRETYPE_LENGTH_DELIMITED)) {
      const uint8_t *q;
      int m;
      if (!readDelimited(in, base, &q, &m) || !scanGraph(q, m, inits, inputs, outputs))
        return false;
    } else if (!WFL::SkipField(&in, tag)) {
      return false;
    }
  }
  if (!in.ConsumedEntireMessage())
    return false;
  std::set<std::string> initSet(inits.begin(), inits.end());
  out.clear();
  for (auto &vi : inputs)
    if (!initSet.count(vi.name()))
      out.push_back(std::move(vi));
  return true;
}

bool scanInputNames(const onnximport::FileBytes &buf, std::vector<std::string> &names) {
  std::vector<onnx::ValueInfoProto> inputs;
  if (!scanInputs(buf.data(), buf.size(), inputs))
    return false;
  names.clear();
  for (const auto &vi : inputs)
    names.push_back(vi.name());
  return true;
}

/// What the model declares of each input in \p inputs.
std::vector<ONNXInputInfo> inputInfo(const std::vector<onnx::ValueInfoProto> &inputs) {
  std::vector<ONNXInputInfo> out;
  for (const auto &vi : inputs) {
    ONNXInputInfo info;
    info.name = vi.name();
    if (vi.type().has_tensor_type() && vi.type().tensor_type().has_shape()) {
      info.hasShape = true;
      for (const auto &d : vi.type().tensor_type().shape().dim()) {
        // Some exporters write 0 for an unknown dimension.
        info.dims.push_back(d.has_dim_value() && d.dim_value() > 0 ? d.dim_value() : -1);
        info.symbols.push_back(d.has_dim_value() ? "" : d.dim_param());
      }
    }
    out.push_back(std::move(info));
  }
  return out;
}

std::string shapeList(const std::vector<dim_t> &dims) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); i++)
    out += (i ? ", " : "") + std::to_string(dims[i]);
  return out + "]";
}

} // namespace

bool ONNXInputInfo::isStatic() const {
  return hasShape && std::none_of(dims.begin(), dims.end(), [](int64_t d) { return d < 0; });
}

std::string ONNXInputInfo::shapeString() const {
  if (!hasShape)
    return "[any shape]";
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); i++) {
    out += i ? ", " : "";
    if (dims[i] >= 0)
      out += std::to_string(dims[i]);
    else
      out += symbols[i].empty() ? "?" : symbols[i];
  }
  return out + "]";
}

namespace {

using google::protobuf::io::CodedOutputStream;

/// Appends a length-delimited field \p field holding \p payload.
void appendDelimited(std::string &out, int field, const std::string &payload) {
  uint8_t head[10]; // two varints of at most 5 bytes
  uint8_t *e = CodedOutputStream::WriteVarint32ToArray(
      WFL::MakeTag(field, WFL::WIRETYPE_LENGTH_DELIMITED), head);
  e = CodedOutputStream::WriteVarint32ToArray(uint32_t(payload.size()), e);
  out.append(reinterpret_cast<const char *>(head), size_t(e - head));
  out += payload;
}

/// Copies the message in [p, p + n) into \p out field by field, except the
/// length-delimited fields \p field: each goes to \p strip (its payload) instead, which
/// appends what replaces it, if anything; false from strip fails the copy.
template <typename Strip>
bool copyExcept(const uint8_t *p, int n, int field, std::string &out, Strip strip) {
  CodedInputStream in(p, n);
  for (;;) {
    int start = in.CurrentPosition();
    uint32_t tag = in.ReadTag();
    if (tag == 0)
      break;
    if (tag == WFL::MakeTag(field, WFL::WIRETYPE_LENGTH_DELIMITED)) {
      const uint8_t *q;
      int m;
      if (!readDelimited(in, p, &q, &m) || !strip(q, m))
        return false;
      continue;
    }
    if (!WFL::SkipField(&in, tag))
      return false;
    out.append(reinterpret_cast<const char *>(p) + start, size_t(in.CurrentPosition() - start));
  }
  return in.ConsumedEntireMessage();
}

} // namespace

namespace onnximport {

bool stripInitializerData(const char *data, size_t size, std::string &stripped,
                          std::vector<RawSpan> &raw) {
  if (size > size_t(std::numeric_limits<int>::max()))
    return false;
  stripped.clear();
  raw.clear();
  auto tensor = [&](const uint8_t *q, int m, std::string &out) {
    RawSpan span;
    bool ok = copyExcept(q, m, 9, out, [&](const uint8_t *r, int k) { // raw_data: the last wins
      span = RawSpan{reinterpret_cast<const char *>(r), size_t(k), true};
      return true;
    });
    raw.push_back(span);
    return ok;
  };
  auto graph = [&](const uint8_t *q, int m, std::string &out) {
    return copyExcept(q, m, 5, out, [&](const uint8_t *r, int k) { // initializer
      std::string t;
      if (!tensor(r, k, t))
        return false;
      appendDelimited(out, 5, t);
      return true;
    });
  };
  return copyExcept(reinterpret_cast<const uint8_t *>(data), int(size), 7, stripped,
                    [&](const uint8_t *q, int m) { // graph
                      std::string g;
                      if (!graph(q, m, g))
                        return false;
                      appendDelimited(stripped, 7, g);
                      return true;
                    });
}

} // namespace onnximport

Expected<ONNXSignature> getONNXSignatureFromBuffer(const void *data, size_t size) {
  std::vector<onnx::ValueInfoProto> inputs, outputs;
  if (!scanInputs(static_cast<const char *>(data), size, inputs, &outputs)) {
    // Not well-formed: a full parse reports it (or, should it succeed, gives the inputs).
    onnx::ModelProto model;
    if (size > size_t(std::numeric_limits<int>::max()) || !model.ParseFromArray(data, int(size)))
      return makeError(ErrorCode::ModelParse,
                       "cannot parse the ONNX model (the file is truncated or not an ONNX model)");
    std::set<std::string> inits;
    for (const auto &t : model.graph().initializer())
      inits.insert(t.name());
    inputs.clear();
    for (const auto &vi : model.graph().input())
      if (!inits.count(vi.name()))
        inputs.push_back(vi);
    outputs.assign(model.graph().output().begin(), model.graph().output().end());
  }
  ONNXSignature sig;
  sig.inputs = inputInfo(inputs);
  for (const auto &vi : outputs)
    sig.outputNames.push_back(vi.name());
  return sig;
}

static Expected<ONNXSignature> signatureUnguarded(const std::string &path) {
  onnximport::FileBytes buf;
  if (!buf.open(path))
    return makeError(ErrorCode::NotFound, "cannot open ONNX model '", path, "'");
  Expected<ONNXSignature> sig = getONNXSignatureFromBuffer(buf.data(), buf.size());
  if (!sig)
    return sig.takeError().addContext("reading '" + path + "'");
  return sig;
}

Expected<ONNXSignature> getONNXSignature(const std::string &path) {
  return guardHostMemory("reading '" + path + "'", [&] { return signatureUnguarded(path); });
}

Error checkONNXInputShapes(const std::vector<ONNXInputInfo> &inputs,
                           const std::map<std::string, std::vector<dim_t>> &shapes) {
  std::map<std::string, std::pair<dim_t, std::string>> symbols; // value, the input that set it
  for (const auto &kv : shapes)
    if (std::none_of(inputs.begin(), inputs.end(),
                     [&](const ONNXInputInfo &i) { return i.name == kv.first; })) {
      std::string known;
      for (const ONNXInputInfo &i : inputs)
        known += (known.empty() ? "" : ", ") + ("'" + i.name + "'");
      return makeError(ErrorCode::InvalidArgument, "the model has no input '", kv.first,
                       "'; its inputs: ", known.empty() ? "none" : known);
    }
  for (const ONNXInputInfo &in : inputs) {
    auto it = shapes.find(in.name);
    if (it == shapes.end() || !in.hasShape)
      continue;
    const std::vector<dim_t> &given = it->second;
    auto mismatch = [&](const std::string &why) {
      return makeError(ErrorCode::InvalidArgument, "input '", in.name, "': the model expects shape ",
                       in.shapeString(), ", given ", shapeList(given), " (", why, ")");
    };
    if (given.size() != in.dims.size())
      return mismatch("rank " + std::to_string(given.size()) + " instead of " +
                      std::to_string(in.dims.size()));
    for (size_t d = 0; d < given.size(); d++) {
      if (in.dims[d] >= 0) {
        if (uint64_t(in.dims[d]) != uint64_t(given[d]))
          return mismatch("dimension " + std::to_string(d) + " is fixed at " +
                          std::to_string(in.dims[d]));
        continue;
      }
      if (in.symbols[d].empty())
        continue;
      auto bound = symbols.emplace(in.symbols[d], std::make_pair(given[d], in.name));
      if (!bound.second && bound.first->second.first != given[d])
        return mismatch("dimension " + std::to_string(d) + " is '" + in.symbols[d] + "', which is " +
                        std::to_string(bound.first->second.first) + " in input '" +
                        bound.first->second.second + "'");
    }
  }
  return Error::success();
}

Expected<std::vector<std::string>> getONNXInputNames(const std::string &path) {
  onnximport::FileBytes buf;
  if (!buf.open(path))
    return makeError(ErrorCode::NotFound, "cannot open ONNX model '", path, "'");
  std::vector<std::string> scanned;
  if (buf.size() <= size_t(std::numeric_limits<int>::max()) && scanInputNames(buf, scanned))
    return scanned;
  // Not well-formed: a full parse reports it (or, should it succeed, gives the names).
  onnx::ModelProto model;
  if (buf.size() > size_t(std::numeric_limits<int>::max()) ||
      !model.ParseFromArray(buf.data(), int(buf.size())))
    return makeError(ErrorCode::ModelParse, "cannot parse the ONNX model '", path, "'");
  std::set<std::string> inits;
  for (const auto &t : model.graph().initializer())
    inits.insert(t.name());
  std::vector<std::string> names;
  for (const auto &vi : model.graph().input())
    if (!inits.count(vi.name()))
      names.push_back(vi.name());
  return names;
}

static Expected<ONNXModel> loadFileUnguarded(const std::string &path, Function *f,
                                             const ONNXLoadOptions &opts) {
  if (!f)
    return makeError(ErrorCode::InvalidArgument, "loadONNX: null function");
  // The file stays mapped while the model is imported: the parsed model holds no weights,
  // each initializer's values are copied from the file into its tensor, and the file's
  // pages under them are released as that happens, so that the weights are resident about
  // once (in the tensors), not in the file's pages, a parsed copy and the tensors.
  const std::string context = "loading '" + path + "'";
  onnximport::FileBytes buf;
  if (!buf.open(path))
    return makeError(ErrorCode::NotFound, "cannot open ONNX model '", path, "'");
  if (buf.size() > size_t(std::numeric_limits<int>::max()))
    return makeError(ErrorCode::ModelParse, "the model is too large for protobuf (", buf.size(),
                     " bytes; models with external data are not supported)")
        .addContext(context);
  onnx::ModelProto model;
  std::vector<onnximport::RawSpan> raw;
  bool stripped = false;
  if (!parseModel(buf.data(), buf.size(), model, raw, stripped))
    return makeError(ErrorCode::ModelParse, "cannot parse the ONNX model (the file is "
                     "truncated or not an ONNX model)")
        .addContext(context);
  Expected<ONNXModel> m = importParsed(model, f, opts, stripped ? &raw : nullptr, &buf);
  if (!m)
    return m.takeError().addContext(context);
  return m;
}

Expected<ONNXModel> loadONNX(const std::string &path, Function *f, const ONNXLoadOptions &opts) {
  return guardHostMemory("loading '" + path + "'",
                         [&] { return loadFileUnguarded(path, f, opts); });
}

} // namespace kiln
