// The profile-guided float-to-int8 transform (kiln/Quantization/Quantize.h).

#include "kiln/Quantization/Quantize.h"
#include "kiln/Passes/Pipeline.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace kiln {

std::string QuantizationReport::toString() const {
  std::ostringstream os;
  os << quantizedNodes << " nodes quantized, " << quantizeNodes << " Quantize, "
     << dequantizeNodes << " Dequantize, " << rescaleNodes << " RescaleQuantized ("
     << foldedRescales << " folded into their producer), " << foldedIntoRelu
     << " producers given their Relu's grid, " << identityRelus
     << " Relus dropped as identities, " << keptFloat.size()
     << " quantizable nodes kept in float";
  for (const auto &k : keptFloat)
    os << "\n  " << k.first << ": " << k.second;
  return os.str();
}

Error prepareForQuantization(Function *f) {
  Pipeline p = getDefaultPipeline();
  p.name = "prepare-quantization";
  std::vector<PipelineStep> steps;
  for (const PipelineStep &s : p.steps)
    if (std::find(s.passes.begin(), s.passes.end(), "lower") == s.passes.end())
      steps.push_back(s);
  p.steps = std::move(steps);
  Expected<PipelineReport> r = runPipeline(f, p, nullptr);
  if (!r)
    return r.takeError();
  return Error::success();
}

namespace {

/// How a quantizable kind takes its operands and picks its output type.
enum class Rule {
  Weighted,    ///< Convolution / FullyConnected: activation, constant weights, bias
  Free,        ///< activations in, output type from its own profile
  SameAsInput, ///< data movement and pooling: the output keeps operand 0's type
  Concat,      ///< output from its profile, every input rescaled to it
  ClipAsRelu,  ///< Clip(0, Max): a Relu whose output grid saturates at Max
};

bool ruleOf(NodeKind k, Rule &r) {
  switch (k) {
  case NodeKind::Convolution:
  case NodeKind::FullyConnected:
    r = Rule::Weighted;
    return true;
  case NodeKind::MatMul:
  case NodeKind::BatchMatMul: // attention's Q K^T and P V
  case NodeKind::BatchedAdd:
  case NodeKind::Add:
  case NodeKind::Sub:
  case NodeKind::Mul:
  case NodeKind::Max:
  case NodeKind::Min:
  case NodeKind::Relu:
  case NodeKind::AvgPool:         // an average is narrower than what it averages:
  case NodeKind::AdaptiveAvgPool: // its own grid is finer
    r = Rule::Free;
    return true;
  case NodeKind::MaxPool:
  case NodeKind::Reshape:
  case NodeKind::Transpose:
  case NodeKind::Slice:
    r = Rule::SameAsInput;
    return true;
  case NodeKind::Concat:
    r = Rule::Concat;
    return true;
  case NodeKind::Clip:
    r = Rule::ClipAsRelu;
    return true;
  default:
    return false;
  }
}

/// Nodes in an order where operands come first.
std::vector<Node *> topoOrder(Function *f) {
  std::vector<Node *> order;
  std::unordered_set<Node *> done;
  std::vector<std::pair<Node *, unsigned>> stack;
  for (const auto &root : f->getNodes()) {
    if (done.count(root.get()))
      continue;
    stack.push_back({root.get(), 0});
    done.insert(root.get());
    while (!stack.empty()) {
      auto &[n, i] = stack.back();
      if (i < n->getNumInputs()) {
        Node *in = n->getNthInput(i++).node;
        if (in && in->getParent() == f && !done.count(in)) {
          done.insert(in);
          stack.push_back({in, 0});
        }
        continue;
      }
      order.push_back(n);
      stack.pop_back();
    }
  }
  return order;
}

void tensorMinMax(const Tensor &t, float &mn, float &mx) {
  auto h = t.getHandle<float>();
  mn = INFINITY;
  mx = -INFINITY;
  for (size_t i = 0; i < h.size(); i++)
    if (std::isfinite(h.raw(i))) {
      mn = std::min(mn, h.raw(i));
      mx = std::max(mx, h.raw(i));
    }
  if (mn > mx)
    mn = mx = 0;
}

class Quantizer {
public:
  Quantizer(Function *f, const QuantizationProfile &p, const QuantizationOptions &o)
      : f_(f), m_(f->getParent()), profile_(p), opts_(o) {}

