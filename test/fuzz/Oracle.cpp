// The differential oracle (Oracle.h). The tolerances are derived in test/fuzz/README.md
// ("Tolerances"); the comments here name the terms.

#include "Oracle.h"

#include "BundleRun.h"

#include "kiln/Backend/Compiler.h"
#include "kiln/Graph/Graph.h"
#include "kiln/Graph/TextIR.h"
#include "kiln/Quantization/Quantize.h"

#include "backends/CPU/codegen/Codegen.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <poll.h>
#include <set>
#include <signal.h>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

namespace kiln::fuzz {

namespace {

/// One configuration of the oracle.
struct Config {
  std::string name;
  std::string backend;
  /// false: Backend::compile on the function as it is (no graph passes).
  bool passes = true;
  CompileOptions opts;
  /// The conv-algorithm forced, or empty.
  std::string convAlg;
  /// Run on the quantized module (quantizeFunction) against the quantized Interpreter.
  bool quantized = false;
  /// Compiled as a bundle (cpu::writeBundle), linked with run_bundle.c and run as a program.
  bool bundle = false;
  BundleRunOptions bundleOpts;
};

const std::vector<std::string> kConvAlgs = {"conv_wino", "conv_wino4r", "conv_wino2", "convT",
                                            "convS",     "conv",        "conv_dw",    "conv_grp"};

std::vector<Config> allConfigs() {
  std::vector<Config> cs;
  auto cpu = [&](std::string name, unsigned threads, bool fuse) {
    Config c;
    c.name = std::move(name);
    c.backend = "CPU";
    c.opts.threads = threads;
    c.opts.backendOptions["fuse-elementwise"] = fuse ? "1" : "0";
    return c;
  };
  Config ip;
  ip.name = "interp-pipeline";
  ip.backend = "Interpreter";
  cs.push_back(ip);
  Config planned = ip;
  planned.name = "interp-planned";
  planned.opts.optimizeIR = true;
  planned.opts.staticMemoryPlan = true;
  cs.push_back(planned);
  cs.push_back(cpu("cpu-t1", 1, true));
  cs.push_back(cpu("cpu-t1-nofuse", 1, false));
  cs.push_back(cpu("cpu-t2", 2, true));
  cs.push_back(cpu("cpu-t2-nofuse", 2, false));
  Config plan = cpu("cpu-plan", 1, true);
  plan.opts.backendOptions["optimize-ir"] = "1";
  plan.opts.staticMemoryPlan = true;
  plan.opts.optimizeIR = true;
  cs.push_back(plan);
  for (const std::string &a : kConvAlgs) {
    Config c = cpu("cpu-" + a, 1, true);
    c.convAlg = a;
    c.opts.backendOptions["conv-algorithm"] = a;
    cs.push_back(c);
  }
  // Bundles: the serial entry point for the host, the threaded one (two shares through
  // run_bundle.c's pthread parallel-for, weights embedded in the object), and AVX2 kernels.
  auto bundle = [&](std::string name, std::string target, unsigned threads, bool embed) {
    Config c = cpu(std::move(name), 1, true);
    c.bundle = true;
    c.bundleOpts.target = std::move(target);
    c.bundleOpts.threads = threads;
    c.bundleOpts.embedWeights = embed;
    c.bundleOpts.compile = c.opts;
    return c;
  };
  cs.push_back(bundle("bundle", "host", 0, false));
  cs.push_back(bundle("bundle-t2", "host", 2, true));
  cs.push_back(bundle("bundle-v3", "x86-64-v3", 0, false));
  Config qi = ip;
  qi.name = "quant-interp";
  qi.quantized = true;
  cs.push_back(qi);
  Config qc = cpu("quant-cpu", 1, true);
  qc.quantized = true;
  cs.push_back(qc);
  return cs;
}

Expected<std::unique_ptr<Module>> parse(const std::string &text) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Module> m, parseModule(text));
  if (m->getFunctions().size() != 1)
    return makeError(ErrorCode::InvalidArgument, "the fuzz module must have one function");
  return m;
}

std::string printExact(const Module &m) {
  PrintOptions po;
  po.maxConstantElements = size_t(1) << 40;
  return printModule(m, po);
}

uint64_t hashName(const std::string &s) {
  uint64_t h = 1469598103934665603ull;
  for (char c : s)
    h = (h ^ uint8_t(c)) * 1099511628211ull;
  return h;
}

/// The input ranges tried in turn until the reference runs with finite, moderate values:
/// floats, then integers (as [lo, hi]).
struct InputRange {
  double flo, fhi;
  int64_t ilo, ihi;
};
const InputRange kRanges[] = {{-2, 2, -3, 3}, {0.25, 2, -1, 0}, {0.5, 1.5, 0, 0}};

using Tensors = std::map<std::string, Tensor>;

Tensors makeInputs(const Module &m, const Function &f, uint64_t seed, int strategy) {
  std::set<const Placeholder *> outputs;
  for (SaveNode *s : f.getSaves())
    outputs.insert(s->getPlaceholder());
  Tensors in;
  const InputRange &r = kRanges[strategy];
  for (const auto &ph : m.getPlaceholders()) {
    if (outputs.count(ph.get()))
      continue;
    PseudoRNG rng(seed ^ hashName(ph->getName()) ^ (uint64_t(strategy) << 56));
    Tensor t(*ph->getType());
    ElemKind k = t.getElementType();
    for (size_t i = 0; i < t.size(); i++) {
      double v;
      if (isFloatKind(k))
        v = rng.uniform(float(r.flo), float(r.fhi));
      else if (k == ElemKind::Bool)
        v = double(rng.uniformInt(0, 1));
      else if (isQuantized(k))
        v = double(rng.uniformInt(-20, 20));
      else
        v = double(rng.uniformInt(r.ilo, r.ihi));
      t.setFromDouble(i, v);
    }
    in.emplace(ph->getName(), std::move(t));
  }
  return in;
}

