#include "kiln/ExecutionEngine/ONNXSession.h"
#include "kiln/ExecutionEngine/ExecutionEngine.h"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace kiln {

/// One compiled shape tuple: an engine of its own, and its placeholders in graph order.
struct ONNXSession::Specialization {
  std::unique_ptr<ExecutionEngine> ee;
  std::vector<Placeholder *> inputs, outputs;
};

ONNXSession::ONNXSession(std::string bytes, ONNXSignature sig, ONNXSessionOptions opts)
    : bytes_(std::move(bytes)), sig_(std::move(sig)), opts_(std::move(opts)) {
  opts_.cacheSize = std::max<size_t>(opts_.cacheSize, 1);
}

ONNXSession::~ONNXSession() = default;

Expected<std::unique_ptr<ONNXSession>> ONNXSession::load(const std::string &path,
                                                         ONNXSessionOptions opts) {
  std::ifstream f(path, std::ios::binary);
  if (!f)
    return makeError(ErrorCode::NotFound, "cannot open ONNX model '", path, "'");
  std::ostringstream os;
  os << f.rdbuf();
  std::string bytes = os.str();
  Expected<std::unique_ptr<ONNXSession>> s =
      loadFromBuffer(bytes.data(), bytes.size(), std::move(opts));
  if (!s)
    return s.takeError().addContext("loading '" + path + "'");
  return s;
}

Expected<std::unique_ptr<ONNXSession>> ONNXSession::loadFromBuffer(const void *data, size_t size,
                                                                   ONNXSessionOptions opts) {
  KILN_ASSIGN_OR_RETURN(ONNXSignature sig, getONNXSignatureFromBuffer(data, size));
  std::unique_ptr<ONNXSession> s(new ONNXSession(
      std::string(static_cast<const char *>(data), size), std::move(sig), std::move(opts)));
  if (s->isStatic()) { // the fast path: one compile, now
    Shapes shapes;
    for (const ONNXInputInfo &in : s->sig_.inputs)
      shapes.emplace_back(in.dims.begin(), in.dims.end());
    std::lock_guard<std::mutex> lock(s->mu_);
    KILN_RETURN_IF_ERR(s->compile(shapes, nullptr).takeError());
  }
  return s;
}

bool ONNXSession::isStatic() const {
  return std::all_of(sig_.inputs.begin(), sig_.inputs.end(),
                     [](const ONNXInputInfo &in) { return in.isStatic(); });
}

size_t ONNXSession::getNumCached() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cache_.size();
}

namespace {
/// An error when \p t is not of \p ph's element kind.
Error checkKind(const std::string &input, const Tensor &t, const Placeholder &ph) {
  if (t.getElementType() == ph.getType()->kind)
    return Error::success();
  return makeError(ErrorCode::InvalidArgument, "input '", input, "' is ", t.getType().toString(),
                   "; the model's input is ", ph.getType()->toString());
}
} // namespace

Expected<std::shared_ptr<ONNXSession::Specialization>>
ONNXSession::compile(const Shapes &shapes, const std::vector<const Tensor *> *inputs) {
  std::map<std::string, std::vector<dim_t>> byName;
  for (size_t i = 0; i < shapes.size(); i++)
    byName[sig_.inputs[i].name] = shapes[i];
  KILN_RETURN_IF_ERR(checkONNXInputShapes(sig_.inputs, byName));
  auto spec = std::make_shared<Specialization>();
  spec->ee = std::make_unique<ExecutionEngine>(opts_.backend);
  spec->ee->setStrictBackend(opts_.strictBackend);
  if (opts_.onWarning)
    spec->ee->setWarningHandler(opts_.onWarning);
  Function *f = spec->ee->getModule().createFunction("main");
  ONNXLoadOptions lo;
  lo.inputShapes = std::move(byName);
  KILN_ASSIGN_OR_RETURN(ONNXModel model, loadONNXFromBuffer(bytes_.data(), bytes_.size(), f, lo));
  for (const ONNXInputInfo &in : sig_.inputs) {
    Placeholder *ph = model.getInput(in.name);
    if (!ph)
      return makeError(ErrorCode::Internal, "the imported model has no input '", in.name, "'");
    spec->inputs.push_back(ph);
  }
  for (const std::string &o : sig_.outputNames) {
    Placeholder *ph = model.getOutputPlaceholder(o);
    if (!ph)
      return makeError(ErrorCode::Internal, "the imported model has no output '", o, "'");
    spec->outputs.push_back(ph);
  }
  if (inputs) // a kind the model refuses is reported before the compile
    for (size_t i = 0; i < inputs->size(); i++)
      KILN_RETURN_IF_ERR(checkKind(sig_.inputs[i].name, *(*inputs)[i], *spec->inputs[i]));
  KILN_RETURN_IF_ERR(spec->ee->compile(opts_.compile));
  compiles_++;
  cache_.emplace_front(shapes, spec);
  while (cache_.size() > opts_.cacheSize)
    cache_.pop_back(); // a run still using it keeps it alive
  return spec;
}