  Expected<QuantizationReport> run() {
    for (Node *n : topoOrder(f_)) {
      Rule rule;
      if (!ruleOf(n->getKind(), rule) || n->getNumResults() != 1 ||
          n->getType(0)->kind != ElemKind::Float)
        continue;
      std::string why = refusal(n, rule);
      if (!why.empty()) {
        if (why != "-") // "-": not worth a region of its own, not reported
          report_.keptFloat.push_back({n->getName() + " (" + n->getKindName() + ")", why});
        continue;
      }
      transform(n, rule);
      report_.quantizedNodes++;
    }
    foldIntoRelus();
    exitRegions();
    foldRescales();
    dropIdentityRelus();
    f_->eraseDeadNodes();
    m_->eraseUnusedConstants();
    if (Error e = f_->verify())
      return makeError(ErrorCode::Internal, "quantization produced an invalid graph: ",
                       e.message());
    return report_;
  }

private:
  bool inQ(const Node *n) const { return q_.count(n) != 0; }

  /// The calibrated range of float value \p v, false when the profile lacks it.
  bool rangeOf(const NodeValue &v, float &lo, float &hi) const {
    const ValueProfile *p = profile_.find(profileValueName(v));
    if (!p)
      return false;
    std::tie(lo, hi) = calibrateRange(p->hist, opts_.calibration, opts_.schema, opts_.percentile);
    return true;
  }

  /// Why \p n stays float ("" when it is quantized; "-" when silently).
  std::string refusal(Node *n, Rule rule) {
    if (opts_.keepFloat.count(n->getKindName()) || opts_.keepFloat.count(n->getName()))
      return "keep-float";
    float lo, hi;
    bool anyQuantizedOperand = false;
    unsigned acts = rule == Rule::Weighted ? 1 : n->getNumInputs();
    if (rule == Rule::SameAsInput || rule == Rule::ClipAsRelu)
      acts = 1;
    for (unsigned i = 0; i < acts; i++) {
      NodeValue v = n->getNthInput(i);
      if (inQ(v.node)) {
        anyQuantizedOperand = true;
        continue;
      }
      if (v.getElementType() != ElemKind::Float)
        return "operand " + n->getInputName(i) + " is " + v.getType()->toString();
      if (isa<Constant>(v.node))
        continue;
      if (!rangeOf(v, lo, hi))
        return "no profile for '" + profileValueName(v) + "'";
    }
    if (rule == Rule::Weighted) {
      for (unsigned i : {1u, 2u}) {
        NodeValue w = n->getNthInput(i);
        if (!isa<Constant>(w.node) || w.getElementType() != ElemKind::Float)
          return n->getInputName(i) + " is not a float constant";
      }
    } else if (!anyQuantizedOperand && n->getKind() != NodeKind::MatMul &&
               n->getKind() != NodeKind::BatchMatMul) {
      // A product is worth its pair of Quantizes; anything else would only add a
      // Quantize/Dequantize pair around it.
      return "-";
    }
    if (rule == Rule::Free || rule == Rule::Weighted || rule == Rule::Concat)
      if (!rangeOf(NodeValue(n, 0), lo, hi))
        return "no profile for '" + profileValueName(NodeValue(n, 0)) + "'";
    if (rule == Rule::ClipAsRelu) {
      auto *c = cast<ClipNode>(n);
      if (c->getMin() != 0.0f || !(c->getMax() > 0))
        return "Clip is not Clip(0, Max > 0)";
      QuantParams p = chooseQuantParams(0, c->getMax(), opts_.schema);
      double top = double(p.scale) * (127.0 - p.offset);
      if (std::fabs(top - c->getMax()) > 1e-5 * c->getMax())
        return "Max is not the top of the schema's grid";
    }
    return "";
  }

  TypeRef qType(const Dims &d, QuantParams p, ElemKind k = ElemKind::Int8Q) {
    return m_->uniqueType(Type(k, d, p.scale, p.offset));
  }