/// Compiles and runs \p text under \p c; the saved outputs by placeholder name. With
/// \p probeAll every node result is saved too (the reference's magnitude scan).
Expected<Tensors> runConfig(const std::string &text, const Config &c, const Tensors &inputs,
                            bool probeAll = false) {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Module> m, parse(text));
  Function *f = m->getFunctions().front().get();
  if (probeAll) {
    std::vector<NodeValue> vals;
    for (const auto &n : f->getNodes())
      if (!isa<SaveNode>(n.get()))
        for (unsigned r = 0; r < n->getNumResults(); r++)
          vals.push_back(NodeValue(n.get(), r));
    for (const NodeValue &v : vals)
      f->createSave("probe." + v.node->getName() + "." + std::to_string(v.resNo), v);
  }
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend, createBackend(c.backend));
  std::unique_ptr<CompiledFunction> cf;
  if (c.passes) {
    KILN_ASSIGN_OR_RETURN(cf, compileFunction(f, *backend, c.opts));
  } else {
    KILN_ASSIGN_OR_RETURN(cf, backend->compile(f, c.opts));
  }
  PlaceholderBindings b;
  for (const auto &ph : m->getPlaceholders()) {
    auto it = inputs.find(ph->getName());
    if (it != inputs.end() && it->second.getType() == *ph->getType())
      b.insert(ph.get(), it->second.clone());
    else
      b.allocate(ph.get())->zero();
  }
  ExecutionContext ctx(&b);
  KILN_RETURN_IF_ERR(cf->execute(ctx));
  Tensors out;
  for (SaveNode *s : f->getSaves())
    out.emplace(s->getPlaceholder()->getName(), b.get(s->getPlaceholder())->clone());
  return out;
}

// ---------------------------------------------------------------- graph analysis

/// Operators whose result is bit-exact given bit-exact operands (data movement, selection,
/// comparisons and exactly rounded functions of one value).
const std::set<NodeKind> kExactKinds = {
    NodeKind::Reshape, NodeKind::Transpose,  NodeKind::Slice,     NodeKind::Concat,
    NodeKind::Tile,    NodeKind::Broadcast,  NodeKind::Pad,       NodeKind::Gather,
    NodeKind::GatherElements, NodeKind::GatherND, NodeKind::InsertTensor, NodeKind::Splat,
    NodeKind::MaxPool, NodeKind::ReduceMax,  NodeKind::ReduceMin, NodeKind::Relu,
    NodeKind::Neg,     NodeKind::Abs,        NodeKind::Max,       NodeKind::Min,
    NodeKind::Select,  NodeKind::TopK,       NodeKind::ArgMax,    NodeKind::ArgMin,
    NodeKind::ConvertTo, NodeKind::Floor,    NodeKind::Ceil,      NodeKind::Round,
    NodeKind::CmpEQ,   NodeKind::CmpLT,      NodeKind::CmpLTE,    NodeKind::Clip,
};
/// Operators that are discontinuous in a float operand: a rounding difference of the
/// operand can change the result by a whole step (an index, a comparison, an integer).
const std::set<NodeKind> kDiscontinuousKinds = {
    NodeKind::Floor,  NodeKind::Ceil,  NodeKind::Round,      NodeKind::Mod,
    NodeKind::CmpEQ,  NodeKind::CmpLT, NodeKind::CmpLTE,     NodeKind::ArgMax,
    NodeKind::ArgMin, NodeKind::TopK,  NodeKind::ConvertTo,  NodeKind::GridSample,
    NodeKind::RoiAlign, NodeKind::Quantize, NodeKind::ScatterElements, NodeKind::ScatterND,
};

double unitRoundoff(ElemKind k) {
  switch (k) {
  case ElemKind::Float16:
    return std::ldexp(1.0, -11);
  case ElemKind::BFloat16:
    return std::ldexp(1.0, -8);
  default:
    return std::ldexp(1.0, -24);
  }
}

bool isIntegral(ElemKind k) { return !isFloatKind(k) && !isQuantized(k); }

/// Reads the int64 attributes (axes) of a node.
struct AxisReader : AttrVisitor {
  std::vector<int64_t> axes;
  void visit(const char *name, dim_t &v) override {
    if (std::string(name) == "Axis" || std::string(name) == "ChannelIdx")
      axes.push_back(int64_t(v));
  }
  void visit(const char *, int64_t &v) override { axes.push_back(v); }
  void visit(const char *, float &) override {}
  void visit(const char *, bool &) override {}
  void visit(const char *, std::vector<dim_t> &) override {}
  void visit(const char *, std::vector<int64_t> &) override {}
  void visit(const char *, std::string &) override {}
};

/// Terms of any output element's sum, bounded from the shapes (README, "Tolerances"):
/// multiply-accumulates per result element (Backend::estimateNodeSeconds), operand
/// elements per result element (reductions), a rank-3+ weight operand's row, the
/// dimensions from an Axis attribute to the end, and the largest dimension.
double reductionLength(Node &n, const Backend &interp) {
  double out = double(std::max<dim_t>(1, n.getType(0)->numElements()));
  double r = std::max(1.0, std::round(interp.estimateNodeSeconds(n) * 1e9 / out));
  double opElems = 0;
  for (unsigned i = 0; i < n.getNumInputs(); i++) {
    const Dims &d = n.getNthInput(i).dims();
    opElems += double(n.getNthInput(i).getType()->numElements());
    for (dim_t x : d)
      r = std::max(r, double(x));
    if (i > 0 && d.size() >= 3)
      r = std::max(r, double(n.getNthInput(i).getType()->numElements()) / double(d[0]));
  }
  r = std::max(r, std::ceil(opElems / out));
  AxisReader ar;
  n.visitAttrs(ar);
  if (n.getNumInputs()) {
    const Dims &d0 = n.getNthInput(0).dims();
    for (int64_t a : ar.axes) {
      if (a < 0)
        a += int64_t(d0.size());
      double p = 1;
      for (size_t i = size_t(std::max<int64_t>(0, a)); i < d0.size(); i++)
        p *= double(d0[i]);
      r = std::max(r, p);
    }
  }
  return r;
}

