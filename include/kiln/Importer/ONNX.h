/// \file
/// The ONNX importer: loads an ONNX model (opsets 7 to 17) into a kiln Function.
///
/// Graph inputs become Placeholders, initializers become Constants, and every graph output
/// is written by a Save node into a Placeholder named after it. Shapes are resolved at load
/// time: the caller may fix input shapes and symbolic dimensions, and subgraphs that only
/// compute shapes (Shape, Gather, Concat, Slice, Unsqueeze, Cast, integer arithmetic...) are
/// evaluated during import, so the function holds only the data path.
///
/// Every failure is returned as an Error, never an abort:
/// - ErrorCode::Unsupported lists every unsupported operator of the model at once (type,
///   node name, opset, count), or names an unsupported attribute / element type;
/// - ErrorCode::ModelParse for malformed or inconsistent files (truncated, bad data types,
///   missing initializers, inconsistent shapes, absurd sizes).
/// On failure the function may hold a partial graph: discard it.
#ifndef KILN_IMPORTER_ONNX_H
#define KILN_IMPORTER_ONNX_H

#include "kiln/Base/Error.h"
#include "kiln/Base/Tensor.h"
#include "kiln/Graph/Graph.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace kiln {

/// Options of one ONNX import; passed in, never global.
struct ONNXLoadOptions {
  /// Shapes of graph inputs by name; they replace the shapes declared in the file.
  std::map<std::string, std::vector<dim_t>> inputShapes;
  /// Values of symbolic dimensions (ONNX dim_param), for example {"batch_size", 8}.
  std::map<std::string, dim_t> symbolicDims;
  /// Value of a symbolic or unknown input dimension not given above; 0 makes such a
  /// dimension an error.
  dim_t defaultSymbolicDim = 1;
  /// Graph inputs whose values are known at load time (for example shape tensors fed as
  /// inputs): they become constants, not placeholders, so shape computations on them fold.
  /// The tensors must outlive the call.
  std::map<std::string, const Tensor *> constantInputs;
  /// Largest element count accepted for any one tensor (input, initializer, result);
  /// beyond it the model is rejected as malformed.
  uint64_t maxTensorElements = uint64_t(1) << 32;
};

/// What an import produced, by ONNX name.
struct ONNXModel {
  /// Graph inputs that are not initializers, in graph order.
  std::vector<std::string> inputNames;
  /// Graph outputs, in graph order.
  std::vector<std::string> outputNames;
  /// Placeholder of each graph input.
  std::map<std::string, Placeholder *> inputs;
  /// Save node of each graph output (its placeholder holds the result after a run).
  std::map<std::string, SaveNode *> outputs;
  /// The opset of the default ONNX domain the model was imported at.
  int64_t opset = 0;
  int64_t irVersion = 0;  ///< The model's ONNX IR version.
  std::string producer;   ///< The model's producer_name.

  /// The placeholder of input \p name, or null.
  Placeholder *getInput(const std::string &name) const;
  /// The placeholder that receives output \p name, or null.
  Placeholder *getOutputPlaceholder(const std::string &name) const;
};

/// Loads the ONNX model file at \p path into \p f (and its module's storage).
Expected<ONNXModel> loadONNX(const std::string &path, Function *f,
                             const ONNXLoadOptions &opts = {});
/// Loads a serialized ONNX model from memory.
Expected<ONNXModel> loadONNXFromBuffer(const void *data, size_t size, Function *f,
                                       const ONNXLoadOptions &opts = {});

/// The graph inputs of the model at \p path that are not initializers, in graph order.
Expected<std::vector<std::string>> getONNXInputNames(const std::string &path);

/// A graph input (not an initializer) as the model declares it.
struct ONNXInputInfo {
  std::string name; ///< The input's ONNX name.
  /// False when the model declares no shape for it (any shape is accepted).
  bool hasShape = false;
  /// Per dimension: its size where the model fixes it, -1 where it is symbolic or unknown.
  std::vector<int64_t> dims;
  /// Per dimension: its ONNX dim_param ("batch"), empty where fixed or unnamed.
  std::vector<std::string> symbols;
  /// True when the model fixes every dimension.
  bool isStatic() const;
  /// "[batch, 3, 224, 224]"; "?" for an unnamed unknown dimension.
  std::string shapeString() const;
};

/// What a model declares of its inputs and outputs.
struct ONNXSignature {
  /// Graph inputs that are not initializers, in graph order.
  std::vector<ONNXInputInfo> inputs;
  /// Graph outputs, in graph order.
  std::vector<std::string> outputNames;
};

/// The signature of a model, without parsing its weights.
Expected<ONNXSignature> getONNXSignature(const std::string &path);
/// The signature of a serialized model in memory.
Expected<ONNXSignature> getONNXSignatureFromBuffer(const void *data, size_t size);

/// Checks shapes for a model's inputs (\p shapes by input name; inputs missing from it are
/// not checked) against what the model declares: the rank and every fixed dimension must
/// match, and each symbolic dimension must take one value in all inputs. The
/// InvalidArgument error names the input, the model's shape and the given one, e.g.
/// "input 'x': the model expects shape [N, 1, 28, 28], given [1, 784] (rank 2 instead of 4)";
/// a name that is no input of the model is an error too.
Error checkONNXInputShapes(const std::vector<ONNXInputInfo> &inputs,
                           const std::map<std::string, std::vector<dim_t>> &shapes);

/// Reads a serialized ONNX TensorProto (such as test_data_set_0/input_0.pb) into a tensor.
/// Element types are mapped as the importer maps them (double becomes float, small
/// integers widen to int32). \p name, when given, receives the proto's name.
Expected<Tensor> loadONNXTensor(const std::string &path, std::string *name = nullptr);
/// The same from a serialized TensorProto in memory.
Expected<Tensor> loadONNXTensorFromBuffer(const void *data, size_t size,
                                          std::string *name = nullptr);

} // namespace kiln

#endif // KILN_IMPORTER_ONNX_H