Expected<std::shared_ptr<ONNXSession::Specialization>>
ONNXSession::specialize(const std::vector<const Tensor *> &inputs) {
  Shapes shapes;
  for (const Tensor *t : inputs)
    shapes.push_back(t->dims().vec());
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = cache_.begin(); it != cache_.end(); ++it)
    if (it->first == shapes) {
      cache_.splice(cache_.begin(), cache_, it);
      hits_++;
      return cache_.front().second;
    }
  return compile(shapes, &inputs);
}

Expected<std::vector<Tensor>> ONNXSession::run(const std::vector<const Tensor *> &inputs) {
  if (inputs.size() != sig_.inputs.size())
    return makeError(ErrorCode::InvalidArgument, "run: the model has ", sig_.inputs.size(),
                     " inputs, ", inputs.size(), " were given");
  for (size_t i = 0; i < inputs.size(); i++)
    if (!inputs[i])
      return makeError(ErrorCode::InvalidArgument, "run: no tensor for input '",
                       sig_.inputs[i].name, "'");
  KILN_ASSIGN_OR_RETURN(std::shared_ptr<Specialization> spec, specialize(inputs));
  PlaceholderBindings b;
  for (size_t i = 0; i < inputs.size(); i++) {
    const Tensor &t = *inputs[i];
    KILN_RETURN_IF_ERR(checkKind(sig_.inputs[i].name, t, *spec->inputs[i]));
    // The backend only reads inputs: a view spares the copy.
    b.insert(spec->inputs[i],
             Tensor::view(*spec->inputs[i]->getType(), const_cast<char *>(t.getUnsafePtr())));
  }
  for (Placeholder *ph : spec->outputs)
    if (!b.get(ph)) // an output may also be an input
      b.allocate(ph);
  KILN_RETURN_IF_ERR(spec->ee->run(b));
  std::vector<Tensor> out;
  for (Placeholder *ph : spec->outputs)
    out.push_back(std::count(spec->inputs.begin(), spec->inputs.end(), ph) ? b.get(ph)->clone()
                                                                           : std::move(*b.get(ph)));
  return out;
}

Expected<std::map<std::string, Tensor>>
ONNXSession::runNamed(const std::map<std::string, const Tensor *> &inputs) {
  std::vector<const Tensor *> ordered;
  for (const ONNXInputInfo &in : sig_.inputs) {
    auto it = inputs.find(in.name);
    if (it == inputs.end())
      return makeError(ErrorCode::InvalidArgument, "run: no tensor for input '", in.name, "'");
    ordered.push_back(it->second);
  }
  for (const auto &kv : inputs)
    if (std::none_of(sig_.inputs.begin(), sig_.inputs.end(),
                     [&](const ONNXInputInfo &in) { return in.name == kv.first; }))
      return makeError(ErrorCode::InvalidArgument, "run: the model has no input '", kv.first, "'");
  KILN_ASSIGN_OR_RETURN(std::vector<Tensor> out, run(ordered));
  std::map<std::string, Tensor> named;
  for (size_t i = 0; i < out.size(); i++)
    named.emplace(sig_.outputNames[i], std::move(out[i]));
  return named;
}

} // namespace kiln