/// The error growth of a Winograd convolution over the direct one: the product of the
/// infinity norms of its transforms, squared for two dimensions (README, "Winograd").
double winogradFactor(const std::string &alg) {
  // F(2x2, 3x3), points 0, 1, -1: ||B^T|| = 2, ||G|| = 1.5, ||A^T|| = 3.
  if (alg == "conv_wino2")
    return std::pow(2.0 * 1.5 * 3.0, 2);
  // F(4x4, 3x3), points 0, +-1, 1/2, -2 (libjit_wino.cpp): ||B^T|| = 14, ||G|| = 28/15,
  // ||A^T|| = 89/8 (the rows of largest absolute sum: B^T's (2, -3, -4, 3, 2, 0), G's
  // (16, 8, 4) / 15, A^T's (0, 1, -1, 1/8, -8, 1)).
  if (alg == "conv_wino" || alg == "conv_wino4r")
    return std::pow(14.0 * (28.0 / 15) * (89.0 / 8), 2);
  return 1;
}

} // namespace

std::vector<double> conditionSlopes(Node &n, const ValueOf &val) {
  if (n.getNumResults() != 1 || !isFloatKind(n.getType(0)->kind))
    return {};
  const Tensor *y = val(NodeValue(&n, 0));
  if (!y || y->size() != n.getType(0)->numElements())
    return {};
  const double inf = std::numeric_limits<double>::infinity();
  auto clean = [&](double s) { return std::isnan(s) ? inf : std::max(1.0, std::fabs(s)); };
  auto each = [&](unsigned operands, auto slope) -> std::vector<double> {
    const Tensor *t[2] = {nullptr, nullptr};
    for (unsigned i = 0; i < operands; i++)
      if (!(t[i] = val(n.getNthInput(i))) || t[i]->size() != y->size())
        return {}; // operands of another shape: not an element-wise reading
    std::vector<double> g(y->size());
    for (size_t e = 0; e < y->size(); e++) {
      double x[2] = {t[0]->getAsDouble(e), operands > 1 ? t[1]->getAsDouble(e) : 0};
      // A value the reference could not compute is not compared anyway (not finite).
      double v = y->getAsDouble(e);
      g[e] = std::isfinite(v) ? clean(slope(x, v)) : 1.0;
    }
    return g;
  };
  switch (n.getKind()) {
  case NodeKind::Tan:
    return each(1, [](const double *, double y) { return 1 + y * y; });
  case NodeKind::Log:
    return each(1, [](const double *x, double) { return 1 / x[0]; });
  case NodeKind::Sqrt:
    return each(1, [](const double *, double y) { return 0.5 / y; });
  case NodeKind::Rsqrt:
    return each(1, [](const double *, double y) { return 0.5 * y * y * y; });
  case NodeKind::Reciprocal:
    return each(1, [](const double *, double y) { return y * y; });
  case NodeKind::Asin:
  case NodeKind::Acos:
    return each(1, [](const double *x, double) { return 1 / std::sqrt(1 - x[0] * x[0]); });
  case NodeKind::Acosh:
    return each(1, [](const double *x, double) { return 1 / std::sqrt(x[0] * x[0] - 1); });
  case NodeKind::Atanh:
    return each(1, [](const double *x, double) { return 1 / (1 - x[0] * x[0]); });
  case NodeKind::Div: // d/da = 1/b, d/db = -a/b^2
    return each(2, [](const double *x, double) {
      return (1 + std::fabs(x[0] / x[1])) / std::fabs(x[1]);
    });
  case NodeKind::Pow: // d/da = b a^(b-1), d/db = a^b ln a
    return each(2, [](const double *x, double y) {
      double a = std::fabs(x[0]);
      return std::fabs(x[1]) * std::pow(a, x[1] - 1) + std::fabs(y * std::log(a));
    });
  default:
    break;
  }
  if (auto *ln = dyn_cast<LayerNormalizationNode>(&n)) {
    // y = z * Scale + Bias with z = (x - mean) / sigma over a row (dimensions Axis..rank-1):
    // the Jacobian of z has rows (I - 1 1^T / L - z z^T / L) / sigma, absolute row sums at
    // most (2 + max|z|) / sigma; d/dScale = z, d/dBias = 1. One slope per row.
    const Tensor *x = val(ln->getInput()), *scale = val(ln->getScale());
    if (!x || !scale || x->size() != y->size())
      return {};
    const Dims &d = ln->getInput().dims();
    size_t L = 1;
    for (size_t i = ln->getAxis(); i < d.size(); i++)
      L *= d[i];
    double maxScale = 0;
    for (size_t i = 0; i < scale->size(); i++)
      maxScale = std::max(maxScale, std::fabs(scale->getAsDouble(i)));
    std::vector<double> g(y->size(), 1.0);
    for (size_t row = 0; L && row + L <= x->size(); row += L) {
      double mean = 0, var = 0, maxDev = 0;
      for (size_t i = 0; i < L; i++)
        mean += x->getAsDouble(row + i);
      mean /= double(L);
      for (size_t i = 0; i < L; i++) {
        double dv = x->getAsDouble(row + i) - mean;
        var += dv * dv;
        maxDev = std::max(maxDev, std::fabs(dv));
      }
      double sigma = std::sqrt(var / double(L) + double(ln->getEpsilon()));
      double maxZ = maxDev / sigma;
      double rowSlope = clean(std::max(maxZ, maxScale * (2 + maxZ) / sigma));
      std::fill(g.begin() + row, g.begin() + row + L, rowSlope);
    }
    return g;
  }
  if (auto *bn = dyn_cast<BatchNormalizationNode>(&n)) {
    // y = (x - Mean) * A + Bias, A = Scale / s, s = sqrt(Var + Epsilon): d/dx = d/dMean = A,
    // d/dScale = (x - Mean) / s, d/dVar = A (x - Mean) / (2 s^2), d/dBias = 1.
    const Tensor *x = val(bn->getInput()), *scale = val(bn->getScale()),
                 *mean = val(bn->getMean()), *var = val(bn->getVar());
    const Dims &d = bn->getInput().dims();
    size_t c = bn->getChannelIdx();
    if (!x || !scale || !mean || !var || c >= d.size() || x->size() != y->size())
      return {};
    size_t inner = 1;
    for (size_t i = c + 1; i < d.size(); i++)
      inner *= d[i];
    std::vector<double> g(y->size());
    for (size_t e = 0; e < x->size(); e++) {
      size_t ch = (e / inner) % d[c];
      if (ch >= scale->size() || ch >= mean->size() || ch >= var->size())
        return {};
      double s = std::sqrt(var->getAsDouble(ch) + double(bn->getEpsilon()));
      double a = std::fabs(scale->getAsDouble(ch)) / s;
      double dev = std::fabs(x->getAsDouble(e) - mean->getAsDouble(ch));
      g[e] = clean(2 * a + dev / s + a * dev / (2 * s * s));
    }
    return g;
  }
  return {};
}