  Constant *quantizeConstant(const Constant *c, TypeRef ty, const std::string &suffix) {
    const Tensor &src = c->getPayload();
    Tensor t(*ty);
    auto in = src.getHandle<float>();
    for (size_t i = 0; i < in.size(); i++)
      t.setFromDouble(i, std::round(double(in.raw(i)) / double(ty->scale)) + ty->offset);
    return m_->createConstant(c->getName() + suffix, std::move(t));
  }

  /// \p v as an int8 activation: itself inside a region, else a quantized constant or a
  /// Quantize node (one per value).
  NodeValue activation(NodeValue v) {
    if (inQ(v.node))
      return v;
    auto it = entered_.find(v);
    if (it != entered_.end())
      return it->second;
    NodeValue q;
    if (auto *c = dyn_cast<Constant>(v.node)) {
      float lo, hi;
      tensorMinMax(c->getPayload(), lo, hi);
      q = NodeValue(quantizeConstant(c, qType(v.dims(), chooseQuantParams(lo, hi, opts_.schema)),
                                     "_q"));
    } else {
      float lo = 0, hi = 0;
      rangeOf(v, lo, hi);
      q = NodeValue(f_->createQuantize(profileValueName(v) + "_quantize",
                                       qType(v.dims(), chooseQuantParams(lo, hi, opts_.schema)), v));
      report_.quantizeNodes++;
    }
    entered_[v] = q;
    return q;
  }

  QuantParams outputParams(Node *n) {
    float lo = 0, hi = 0;
    rangeOf(NodeValue(n, 0), lo, hi);
    return chooseQuantParams(lo, hi, opts_.schema);
  }

  /// The schema of Convolution and FullyConnected weights (effectiveWeightSchema).
  QuantSchema weightSchema() const { return effectiveWeightSchema(opts_); }

  /// Convolution / FullyConnected with one weight scale and offset per output channel:
  /// a Channelwise node (8-bit weights of type scale 1 offset 0, float scales, i32
  /// offsets, i32 bias in accumulator units inScale * scale[o]) replaces \p n.
  void transformPerChannel(Node *n) {
    const Dims outDims = n->getType(0)->dims;
    const bool conv = n->getKind() == NodeKind::Convolution;
    NodeValue in = activation(n->getNthInput(0));
    auto *w = cast<Constant>(n->getNthInput(1).node);
    auto *b = cast<Constant>(n->getNthInput(2).node);
    const Dims wd = w->getType()->dims;
    // Conv filter [O, ...]: channel o is a contiguous block. FC weights [K, M]: column m.
    const dim_t channels = conv ? wd[0] : wd[1];
    const dim_t per = w->getType()->numElements() / channels;
    auto index = [&](dim_t c, dim_t i) { return conv ? c * per + i : i * channels + c; };
    auto wv = w->getPayload().getHandle<float>();
    auto bv = b->getPayload().getHandle<float>();
    Tensor qw(Type(ElemKind::Int8Q, wd, 1.0f, 0));
    Tensor scales(ElemKind::Float, {channels}), offsets(ElemKind::Int32I, {channels}),
        qb(ElemKind::Int32I, {channels});
    auto qwh = qw.getHandle<int8_t>();
    const double inScale = in.getType()->scale;
    for (dim_t c = 0; c < channels; c++) {
      float lo = INFINITY, hi = -INFINITY;
      for (dim_t i = 0; i < per; i++) {
        lo = std::min(lo, wv.raw(index(c, i)));
        hi = std::max(hi, wv.raw(index(c, i)));
      }
      QuantParams p = chooseQuantParams(lo, hi, weightSchema());
      for (dim_t i = 0; i < per; i++) {
        double q = std::round(double(wv.raw(index(c, i))) / p.scale) + p.offset;
        qwh.raw(index(c, i)) = int8_t(std::clamp(q, -128.0, 127.0));
      }
      scales.getHandle<float>().raw(c) = p.scale;
      offsets.getHandle<int32_t>().raw(c) = p.offset;
      double acc = std::round(double(bv.raw(c)) / (inScale * p.scale));
      qb.getHandle<int32_t>().raw(c) = int32_t(std::clamp(acc, -2147483648.0, 2147483647.0));
    }
    NodeValue qwC(m_->createConstant(w->getName() + "_qc", std::move(qw)));
    NodeValue sC(m_->createConstant(w->getName() + "_scales", std::move(scales)));
    NodeValue oC(m_->createConstant(w->getName() + "_offsets", std::move(offsets)));
    NodeValue bC(m_->createConstant(b->getName() + "_q32", std::move(qb)));
    TypeRef outTy = qType(outDims, outputParams(n));
    Node *r;
    if (auto *cv = dyn_cast<ConvolutionNode>(n))
      r = f_->createChannelwiseQuantizedConvolution(
          n->getName() + "_channelwise", outTy, in, qwC, sC, oC, bC, cv->getKernels(),
          cv->getStrides(), cv->getPads(), cv->getDilations(), cv->getGroup(), "None", 0.0f, 0.0f);
    else
      r = f_->createChannelwiseQuantizedFullyConnected(n->getName() + "_channelwise", outTy, in,
                                                       qwC, sC, oC, bC, "None", 0.0f, 0.0f);
    n->replaceAllUsesOfWith(0, NodeValue(r));
    f_->eraseNode(n); // visited already
    q_.insert(r);
    freeOutput_.insert(r);
  }

