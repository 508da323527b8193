/// \file
/// ONNXSession: an ONNX model loaded once and run with inputs of any shape it allows.
///
/// Kiln compiles for static shapes. A session keeps the model's bytes; a run with inputs of
/// a shape tuple it has not seen imports the model with those shapes, compiles it for the
/// backend (an ExecutionEngine of its own) and caches that specialization, the least
/// recently used one going when the cache is full. A model whose inputs are all static is
/// compiled once, at load. Shapes are checked against what the model declares first
/// (checkONNXInputShapes): the error names the input, the model's shape and the given one.
///
/// \code
///   auto s = exitOnError(kiln::ONNXSession::load("bert.onnx", {"CPU"}));
///   std::vector<kiln::Tensor> y = exitOnError(s->run({&ids, &mask}));  // any batch, length
/// \endcode
#ifndef KILN_EXECUTIONENGINE_ONNXSESSION_H
#define KILN_EXECUTIONENGINE_ONNXSESSION_H

#include "kiln/Backend/CompileOptions.h"
#include "kiln/Backend/ExecutionContext.h"
#include "kiln/Importer/ONNX.h"

#include <atomic>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace kiln {

class ExecutionEngine;

/// How an ONNXSession compiles its specializations.
struct ONNXSessionOptions {
  /// The backend each specialization is compiled for.
  std::string backend = "Interpreter";
  /// The options of every compile.
  CompileOptions compile;
  /// Specializations kept compiled (least recently used evicted first); at least 1.
  size_t cacheSize = 4;
  /// See ExecutionEngine::setStrictBackend; onWarning as ExecutionEngine::setWarningHandler.
  bool strictBackend = false;
  std::function<void(const std::string &)> onWarning;
};

/// An ONNX model run with inputs of any shape it allows, one compiled specialization per
/// tuple of input shapes, cached (see the file comment).
class ONNXSession {
public:
  /// Reads the model's signature; a model with static inputs is imported and compiled
  /// here. Errors: an unreadable model, and for a static one whatever import or compile
  /// reports.
  static Expected<std::unique_ptr<ONNXSession>> load(const std::string &path,
                                                    ONNXSessionOptions opts = {});
  /// The same from a serialized model in memory (copied).
  static Expected<std::unique_ptr<ONNXSession>> loadFromBuffer(const void *data, size_t size,
                                                              ONNXSessionOptions opts = {});
  ~ONNXSession();
  ONNXSession(const ONNXSession &) = delete;
  ONNXSession &operator=(const ONNXSession &) = delete;

  /// The model's inputs (with their declared, possibly symbolic, shapes) and outputs.
  const ONNXSignature &getSignature() const { return sig_; }
  /// True when every input shape is fixed by the model.
  bool isStatic() const;

  /// Runs on \p inputs, one per graph input in graph order, each of the element kind the
  /// model declares; returns the outputs in graph order. Compiles a specialization for
  /// the inputs' shapes when none is cached. Thread-safe; compiles are serialised.
  Expected<std::vector<Tensor>> run(const std::vector<const Tensor *> &inputs);
  /// The same with inputs and outputs by name.
  Expected<std::map<std::string, Tensor>>
  runNamed(const std::map<std::string, const Tensor *> &inputs);

  /// Specializations compiled so far (a shape tuple compiled again after its eviction
  /// counts again).
  uint64_t getNumCompiles() const { return compiles_.load(); }
  /// Runs that found their specialization cached.
  uint64_t getNumCacheHits() const { return hits_.load(); }
  /// Specializations cached now.
  size_t getNumCached() const;

private:
  struct Specialization;
  using Shapes = std::vector<std::vector<dim_t>>;
  ONNXSession(std::string bytes, ONNXSignature sig, ONNXSessionOptions opts);
  /// The specialization for \p inputs' shapes, compiled when not cached.
  Expected<std::shared_ptr<Specialization>> specialize(const std::vector<const Tensor *> &inputs);
  Expected<std::shared_ptr<Specialization>> compile(const Shapes &shapes,
                                                    const std::vector<const Tensor *> *inputs);

  std::string bytes_;
  ONNXSignature sig_;
  ONNXSessionOptions opts_;
  mutable std::mutex mu_;
  /// Most recently used first.
  std::list<std::pair<Shapes, std::shared_ptr<Specialization>>> cache_;
  std::atomic<uint64_t> compiles_{0}, hits_{0};
};

} // namespace kiln

#endif // KILN_EXECUTIONENGINE_ONNXSESSION_H