double conditionGain(Node &n, const ValueOf &val) {
  double g = 1;
  for (double s : conditionSlopes(n, val))
    g = std::max(g, s);
  return g;
}

namespace {

struct OutputInfo {
  bool exact = false;
  bool unstable = false;
  double atol = 0; ///< before the magnitude scale
  double winoAtol = 0; ///< the convolutions' share, multiplied under Winograd
  ElemKind kind = ElemKind::Float;
  /// The nodes it depends on (itself included) and the storage they read.
  std::set<std::string> nodes, leaves;
  /// Not compared: an ancestor's value was not finite or huge on the reference's inputs.
  bool skip = false;
  /// Largest magnitude of its ancestors' values and leaves (the scale M of the bound).
  double maxAbs = 0;
  /// Per element, the error bound amplified by the condition slopes of the operators on
  /// its way (before the magnitude scale; empty: none measured), total and the
  /// convolutions' share; an element's bound is the larger of this and atol.
  std::vector<double> amplifiedAtol, amplifiedWino;
  /// Some element's amplified bound exceeds atol.
  bool amplified = false;
};

/// Element-wise operators: result element i reads element i of each operand (when the
/// operands have the result's dimensions).
const std::set<NodeKind> kElementwiseKinds = {
    NodeKind::Relu,  NodeKind::Sigmoid, NodeKind::Tanh,  NodeKind::Gelu,  NodeKind::HardSwish,
    NodeKind::Swish, NodeKind::Clip,    NodeKind::LeakyRelu, NodeKind::PRelu, NodeKind::Neg,
    NodeKind::Abs,   NodeKind::Exp,     NodeKind::Log,   NodeKind::Sqrt,  NodeKind::Rsqrt,
    NodeKind::Reciprocal, NodeKind::Erf, NodeKind::Floor, NodeKind::Ceil, NodeKind::Round,
    NodeKind::Add,   NodeKind::Sub,     NodeKind::Mul,   NodeKind::Div,   NodeKind::Max,
    NodeKind::Min,   NodeKind::Pow,     NodeKind::Sin,   NodeKind::Cos,   NodeKind::Tan,
    NodeKind::Asin,  NodeKind::Acos,    NodeKind::Atan,  NodeKind::Sinh,  NodeKind::Cosh,
    NodeKind::Asinh, NodeKind::Acosh,   NodeKind::Atanh, NodeKind::Mod,   NodeKind::Select,
};

/// Per output placeholder: exactness, stability and the error sum of its ancestors. With
/// \p slopes (conditionSlopes per node, measured on the reference run), also a bound per
/// element that follows the error through the graph: a node's bound is its own term plus
/// its slope times the largest bound among what it reads (element i of each operand for
/// element-wise operators, every element otherwise), so a pole or a small standard
/// deviation on the way multiplies the errors before it, and only on the elements where
/// the reference's values come near it.
std::map<std::string, OutputInfo> analyze(
    Function &f, const std::map<const Node *, std::vector<double>> *slopes = nullptr) {
  auto interp = createBackend("Interpreter");
  std::map<const Node *, bool> exact, unstable;
  std::map<const Node *, double> err, wino;
  std::map<const Node *, std::set<const Node *>> anc;
  // The amplified bounds of each node's first result (its own term first).
  std::map<const Node *, std::vector<double>> ampErr, ampWino;
  auto exactOf = [&](NodeValue v) { return isa<Storage>(v.node) ? true : exact[v.node]; };
  auto propagate = [&](Node *n) {
    size_t N = n->getType(0)->numElements();
    bool elementwise = kElementwiseKinds.count(n->getKind()) != 0;
    for (unsigned i = 0; i < n->getNumInputs(); i++)
      elementwise &= n->getNthInput(i).dims() == n->getType(0)->dims;
    const std::vector<double> *slope = nullptr;
    auto si = slopes->find(n);
    if (si != slopes->end() && si->second.size() == N)
      slope = &si->second;
    std::vector<double> e(N, err[n]), w(N, wino[n]);
    std::vector<std::pair<const std::vector<double> *, const std::vector<double> *>> ins;
    double maxE = 0, maxW = 0;
    for (unsigned k = 0; k < n->getNumInputs(); k++) {
      NodeValue v = n->getNthInput(k);
      if (isa<Storage>(v.node))
        continue;
      const std::vector<double> &ve = ampErr[v.node], &vw = ampWino[v.node];
      for (double x : ve)
        maxE = std::max(maxE, x);
      for (double x : vw)
        maxW = std::max(maxW, x);
      if (v.resNo == 0 && ve.size() == N)
        ins.push_back({&ve, &vw});
      else
        elementwise = false;
    }
    for (size_t i = 0; i < N; i++) {
      double inE = elementwise ? 0 : maxE, inW = elementwise ? 0 : maxW;
      if (elementwise)
        for (const auto &[ve, vw] : ins)
          inE = std::max(inE, (*ve)[i]), inW = std::max(inW, (*vw)[i]);
      double g = slope ? (*slope)[i] : 1.0;
      e[i] += g * inE;
      w[i] += g * inW;
    }
    ampErr[n] = std::move(e);
    ampWino[n] = std::move(w);
  };
  std::map<std::string, OutputInfo> out;
  // Creation order is topological for parsed modules (operands are declared first).
  for (const auto &up : f.getNodes()) {
    Node *n = up.get();
    bool allExact = true, anyUnstable = false, allIntegral = true;
    std::set<const Node *> a;
    for (unsigned i = 0; i < n->getNumInputs(); i++) {
      NodeValue v = n->getNthInput(i);
      allExact &= exactOf(v);
      if (!isa<Storage>(v.node)) {
        anyUnstable |= unstable[v.node];
        a.insert(v.node);
        a.insert(anc[v.node].begin(), anc[v.node].end());
      }
      allIntegral &= isIntegral(v.getElementType());
      if (kDiscontinuousKinds.count(n->getKind()) && isFloatKind(v.getElementType()) &&
          !exactOf(v))
        anyUnstable = true;
    }
    if (auto *s = dyn_cast<SaveNode>(n)) {
      NodeValue v = s->getInput();
      OutputInfo oi;
      oi.kind = v.getElementType();
      oi.exact = exactOf(v) || isIntegral(oi.kind);
      oi.unstable = !isa<Storage>(v.node) && unstable[v.node];
      if (!isa<Storage>(v.node)) {
        std::set<const Node *> all = anc[v.node];
        all.insert(v.node);
        for (const Node *x : all) {
          oi.atol += err[x];
          oi.winoAtol += wino[x];
          oi.nodes.insert(x->getName());
          for (unsigned i = 0; i < x->getNumInputs(); i++)
            if (isa<Storage>(x->getNthInput(i).node))
              oi.leaves.insert(x->getNthInput(i).node->getName());
        }
        if (slopes && v.resNo == 0) {
          oi.amplifiedAtol = ampErr[v.node];
          oi.amplifiedWino = ampWino[v.node];
          for (size_t i = 0; i < oi.amplifiedAtol.size(); i++)
            oi.amplified |= oi.amplifiedAtol[i] > oi.atol * (1 + 1e-12) ||
                            oi.amplifiedWino[i] > oi.winoAtol * (1 + 1e-12);
        }
      } else {
        oi.leaves.insert(v.node->getName());
      }
      out[s->getPlaceholder()->getName()] = oi;
      continue;
    }
    bool resIntegral = true;
    for (unsigned r = 0; r < n->getNumResults(); r++)
      resIntegral &= isIntegral(n->getType(r)->kind);
    exact[n] = (allExact && kExactKinds.count(n->getKind())) || (allIntegral && resIntegral);
    unstable[n] = anyUnstable;
    anc[n] = std::move(a);
    if (!exact[n]) {
      double u = std::ldexp(1.0, -24);
      for (unsigned r = 0; r < n->getNumResults(); r++)
        u = std::max(u, unitRoundoff(n->getType(r)->kind));
      for (unsigned i = 0; i < n->getNumInputs(); i++)
        u = std::max(u, unitRoundoff(n->getNthInput(i).getElementType()));
      // A sum of R products computed in any order: |error| <= gamma_R * sum |terms|
      // ~ R u * (R M^2) per element; with a final rounding and the CPU's polynomial
      // approximations (a few ulps) as 16 u. The M^2 factor is applied by the caller.
      double R = reductionLength(*n, **interp);
      double e = u * (2 * R + 16);
      err[n] = e;
      if (isa<ConvolutionNode>(n) || isa<FusedConvolutionNode>(n))
        wino[n] = e;
    }
    if (slopes && n->getNumResults())
      propagate(n);
  }
  return out;
}

/// The convolutions of \p f as the CPU's planner sees their shapes.
std::vector<cpu::ConvShape> convShapes(Function &f) {
  std::vector<cpu::ConvShape> v;
  for (const auto &up : f.getNodes()) {
    Node *n = up.get();
    NodeValue in, filter, res;
    std::vector<dim_t> k, s, p, d;
    dim_t g = 1;
    bool residual = false;
    if (auto *c = dyn_cast<ConvolutionNode>(n)) {
      in = c->getInput(), filter = c->getFilter(), res = c->getResult();
      k = c->getKernels(), s = c->getStrides(), p = c->getPads(), d = c->getDilations();
      g = c->getGroup();
    } else if (auto *c = dyn_cast<FusedConvolutionNode>(n)) {
      in = c->getInput(), filter = c->getFilter(), res = c->getResult();
      k = c->getKernels(), s = c->getStrides(), p = c->getPads(), d = c->getDilations();
      g = c->getGroup();
      residual = !c->getResidual().empty();
    } else {
      continue;
    }
    if (in.dims().size() != 4 || k.size() != 2 || s.size() != 2 || p.size() != 4)
      continue;
    cpu::ConvShape cs;
    cs.N = in.dims()[0], cs.C = in.dims()[1], cs.H = in.dims()[2], cs.W = in.dims()[3];
    cs.O = res.dims()[1], cs.OH = res.dims()[2], cs.OW = res.dims()[3];
    cs.KH = k[0], cs.KW = k[1], cs.SH = s[0], cs.SW = s[1], cs.PT = p[0], cs.PL = p[1];
    cs.DH = d.size() > 0 ? d[0] : 1, cs.DW = d.size() > 1 ? d[1] : 1;
    cs.group = g;
    cs.constantWeights = isa<Constant>(filter.node);
    cs.residualAdd = residual;
    v.push_back(cs);
  }
  return v;
}

/// Max |x| over the float elements of \p ts; false when one is not finite.
bool scanMagnitude(const Tensors &ts, double &maxAbs) {
  for (const auto &[name, t] : ts) {
    if (!isFloatKind(t.getElementType()))
      continue;
    for (size_t i = 0; i < t.size(); i++) {
      double v = t.getAsDouble(i);
      if (!std::isfinite(v))
        return false;
      maxAbs = std::max(maxAbs, std::fabs(v));
    }
  }
  return true;
}

std::string firstLine(const std::string &s, size_t max = 400) {
  std::string l = s.substr(0, s.find('\n'));
  return l.size() > max ? l.substr(0, max) + "..." : l;
}

/// Multiplies every float element of \p ts by (1 + \p e) (OracleOptions::candidateError).
void injectError(Tensors &ts, double e) {
  for (auto &[name, t] : ts)
    if (e != 0 && isFloatKind(t.getElementType()))
      for (size_t i = 0; i < t.size(); i++)
        t.setFromDouble(i, t.getAsDouble(i) * (1 + e));
}

/// Compares \p cand with \p ref; "" when they agree, else a description.
std::string compare(const Tensors &ref, const Tensors &cand,
                    const std::map<std::string, OutputInfo> &info, double winoMul,
                    double quantTol, GraphResult &res, bool countUnstable) {
  for (const auto &[name, r] : ref) {
    auto it = cand.find(name);
    if (it == cand.end())
      return "output " + name + " missing";
    const Tensor &c = it->second;
    if (!(c.getType() == r.getType()) && !(c.dims() == r.dims()))
      return "output " + name + " has type " + c.getType().toString() + ", expected " +
             r.getType().toString();
    auto ii = info.find(name);
    OutputInfo oi = ii != info.end() ? ii->second : OutputInfo();
    if (oi.skip)
      continue;
    // The bound's magnitude scale: products of two values of magnitude up to M.
    double scale = std::max(1.0, oi.maxAbs) * std::max(1.0, oi.maxAbs);
    if (oi.unstable) {
      if (countUnstable)
        res.unstableOutputs++;
      continue;
    }
    double atol = 0, rtol = 0;
    if (!oi.exact || quantTol > 0) {
      atol = scale * (oi.atol + oi.winoAtol * (winoMul - 1)) + quantTol;
      rtol = 2 * unitRoundoff(oi.kind);
    }
    bool perElement = !oi.exact && oi.amplified && oi.amplifiedAtol.size() == r.size();
    for (size_t i = 0; i < r.size(); i++) {
      if (perElement)
        atol = scale * std::max(oi.atol + oi.winoAtol * (winoMul - 1),
                                oi.amplifiedAtol[i] + oi.amplifiedWino[i] * (winoMul - 1)) +
               quantTol;
      double a = r.getAsDouble(i), b = c.getAsDouble(i);
      bool ok;
      if (std::isnan(a))
        ok = std::isnan(b);
      else if (!std::isfinite(a))
        ok = a == b;
      else
        ok = std::fabs(a - b) <= atol + rtol * std::fabs(a);
      if (!ok) {
        std::ostringstream os;
        os.precision(9);
        os << "output " << name << " " << r.getType().toString() << " element " << i << ": "
           << b << ", reference " << a << " (tolerance " << atol + rtol * std::fabs(a)
           << (oi.exact ? ", exact" : "") << ")";
        return os.str();
      }
    }
  }
  return "";
}

} // namespace