  void transform(Node *n, Rule rule) {
    const Dims outDims = n->getType(0)->dims;
    if (rule == Rule::Weighted && opts_.perChannel)
      return transformPerChannel(n);
    switch (rule) {
    case Rule::Weighted: {
      NodeValue in = activation(n->getNthInput(0));
      auto *w = cast<Constant>(n->getNthInput(1).node);
      auto *b = cast<Constant>(n->getNthInput(2).node);
      float lo, hi;
      tensorMinMax(w->getPayload(), lo, hi);
      TypeRef wTy = qType(w->getType()->dims, chooseQuantParams(lo, hi, weightSchema()));
      QuantParams bp;
      bp.scale = in.getType()->scale * wTy->scale;
      TypeRef bTy = qType(b->getType()->dims, bp, ElemKind::Int32Q);
      n->setNthInput(0, in);
      n->setNthInput(1, NodeValue(quantizeConstant(w, wTy, "_q")));
      n->setNthInput(2, NodeValue(quantizeConstant(b, bTy, "_q32")));
      n->setType(0, qType(outDims, outputParams(n)));
      q_.insert(n);
      freeOutput_.insert(n);
      return;
    }
    case Rule::Free:
      for (unsigned i = 0; i < n->getNumInputs(); i++)
        n->setNthInput(i, activation(n->getNthInput(i)));
      n->setType(0, qType(outDims, outputParams(n)));
      q_.insert(n);
      freeOutput_.insert(n);
      return;
    case Rule::SameAsInput: {
      NodeValue in = activation(n->getNthInput(0));
      n->setNthInput(0, in);
      n->setType(0, m_->uniqueType(Type::withDims(*in.getType(), outDims)));
      q_.insert(n);
      return;
    }
    case Rule::Concat: {
      TypeRef outTy = qType(outDims, outputParams(n));
      for (unsigned i = 0; i < n->getNumInputs(); i++) {
        NodeValue in = activation(n->getNthInput(i));
        const Type &t = *in.getType();
        if (t.scale != outTy->scale || t.offset != outTy->offset) {
          auto *r = f_->createRescaleQuantized(
              n->getName() + "_rescale" + std::to_string(i),
              m_->uniqueType(Type::withDims(*outTy, t.dims)), in);
          rescales_.push_back(r);
          q_.insert(r);
          in = NodeValue(r);
        }
        n->setNthInput(i, in);
      }
      n->setType(0, outTy);
      q_.insert(n);
      return;
    }
    case Rule::ClipAsRelu: {
      auto *c = cast<ClipNode>(n);
      NodeValue in = activation(c->getInput());
      auto *r = f_->createRelu(c->getName() + "_relu",
                               qType(outDims, chooseQuantParams(0, c->getMax(), opts_.schema)), in);
      c->replaceAllUsesOfWith(0, NodeValue(r));
      f_->eraseNode(c); // visited already; left in place it would count as a float user
      q_.insert(r);
      return;
    }
    }
  }

