#include "ModelRunner.h"

#include "kiln/Runtime/HostManager.h"
#include "kiln/IR/IR.h"

#include <cmath>
#include <fstream>
#include <sys/stat.h>

namespace kiln::tools {

namespace {
bool fileExists(const std::string &p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}
} // namespace

Expected<TestDataSet> loadTestDataSet(const std::string &dir) {
  TestDataSet ds;
  for (const char *kind : {"input", "output"}) {
    for (int k = 0;; k++) {
      std::string p = dir + "/" + kind + "_" + std::to_string(k) + ".pb";
      if (!fileExists(p))
        break;
      KILN_ASSIGN_OR_RETURN(Tensor t, loadONNXTensor(p));
      (kind[0] == 'i' ? ds.inputs : ds.outputs).push_back(std::move(t));
    }
  }
  if (ds.inputs.empty() && ds.outputs.empty())
    return makeError(ErrorCode::NotFound, "no input_K.pb / output_K.pb files in '", dir, "'");
  return ds;
}

Comparison compareOutputs(const std::vector<const Tensor *> &got,
                          const std::vector<Tensor> &ref) {
  Comparison c;
  if (got.size() != ref.size()) {
    c.match = false;
    c.detail = "the model has " + std::to_string(got.size()) + " outputs, the data set " +
               std::to_string(ref.size());
  }
  for (size_t k = 0; k < std::min(got.size(), ref.size()); k++) {
    const Tensor &y = *got[k], &r = ref[k];
    if (y.dims() != r.dims()) {
      if (c.match)
        c.detail = "output " + std::to_string(k) + " has shape " + y.getType().toString() +
                   ", expected " + r.getType().toString();
      c.match = false;
      c.maxAbsErr = std::max(c.maxAbsErr, double(INFINITY));
      continue;
    }
    Tensor bits;
    bool useBits = y.getElementType() == ElemKind::BFloat16 && r.getElementType() == ElemKind::Int32I;
    if (useBits) {
      // ONNX 1.12's backend tests store bfloat16 data as uint16 bit patterns.
      bits = Tensor(y.getType());
      for (size_t i = 0; i < r.size(); i++)
        bits.getHandle<bfloat16>().raw(i) = bfloat16::fromBits(uint16_t(r.getAsDouble(i)));
    }
    const Tensor &rr = useBits ? bits : r;
    double maxRef = 0;
    for (size_t i = 0; i < r.size(); i++)
      if (std::isfinite(rr.getAsDouble(i)))
        maxRef = std::max(maxRef, std::fabs(rr.getAsDouble(i)));
    for (size_t i = 0; i < r.size(); i++) {
      double a = y.getAsDouble(i), b = rr.getAsDouble(i);
      if ((std::isnan(a) && std::isnan(b)) || a == b)
        continue;
      double d = std::fabs(a - b);
      if (std::isnan(d))
        d = INFINITY;
      c.maxAbsErr = std::max(c.maxAbsErr, d);
      c.maxRelErr = std::max(c.maxRelErr, maxRef > 0 ? d / maxRef : (d > 0 ? INFINITY : 0));
      if (!(d <= 1e-4 * maxRef + 1e-3 * std::fabs(b))) {
        if (c.match)
          c.detail = "output " + std::to_string(k) + " element " + std::to_string(i) + " is " +
                     std::to_string(a) + ", expected " + std::to_string(b);
        c.match = false;
      }
    }
  }
  return c;
}

ModelRunner::ModelRunner(const std::string &backend)
    : backend_(backend), ee_(std::make_unique<ExecutionEngine>(backend)) {}

ModelRunner::~ModelRunner() = default;

Error ModelRunner::load(const std::string &path, const TestDataSet *data,
                        bool freezeIntegerInputs, const std::set<std::string> &freezeNames) {
  KILN_ASSIGN_OR_RETURN(ONNXSignature sig, getONNXSignature(path));
  inputNames_.clear();
  for (const ONNXInputInfo &in : sig.inputs)
    inputNames_.push_back(in.name);
  ONNXLoadOptions opts;
  opts.inputShapes = shapes_;
  frozen_.clear();
  if (data) {
    // Input K of the data set binds the K-th graph input; fix the shapes to the data's.
    for (size_t k = 0; k < data->inputs.size() && k < inputNames_.size(); k++) {
      const Tensor &t = data->inputs[k];
      auto given = shapes_.find(inputNames_[k]);
      if (given != shapes_.end() && given->second != t.dims().vec())
        return makeError(ErrorCode::InvalidArgument, "input '", inputNames_[k], "' is given shape ",
                         dimsToString(Dims(given->second)), " but the data set's input_", k,
                         ".pb has shape ", dimsToString(t.dims()));
      opts.inputShapes[inputNames_[k]] = t.dims().vec();
      if ((freezeIntegerInputs && isIndexKind(t.getElementType())) ||
          freezeNames.count(inputNames_[k])) {
        opts.constantInputs[inputNames_[k]] = &t;
        frozen_.insert(inputNames_[k]);
      }
    }
  }
  // A shape given with setInputShapes must fit the model: say so before importing.
  KILN_RETURN_IF_ERR(checkONNXInputShapes(sig.inputs, shapes_));
  // The data set's shapes are what the model runs at; a few of ONNX's own backend tests
  // declare other shapes for inputs whose shape does not matter (CastLike's 'like'), so a
  // contradiction is reported only when the model does not load at the data's shapes,
  // first, since it is then the likely cause (an image model given a flat vector).
  Error contradiction = checkONNXInputShapes(sig.inputs, opts.inputShapes);
  md_.reset(); // it runs functions of the module cleared next
  ee_->clear();
  f_ = ee_->getModule().createFunction("main");
  TraceScope import(trace_.get(), "import", "import " + path);
  Expected<ONNXModel> m = loadONNX(path, f_, opts);
  import.end();
  if (!m) {
    Error e = m.takeError();
    if (!contradiction)
      return e;
    return makeError(contradiction.code(), contradiction.message(),
                     "; at the data set's shapes the model does not load: ", e.message());
  }
  model_ = std::move(m).get();
  if (!dumpDir_.empty())
    KILN_RETURN_IF_ERR(writeGraph("1-imported.dot", f_->toDot()));
  return Error::success();
}

Error ModelRunner::writeGraph(const std::string &file, const std::string &dot) {
  std::string path = dumpDir_ + "/" + file;
  std::ofstream out(path);
  out << dot;
  out.close();
  if (!out)
    return makeError(ErrorCode::InvalidArgument, "cannot write the graph picture '", path, "'");
  dumped_.push_back(path);
  return Error::success();
}

Error ModelRunner::compile(const CompileOptions &options) {
  ee_->setStrictBackend(strict_);
  CompileOptions opts = options;
  if (trace_ && !opts.tracer)
    opts.tracer = trace_.get();
  // Pictures between passes: the graph entering lowering (after the optimising passes
  // before it) and the one leaving it.
  std::string beforeLower;
  bool lowered = false;
  Error dumpError = Error::success();
  if (!dumpDir_.empty() && f_) {
    beforeLower = f_->toDot();
    opts.afterGraphPass = [&](const std::string &pass, const Function &f) {
      if (lowered || &f != f_)
        return;
      if (pass != "lower") {
        beforeLower = f.toDot();
        return;
      }
      lowered = true;
      Error e1 = writeGraph("2-optimized.dot", beforeLower);
      Error e2 = writeGraph("3-lowered.dot", f.toDot());
      if (!dumpError)
        dumpError = e1 ? std::move(e1) : std::move(e2);
    };
  }
  KILN_RETURN_IF_ERR(compileImpl(opts));
  KILN_RETURN_IF_ERR(std::move(dumpError));
  if (dumpDir_.empty())
    return Error::success();
  if (!lowered) // a pipeline without lowering: the optimised graph is the final one
    KILN_RETURN_IF_ERR(writeGraph("2-optimized.dot", f_->toDot()));
  KILN_RETURN_IF_ERR(writeGraph("4-final.dot", f_->toDot()));
  HostManager *hm = md_ ? md_->host.get() : ee_->getHostManager();
  KILN_ASSIGN_OR_RETURN(std::string plan, hm->getPlanDot(f_->getName()));
  return writeGraph("5-partitions.dot", plan);
}

Error ModelRunner::compileImpl(const CompileOptions &opts) {
  if (!devices_) {
    if (trace_ && ee_->getHostManager())
      ee_->getHostManager()->startTrace(trace_);
    return ee_->compile(opts);
  }
  MultiDeviceOptions o;
  o.backend = backend_;
  o.devices = devices_;
  o.deviceMemory = deviceMemory_;
  o.compile = opts;
  md_.reset();
  KILN_ASSIGN_OR_RETURN(MultiDeviceNetwork md, createMultiDeviceNetwork(f_, o));
  md_ = std::move(md);
  if (trace_)
    md_->host->startTrace(trace_);
  return Error::success();
}

Expected<NetworkSplit> ModelRunner::split() const {
  if (md_)
    return md_->host->getNetworkSplit(md_->network);
  if (!f_)
    return makeError(ErrorCode::InvalidArgument, "no model loaded");
  return ee_->getNetworkSplit(f_->getName());
}

std::vector<StageTiming> ModelRunner::profile() const {
  HostManager *hm = ee_->getHostManager();
  if (md_ || !hm || !f_)
    return {};
  Expected<std::vector<StageTiming>> p = hm->getProfile(f_->getName());
  return p ? std::move(p).get() : std::vector<StageTiming>();
}

uint64_t ModelRunner::constantMemoryBytes() const {
  uint64_t b = 0;
  for (const auto &c : ee_->getModule().getConstants())
    if (c->getPayload().getUnsafePtr())
      b += c->getPayload().getSizeInBytes();
  HostManager *hm = ee_->getHostManager();
  if (md_ || !hm || !f_)
    return b;
  Expected<uint64_t> compiled = hm->getCompiledConstantBytes(f_->getName());
  return b + (compiled ? *compiled : 0);
}

Error ModelRunner::bindInputs(const std::vector<Tensor> &inputs) {
  bindings_.clear();
  PseudoRNG rng;
  for (size_t k = 0; k < inputNames_.size(); k++) {
    Placeholder *ph = model_.getInput(inputNames_[k]);
    if (!ph)
      continue; // frozen into a constant
    const Type &ty = *ph->getType();
    if (k >= inputs.size()) {
      if (!inputs.empty())
        return makeError(ErrorCode::InvalidArgument, "no data for graph input '",
                         inputNames_[k], "'");
      Tensor t(ty);
      t.randomize(0, 1, rng);
      bindings_.insert(ph, std::move(t));
      continue;
    }
    const Tensor &in = inputs[k];
    if (in.dims() != ty.dims)
      return makeError(ErrorCode::InvalidArgument, "input ", k, " ('", inputNames_[k],
                       "') has shape ", in.getType().toString(), "; the model expects ",
                       ty.toString());
    if (in.getElementType() == ty.kind) {
      bindings_.insert(ph, in.clone());
    } else if (ty.kind == ElemKind::BFloat16 && in.getElementType() == ElemKind::Int32I) {
      // ONNX 1.12's backend tests store bfloat16 data as uint16 bit patterns.
      Tensor t(ty);
      for (size_t i = 0; i < t.size(); i++)
        t.getHandle<bfloat16>().raw(i) = bfloat16::fromBits(uint16_t(in.getAsDouble(i)));
      bindings_.insert(ph, std::move(t));
    } else {
      Tensor t(ty);
      for (size_t i = 0; i < t.size(); i++)
        t.setFromDouble(i, in.getAsDouble(i));
      bindings_.insert(ph, std::move(t));
    }
  }
  for (const auto &name : model_.outputNames)
    if (Placeholder *ph = model_.getOutputPlaceholder(name))
      if (!bindings_.get(ph))
        bindings_.allocate(ph);
  return Error::success();
}

Error ModelRunner::run() {
  if (md_)
    return md_->host->runNetworkBlocking(md_->network, bindings_, {}, &lastReport_);
  return ee_->run(bindings_);
}

std::vector<std::pair<std::string, Type>> ModelRunner::inputTypes() const {
  std::vector<std::pair<std::string, Type>> out;
  for (const std::string &name : inputNames_)
    if (Placeholder *ph = model_.getInput(name))
      out.emplace_back(name, *ph->getType());
  return out;
}

std::string ModelRunner::inputShapesText() const {
  std::string s;
  for (const auto &in : inputTypes())
    s += (s.empty() ? "" : ", ") + in.first + " " + in.second.toString();
  return s.empty() ? "none" : s;
}

std::vector<const Tensor *> ModelRunner::outputs() const {
  std::vector<const Tensor *> out;
  for (const auto &name : model_.outputNames)
    out.push_back(bindings_.get(model_.getOutputPlaceholder(name)));
  return out;
}

uint64_t ModelRunner::constantBytes() const {
  uint64_t b = 0;
  for (const auto &c : ee_->getModule().getConstants())
    b += c->getPayload().getSizeInBytes();
  return b;
}

Expected<std::pair<uint64_t, uint64_t>> ModelRunner::activationBytes() const {
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<IRFunction> ir, generateIR(f_));
  uint64_t live = 0, peak = 0, total = 0;
  for (const auto &I : ir->getInstrs()) {
    if (auto *a = dyn_cast<AllocActivationInst>(I.get())) {
      live += a->getType()->sizeInBytes();
      total += a->getType()->sizeInBytes();
      peak = std::max(peak, live);
    } else if (auto *d = dyn_cast<DeallocActivationInst>(I.get())) {
      live -= d->getSrc()->getType()->sizeInBytes();
    }
  }
  return std::make_pair(peak, total);
}

uint64_t peakRSSBytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0)
      return uint64_t(std::stoull(line.substr(6))) * 1024;
  return 0;
}

} // namespace kiln::tools