std::vector<std::string> configNames() {
  std::vector<std::string> v;
  for (const Config &c : allConfigs())
    v.push_back(c.name);
  return v;
}

/// Set by checkModule before each configuration, for the isolated runner's crash report.
static std::function<void(const std::string &)> gProgress;

GraphResult checkModule(const std::string &text, const OracleOptions &opts) {
  GraphResult res;
  auto parsed = parse(text);
  if (!parsed) {
    res.rejected = true;
    res.rejectReason = "parse: " + firstLine(parsed.takeError().message());
    return res;
  }
  std::unique_ptr<Module> m = std::move(*parsed);
  Function *f = m->getFunctions().front().get();
  std::map<std::string, OutputInfo> info; // per output, from the input range chosen below

  Config ref;
  ref.name = "reference";
  ref.backend = "Interpreter";
  ref.passes = false;

  // The reference, on the first input range whose values stay finite and moderate for
  // every output (else the range that leaves the most outputs comparable): an output that
  // depends on a non-finite or huge value (|x| > 1e4) is not compared.
  Tensors inputs, refOut;
  std::string why;
  size_t bestSkipped = SIZE_MAX;
  std::map<std::string, OutputInfo> bestInfo;
  auto leafMag = [&](const std::string &name, const Tensors &in, double &mag) {
    if (Constant *c = m->getConstantByName(name)) {
      for (size_t i = 0; isFloatKind(c->getType()->kind) && i < c->getPayload().size(); i++)
        mag = std::max(mag, std::fabs(c->getPayload().getAsDouble(i)));
      return;
    }
    auto it = in.find(name);
    if (it != in.end() && isFloatKind(it->second.getElementType()))
      for (size_t i = 0; i < it->second.size(); i++)
        mag = std::max(mag, std::fabs(it->second.getAsDouble(i)));
  };
  for (int s = 0; s < int(sizeof(kRanges) / sizeof(kRanges[0])) && bestSkipped; s++) {
    Tensors in = makeInputs(*m, *f, opts.inputSeed, s);
    Expected<Tensors> out = runConfig(text, ref, in, /*probeAll=*/true);
    if (!out) {
      why = "reference: " + firstLine(out.takeError().message());
      continue;
    }
    // Per node: finite and moderate, and its magnitude.
    std::map<std::string, std::pair<bool, double>> nodeOk;
    for (const auto &[name, t] : *out) {
      if (name.rfind("probe.", 0) != 0)
        continue;
      std::string node = name.substr(6, name.rfind('.') - 6);
      auto &e = nodeOk.emplace(node, std::make_pair(true, 0.0)).first->second;
      Tensors one;
      one.emplace(name, t.clone());
      double mag = 0;
      e.first = e.first && scanMagnitude(one, mag) && mag <= 1e4;
      e.second = std::max(e.second, mag);
    }
    // The operators' condition slopes on these values, and the bounds they widen.
    ValueOf val = [&](NodeValue v) -> const Tensor * {
      if (auto *c = dyn_cast<Constant>(v.node))
        return &c->getPayload();
      if (isa<Storage>(v.node)) {
        auto it = in.find(v.node->getName());
        return it == in.end() ? nullptr : &it->second;
      }
      auto it = out->find("probe." + v.node->getName() + "." + std::to_string(v.resNo));
      return it == out->end() ? nullptr : &it->second;
    };
    std::map<const Node *, std::vector<double>> slopes;
    for (const auto &up : f->getNodes())
      if (!isa<SaveNode>(up.get()))
        slopes[up.get()] = conditionSlopes(*up, val);
    std::map<std::string, OutputInfo> cur = analyze(*f, &slopes);
    size_t skipped = 0;
    for (auto &[name, oi] : cur) {
      double mag = 0;
      bool ok = true;
      for (const std::string &n : oi.nodes) {
        auto it = nodeOk.find(n);
        if (it != nodeOk.end()) {
          ok &= it->second.first;
          mag = std::max(mag, it->second.second);
        }
      }
      for (const std::string &l : oi.leaves)
        leafMag(l, in, mag);
      oi.skip = !ok;
      oi.maxAbs = mag;
      skipped += !ok;
    }
    if (skipped == cur.size()) {
      why = "reference: non-finite or huge values";
      continue;
    }
    if (skipped < bestSkipped) {
      bestSkipped = skipped;
      bestInfo = std::move(cur);
      inputs = std::move(in);
      refOut.clear();
      for (auto &[name, t] : *out)
        if (name.rfind("probe.", 0) != 0)
          refOut.emplace(name, std::move(t));
      res.inputStrategy = s;
    }
  }
  if (res.inputStrategy < 0) {
    res.rejected = true;
    res.rejectReason = why;
    return res;
  }
  info = std::move(bestInfo);
  for (const auto &[name, oi] : info) {
    res.nonFiniteOutputs += oi.skip;
    res.amplifiedOutputs += !oi.skip && !oi.exact && !oi.unstable && oi.amplified;
  }
  std::vector<cpu::ConvShape> convs = convShapes(*f);

  // The quantized module and its reference, made on first use.
  bool quantTried = false;
  std::string qtext, qwhy;
  Tensors qref;
  double qtol = 0;
  auto makeQuantized = [&]() {
    quantTried = true;
    Config prof = ref;
    auto qm = parse(text);
    if (!qm) {
      qwhy = "quantized: parse";
      consumeError(qm.takeError());
      return;
    }
    Function *qf = (*qm)->getFunctions().front().get();
    if (Error e = prepareForQuantization(qf)) {
      qwhy = "quantized: prepare failed";
      consumeError(std::move(e));
      return;
    }
    std::string prepared = printExact(**qm);
    // Profile on the reference's inputs.
    auto pm = parse(prepared);
    if (!pm) {
      qwhy = "quantized: reparse";
      consumeError(pm.takeError());
      return;
    }
    Function *pf = (*pm)->getFunctions().front().get();
    Profiler profiler;
    profiler.instrument(pf);
    auto backend = createBackend("Interpreter");
    auto cf = (*backend)->compile(pf, {});
    if (!cf) {
      qwhy = "quantized: profiling compile";
      consumeError(cf.takeError());
      return;
    }
    PlaceholderBindings b;
    for (const auto &ph : (*pm)->getPlaceholders()) {
      auto it = inputs.find(ph->getName());
      if (it != inputs.end() && it->second.getType() == *ph->getType())
        b.insert(ph.get(), it->second.clone());
      else
        b.allocate(ph.get())->zero();
    }
    ExecutionContext ctx(&b);
    if (Error e = (*cf)->execute(ctx)) {
      qwhy = "quantized: profiling run";
      consumeError(std::move(e));
      return;
    }
    if (Error e = profiler.record(b)) {
      consumeError(std::move(e));
      qwhy = "quantized: record";
      return;
    }
    auto rep = quantizeFunction(qf, profiler.profile());
    if (!rep) {
      qwhy = "quantized: quantizeFunction: " + firstLine(rep.takeError().message(), 80);
      return;
    }
    if (rep->quantizedNodes == 0) {
      qwhy = "quantized: nothing quantizable";
      return;
    }
    if (Error e = qf->verify()) {
      // The quantizer made an invalid graph from a valid one: a finding of its own.
      qwhy = "";
      res.findings.push_back({"quantize", "error", firstLine(e.message())});
      return;
    }
    qtext = printExact(**qm);
    // One grid step per quantized value may round the other way (README, "Quantized").
    for (const auto &up : qf->getNodes())
      for (unsigned r = 0; r < up->getNumResults(); r++)
        if (up->getType(r)->kind == ElemKind::Int8Q)
          qtol += up->getType(r)->scale;
    Expected<Tensors> qo = runConfig(qtext, ref, inputs);
    if (!qo) {
      qwhy = "quantized: reference: " + firstLine(qo.takeError().message(), 80);
      qtext.clear();
      return;
    }
    qref = std::move(*qo);
  };

  for (const Config &c : allConfigs()) {
    if (!opts.configFilter.empty() && c.name.find(opts.configFilter) == std::string::npos)
      continue;
    if (std::count(opts.skipConfigs.begin(), opts.skipConfigs.end(), c.name))
      continue;
    if (!c.convAlg.empty()) {
      auto a = cpu::parseConvAlgorithmName(c.convAlg);
      bool applies = false;
      for (const cpu::ConvShape &s : convs)
        applies |= a && cpu::convAlgorithmApplies(*a, s);
      if (!applies) {
        res.skipped["no convolution " + c.convAlg + " applies to"]++;
        continue;
      }
    }
    const std::string *text_ = &text;
    const Tensors *refp = &refOut;
    double qt = 0;
    if (c.quantized) {
      if (!quantTried)
        makeQuantized();
      if (qtext.empty()) {
        if (!qwhy.empty())
          res.skipped[qwhy]++;
        continue;
      }
      text_ = &qtext;
      refp = &qref;
      qt = qtol;
    }
    if (gProgress)
      gProgress(c.name);
    if (c.bundle) {
      BundleRunResult br = runBundle(*text_, c.bundleOpts, inputs);
      if (br.kind == BundleRunResult::Skipped) {
        res.skipped[br.detail]++;
        continue;
      }
      res.configsRun++;
      if (br.kind != BundleRunResult::Ok) {
        res.findings.push_back(
            {c.name, br.kind == BundleRunResult::Crash ? "crash" : "error", br.detail});
        continue;
      }
      injectError(br.outputs, opts.candidateError);
      std::string d = compare(*refp, br.outputs, info, 1, qt, res, res.configsRun == 1);
      if (!d.empty())
        res.findings.push_back({c.name, "mismatch", d});
      continue;
    }
    Expected<Tensors> out = runConfig(*text_, c, inputs);
    if (!out) {
      Error e = out.takeError();
      if (e.code() == ErrorCode::Unsupported) {
        res.skipped[c.backend + ": unsupported operator"]++;
        consumeError(std::move(e));
        continue;
      }
      res.configsRun++;
      res.findings.push_back({c.name, "error", firstLine(e.message())});
      continue;
    }
    res.configsRun++;
    injectError(*out, opts.candidateError);
    double winoMul = winogradFactor(c.convAlg);
    std::string d = compare(*refp, *out, info, winoMul, qt, res, res.configsRun == 1);
    if (!d.empty())
      res.findings.push_back({c.name, "mismatch", d});
  }
  return res;
}