  /// Points every float user of a quantized value at one Dequantize of it.
  void exitRegions() {
    std::vector<const Node *> nodes(q_.begin(), q_.end());
    for (const Node *cn : nodes) {
      Node *n = const_cast<Node *>(cn);
      std::vector<NodeUse> uses = n->getUsers();
      NodeValue deq;
      for (const NodeUse &u : uses) {
        if (inQ(u.user))
          continue;
        if (!deq) {
          deq = NodeValue(f_->createDequantize(
              n->getName() + "_dequantize",
              m_->uniqueType(ElemKind::Float, n->getType(0)->dims), NodeValue(n, 0)));
          report_.dequantizeNodes++;
        }
        u.user->setNthInput(u.idx, deq);
      }
    }
  }

  /// A Relu whose producer's output type is free and used only by it: the producer takes
  /// the Relu's type. Relu then maps that grid to itself exactly (0 is on every grid), so
  /// the result is the same as rounding Relu(x) once into it, while the producer no longer
  /// spends its 256 levels on the negative values the Relu drops (and, for Clip(0, 6),
  /// saturates at 6 itself).
  void foldIntoRelus() {
    std::vector<const Node *> nodes(q_.begin(), q_.end());
    for (const Node *cn : nodes) {
      if (cn->getKind() != NodeKind::Relu)
        continue;
      Node *p = cn->getNthInput(0).node;
      if (freeOutput_.count(p) && p->getUsers().size() == 1 && p->getKind() != NodeKind::Relu) {
        p->setType(0, m_->uniqueType(Type::withDims(*cn->getType(0), p->getType(0)->dims)));
        report_.foldedIntoRelu++;
      }
    }
  }

  /// A rescale whose producer's output type is free and used only by it: give the
  /// producer the rescale's type instead.
  void foldRescales() {
    for (RescaleQuantizedNode *r : rescales_) {
      Node *p = r->getInput().node;
      if (freeOutput_.count(p) && p->getUsers().size() == 1) {
        p->setType(0, r->getType(0));
        r->replaceAllUsesOfWith(0, NodeValue(p));
        report_.foldedRescales++;
      } else {
        report_.rescaleNodes++;
      }
    }
  }

  /// A Relu whose operand is already on its output grid and whose grid has no negative
  /// values (int8 offset -128 or below: every q - offset >= 0) is the identity: its users
  /// read the operand. Exact, since the Interpreter's Relu there is round(s (q - o) / s) + o
  /// and s (q - o) is exact in double (a float times a 9-bit integer). This is the common
  /// case: asymmetric and symmetric-uint8 grids of a Relu's range start at offset -128, and
  /// foldIntoRelus gives the producer that grid (for Clip(0, 6) the producer saturates at 6).
  void dropIdentityRelus() {
    std::vector<const Node *> nodes(q_.begin(), q_.end());
    for (const Node *cn : nodes) {
      if (cn->getKind() != NodeKind::Relu)
        continue;
      Node *r = const_cast<Node *>(cn);
      NodeValue in = r->getNthInput(0);
      const Type &it = *in.getType(), &ot = *r->getType(0);
      if (it.kind != ElemKind::Int8Q || !(it == ot) || it.offset > -128)
        continue;
      r->replaceAllUsesOfWith(0, in);
      freeOutput_.erase(in.node); // its grid is now the Relu's, which the users rely on
      report_.identityRelus++;
    }
  }

  Function *f_;
  Module *m_;
  const QuantizationProfile &profile_;
  const QuantizationOptions &opts_;
  QuantizationReport report_;
  std::unordered_set<const Node *> q_;          ///< nodes producing int8 values
  std::unordered_set<const Node *> freeOutput_; ///< of those, nodes whose type is free
  std::map<NodeValue, NodeValue> entered_;      ///< float value -> its int8 form
  std::vector<RescaleQuantizedNode *> rescales_;
};

} // namespace

Expected<QuantizationReport> quantizeFunction(Function *f, const QuantizationProfile &profile,
                                              const QuantizationOptions &options) {
  KILN_RETURN_IF_ERR(f->verify());
  return Quantizer(f, profile, options).run();
}

} // namespace kiln