// ---------------------------------------------------------------- isolation

namespace {

std::string escape(const std::string &s) {
  std::string o;
  for (char c : s)
    o += c == '\n' ? ' ' : c == '\t' ? ' ' : c;
  return o;
}

std::string serialize(const GraphResult &r) {
  std::ostringstream os;
  os << "R\t" << r.rejected << "\t" << escape(r.rejectReason) << "\n";
  os << "C\t" << r.configsRun << "\n";
  os << "U\t" << r.unstableOutputs << "\n";
  os << "N\t" << r.nonFiniteOutputs << "\n";
  os << "A\t" << r.amplifiedOutputs << "\n";
  os << "I\t" << r.inputStrategy << "\n";
  for (const auto &[k, v] : r.skipped)
    os << "S\t" << escape(k) << "\t" << v << "\n";
  for (const Finding &f : r.findings)
    os << "F\t" << escape(f.config) << "\t" << escape(f.kind) << "\t" << escape(f.detail) << "\n";
  os << "E\n";
  return os.str();
}

std::vector<std::string> splitTabs(const std::string &l) {
  std::vector<std::string> v;
  std::stringstream ss(l);
  std::string x;
  while (std::getline(ss, x, '\t'))
    v.push_back(x);
  return v;
}

bool writeAll(int fd, const std::string &s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = write(fd, s.data() + off, s.size() - off);
    if (n <= 0)
      return false;
    off += size_t(n);
  }
  return true;
}

} // namespace

GraphResult checkModuleIsolated(const std::string &text, const OracleOptions &opts,
                                unsigned timeoutSeconds) {
  int fds[2];
  if (pipe(fds) != 0)
    return checkModule(text, opts);
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return checkModule(text, opts);
  }
  if (pid == 0) {
    close(fds[0]);
    gProgress = [&](const std::string &cfg) { writeAll(fds[1], "P\t" + cfg + "\n"); };
    GraphResult r = checkModule(text, opts);
    writeAll(fds[1], serialize(r));
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  std::string data;
  char buf[4096];
  bool timedOut = false;
  auto start = std::chrono::steady_clock::now();
  for (;;) {
    pollfd p{fds[0], POLLIN, 0};
    int pr = poll(&p, 1, 1000);
    if (pr > 0) {
      ssize_t n = read(fds[0], buf, sizeof(buf));
      if (n <= 0)
        break;
      data.append(buf, size_t(n));
    }
    if (timeoutSeconds &&
        std::chrono::steady_clock::now() - start > std::chrono::seconds(timeoutSeconds)) {
      kill(pid, SIGKILL);
      timedOut = true;
      break;
    }
  }
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  GraphResult r;
  std::string lastConfig = "reference";
  bool complete = false;
  std::stringstream ss(data);
  std::string line;
  while (std::getline(ss, line)) {
    auto v = splitTabs(line);
    if (v.empty())
      continue;
    if (v[0] == "P" && v.size() > 1)
      lastConfig = v[1];
    else if (v[0] == "R" && v.size() > 1) {
      r.rejected = v[1] == "1";
      r.rejectReason = v.size() > 2 ? v[2] : "";
    } else if (v[0] == "C" && v.size() > 1)
      r.configsRun = unsigned(std::stoul(v[1]));
    else if (v[0] == "U" && v.size() > 1)
      r.unstableOutputs = unsigned(std::stoul(v[1]));
    else if (v[0] == "N" && v.size() > 1)
      r.nonFiniteOutputs = unsigned(std::stoul(v[1]));
    else if (v[0] == "A" && v.size() > 1)
      r.amplifiedOutputs = unsigned(std::stoul(v[1]));
    else if (v[0] == "I" && v.size() > 1)
      r.inputStrategy = std::stoi(v[1]);
    else if (v[0] == "S" && v.size() > 2)
      r.skipped[v[1]] += unsigned(std::stoul(v[2]));
    else if (v[0] == "F" && v.size() > 3)
      r.findings.push_back({v[1], v[2], v[3]});
    else if (v[0] == "E")
      complete = true;
  }
  if (!complete) {
    std::string how = timedOut ? "timed out after " + std::to_string(timeoutSeconds) + " s"
                      : WIFSIGNALED(status) ? "killed by signal " +
                                                  std::to_string(WTERMSIG(status)) + " (" +
                                                  strsignal(WTERMSIG(status)) + ")"
                                            : "exited with status " +
                                                  std::to_string(WEXITSTATUS(status));
    r.findings.push_back({lastConfig, "crash", how});
  }
  return r;
}

std::string describeFindings(const GraphResult &r) {
  std::string s;
  for (const Finding &f : r.findings)
    s += f.config + ": " + f.kind + ": " + f.detail + "\n";
  return s;
}

} // namespace kiln::fuzz
