// The shared context of the ONNX operator converters (private to src/Importer).
//
// The importer walks the graph's nodes in order. Every ONNX value name maps either to a
// known constant tensor (initializers, Constant nodes and everything folded from them) or
// to a NodeValue of the function. Constants become graph Constants only when a graph node
// uses them, so shape-only tensors never reach the function. Converters are registered by
// operator family (Convert*.cpp); folders of small constant subgraphs live in ConstFold.cpp.
#ifndef KILN_SRC_IMPORTER_ONNXIMPORTER_H
#define KILN_SRC_IMPORTER_ONNXIMPORTER_H

#include "kiln/Importer/ONNX.h"

#include <onnx/onnx_pb.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace kiln::onnximport {

/// Tensors above this many elements are never folded in the importer.
constexpr dim_t kMaxFoldElements = 1 << 16;

class Importer;

/// Converts one node into graph nodes (or known constants).
using Converter = std::function<Error(Importer &, const onnx::NodeProto &)>;

/// The converters by key (converterKey: the op type, domain-prefixed outside ONNX's
/// domain), each with how many leading inputs ONNX's schema requires of its operator: a
/// node lacking one is rejected before its converter runs, so converters read those inputs
/// without checking. One input is required unless the family's register function says
/// otherwise next to the converter.
class ConverterMap {
public:
  Converter &operator[](const std::string &key) { return entries_[key].convert; }
  /// \p key (registered before) requires its first \p n inputs from opset \p sinceOpset
  /// on (one before it).
  void requireInputs(const std::string &key, int n, int64_t sinceOpset = 1) {
    Entry &e = entries_.at(key);
    e.required = n, e.since = sinceOpset;
  }
  bool count(const std::string &key) const { return entries_.count(key) != 0; }
  const Converter &at(const std::string &key) const { return entries_.at(key).convert; }
  /// How many leading inputs \p key requires at \p opset.
  int requiredInputs(const std::string &key, int64_t opset) const {
    auto it = entries_.find(key);
    if (it == entries_.end() || opset < it->second.since)
      return 1;
    return it->second.required;
  }

private:
  struct Entry {
    Converter convert;
    int required = 1;
    int64_t since = 1;
  };
  std::unordered_map<std::string, Entry> entries_;
};

void registerConvConverters(ConverterMap &m);
void registerLinalgConverters(ConverterMap &m);
void registerNormConverters(ConverterMap &m);
void registerElementwiseConverters(ConverterMap &m);
void registerDataConverters(ConverterMap &m);
void registerReduceConverters(ConverterMap &m);
void registerQuantConverters(ConverterMap &m);


// ---- Tensors and types (Tensors.cpp). ----

/// The kiln element kind of an ONNX data type, or an Unsupported / ModelParse error.
Expected<ElemKind> elemKindFromONNX(int32_t dataType);
/// The ONNX data type of a kiln element kind.
int32_t onnxTypeOf(ElemKind k);
/// Checks a shape from a file: non-negative, rank <= kMaxDims, element count within
/// \p maxElements; \p what names it in errors.
Expected<Dims> checkedDims(const std::vector<int64_t> &dims, uint64_t maxElements,
                           const std::string &what);
/// The bytes of a file: mapped read-only when it is a regular file, else read.
class FileBytes {
public:
  FileBytes() = default;
  ~FileBytes();
  FileBytes(const FileBytes &) = delete;
  FileBytes &operator=(const FileBytes &) = delete;
  /// False if \p path cannot be opened.
  bool open(const std::string &path);
  const char *data() const { return data_; }
  size_t size() const { return size_; }
  /// Done with the bytes [p, p + n) of the mapped file: its whole pages inside that range
  /// leave the process's memory (the file stays; reading them again maps them again).
  /// Nothing happens when the file was read into memory instead.
  void release(const char *p, size_t n) const;
  /// Copies the \p n bytes at \p p, which lie in the mapped file, into \p dst with pread
  /// (the kernel's copy from the page cache) instead of through the mapping, whose pages
  /// are then never touched; false (nothing read) when the file was read into memory, the
  /// bytes are not in it or the read fails. pread measured faster than a copy through the
  /// mapping (backends/CPU/README.md, "Memory").
  bool readInto(const char *p, size_t n, char *dst) const;

private:
  int fd_ = -1; ///< the mapped file, kept open for readInto
  void *map_ = nullptr;
  size_t mapSize_ = 0;
  std::string buf_;
  const char *data_ = nullptr;
  size_t size_ = 0;
};

/// Where a TensorProto's raw_data lies outside the message (stripInitializerData).
struct RawSpan {
  const char *data = nullptr;
  size_t size = 0;
  bool present = false; ///< the message had a raw_data field (possibly empty)
  const FileBytes *file = nullptr; ///< the mapped file data lies in (FileBytes::readInto)
};

/// The serialized ModelProto in [data, data + size) without the raw_data of its graph's
/// initializers, into \p stripped, and where each initializer's raw_data is, in the order
/// of graph.initializer(), into \p raw. Parsing the stripped model then copies no weights:
/// the importer reads each initializer's values from the original bytes as it converts
/// it. False when the bytes do not scan (a full parse then says why).
bool stripInitializerData(const char *data, size_t size, std::string &stripped,
                          std::vector<RawSpan> &raw);

/// Reads the whole file \p path into \p out; false if it cannot be opened.
bool readWholeFile(const std::string &path, std::string &out);
/// Frees the value storage of \p t (raw and typed data), keeping its name, type and dims.
void releaseTensorData(onnx::TensorProto &t);
/// Converts a TensorProto (inline data only) into a tensor. INT8 and UINT8 data become
/// Int32I, unless \p keepEightBit: then Int8Q / UInt8Q with scale 1 and offset 0 (the raw
/// values), as the importer keeps 8-bit initializers. With \p raw, the raw_data is there
/// instead of in \p t (stripInitializerData).
Expected<Tensor> tensorFromProto(const onnx::TensorProto &t, uint64_t maxElements,
                                 bool keepEightBit = false, const RawSpan *raw = nullptr);
/// The transpose of the 2-D tensor \p t.
Tensor transpose2D(const Tensor &t);
/// The transpose of the 2-D TensorProto \p t, read from the file under \p raw a band of rows
/// at a time where it can be (FLOAT, INT32 and INT64 raw_data in a mapped file), so that
/// only the transposed tensor is allocated; otherwise converted, then transposed. A tensor
/// that is not 2-D comes back as tensorFromProto gives it.
Expected<Tensor> transposedFromProto(const onnx::TensorProto &t, uint64_t maxElements,
                                     const RawSpan *raw);
/// True for the 8-bit quantized kinds, which hold ONNX INT8 / UINT8 data.
inline bool isEightBitKind(ElemKind k) { return k == ElemKind::Int8Q || k == ElemKind::UInt8Q; }
/// An Int32I copy of the raw values of an 8-bit tensor.
Tensor widenEightBit(const Tensor &t);

// ---- Window attributes of Conv-like nodes (ConvertConv.cpp). ----

/// The 2-D window of a Conv-like node \p n with input dims \p xd and filter dims \p wd (1-D
/// windows become 2-D with a height of 1): kernels, strides, pads (top, left, bottom,
/// right), dilations, group; errors name the node.
struct ConvWindow2D {
  std::vector<dim_t> kernels, strides, pads, dilations;
  dim_t group = 1;
  bool is1D = false;
};
Expected<ConvWindow2D> readConvWindow2D(Importer &I, const onnx::NodeProto &n, const Dims &xd,
                                        const Dims &wd);

// ---- Evaluation of small constant tensors (ConstFold.cpp). ----
// Converters fold a node in the importer when all its inputs are known constants of at
// most kMaxFoldElements elements (Importer::allConst), so that shape computations never
// reach the graph.

/// Element-wise operations the folder evaluates.
enum class FoldOp { Add, Sub, Mul, Div, Pow, Max, Min, Mod, Equal, Less, LessOrEqual,
                    Greater, GreaterOrEqual, And, Or, Xor };
enum class FoldUnary { Neg, Abs, Not, Floor, Ceil, Sqrt, Sign, Exp, Log, Reciprocal, Round,
                       Relu, Sin, Cos, Tan, Asin, Acos, Atan, Sinh, Cosh, Asinh, Acosh,
                       Atanh };
/// \p a op \p b with numpy broadcasting; integer kinds compute exactly in int64.
Expected<Tensor> foldBinary(FoldOp op, const Tensor &a, const Tensor &b);
Expected<Tensor> foldUnary(FoldUnary op, const Tensor &a);
/// Cond ? x : y with broadcasting.
Expected<Tensor> foldWhere(const Tensor &c, const Tensor &x, const Tensor &y);
/// Converts element kinds (Cast semantics: floats to integers truncate toward zero).
Tensor foldCast(const Tensor &a, ElemKind to);
/// A tensor of \p outDims whose element i is element src(i) of \p in (any kind).
Tensor gatherElements(const Tensor &in, const Dims &outDims,
                      const std::function<size_t(size_t)> &src);
/// Row-major multi-index of flat index \p i in \p dims.
std::vector<dim_t> unflatten(size_t i, const Dims &dims);

/// Integer values of an integer (or bool) tensor, or the truncated values of a float one.
std::vector<int64_t> tensorToInts(const Tensor &t);
std::vector<double> tensorToDoubles(const Tensor &t);
/// A tensor of kind \p k (Int64I, Int32I or Bool: exact integers) from values.
Tensor tensorFromInts(ElemKind k, const Dims &dims, const std::vector<int64_t> &v);
Tensor tensorFromDoubles(ElemKind k, const Dims &dims, const std::vector<double> &v);
/// Numpy broadcast of two shapes; false when incompatible.
bool broadcastShapes(const Dims &a, const Dims &b, Dims &out);

/// The converter context.
class Importer {
public:
  Importer(Function *f, const ONNXLoadOptions &opts);

  /// Imports \p model; the weight data of its top-level initializers is freed as each
  /// becomes a tensor (the model keeps their names and shapes). When \p raw is given, the
  /// model was parsed stripped of that data (stripInitializerData) and raw[i] is where
  /// initializer i's raw_data is; with \p file, pages of the mapped file are released as
  /// the initializers in them are converted.
  Expected<ONNXModel> import(onnx::ModelProto &model, const std::vector<RawSpan> *raw = nullptr,
                             const FileBytes *file = nullptr);

  // ---- For converters. ----
  Function *F;
  Module *M;
  const ONNXLoadOptions &opts;
  /// Opset of the default domain.
  int64_t opset = 0;

  /// The node's name, or "<OpType>#<index>" when it has none.
  std::string nodeName(const onnx::NodeProto &n) const;
  /// A builder name for the \p part of node \p n.
  std::string opName(const onnx::NodeProto &n, const char *part = nullptr) const;

  /// True when input \p i is present (exists and is not the empty name).
  bool hasInput(const onnx::NodeProto &n, int i) const {
    return i < n.input_size() && !n.input(i).empty();
  }
  bool hasOutput(const onnx::NodeProto &n, int i) const {
    return i < n.output_size() && !n.output(i).empty();
  }
  /// True when output \p i is present and used by a later node or a graph output.
  bool isOutputUsed(const onnx::NodeProto &n, int i) const;
  /// The value of input \p i as a graph value (constants are materialised).
  Expected<NodeValue> input(const onnx::NodeProto &n, int i);
  /// The known constant of input \p i, or null. ONNX INT8 / UINT8 initializers are kept
  /// 8-bit (Int8Q / UInt8Q, scale 1, offset 0); this gives them widened to Int32I, as every
  /// converter but the quantization family's expects.
  const Tensor *constInput(const onnx::NodeProto &n, int i) const;
  /// The known constant of input \p i as stored: 8-bit initializers stay 8-bit. Null when
  /// the input is not a known constant.
  const Tensor *constInputAsStored(const onnx::NodeProto &n, int i) const;
  /// Frees the known constant of input \p i when node \p n is its only reader in the whole
  /// model (subgraphs included) and it has not become a graph constant: for converters that
  /// turned it into another constant (a transposed Gemm operand), so that the original and
  /// its replacement are not both held until the import ends.
  void releaseConstInput(const onnx::NodeProto &n, int i);
  /// True when input \p i of \p n is an initializer that importInitializers read
  /// transposed, for \p n alone (a Gemm's transposed B): its constant is already the
  /// operand the node multiplies by.
  bool loadedTransposed(const onnx::NodeProto &n, int i) const {
    return hasInput(n, i) && loadTransposed_.count(n.input(i)) != 0;
  }
  /// The ONNX element type (TensorProto::DataType) of value \p name where the model states
  /// it (graph inputs, initializers, Constant nodes, the outputs of the quantization
  /// converters); 0 (UNDEFINED) otherwise.
  int32_t onnxType(const std::string &name) const {
    auto it = onnxTypes_.find(name);
    return it == onnxTypes_.end() ? 0 : it->second;
  }
  void setONNXType(const std::string &name, int32_t t) { onnxTypes_[name] = t; }
  /// The known constant of input \p i; a ModelParse/Unsupported error when it is absent
  /// or not constant (\p what names it).
  Expected<const Tensor *> requireConstInput(const onnx::NodeProto &n, int i,
                                             const char *what);
  /// The known constants of all present inputs (null for absent optional ones) when
  /// every present input is a constant of at most kMaxFoldElements elements.
  std::optional<std::vector<const Tensor *>> allConst(const onnx::NodeProto &n) const;
  /// Static dims of input \p i (constant or graph value).
  Expected<Dims> inputDims(const onnx::NodeProto &n, int i);
  Expected<ElemKind> inputKind(const onnx::NodeProto &n, int i);

  /// Binds output \p i of \p n.
  void setOutput(const onnx::NodeProto &n, int i, NodeValue v);
  void setOutputConst(const onnx::NodeProto &n, int i, Tensor t);

  // Attributes.
  const onnx::AttributeProto *attr(const onnx::NodeProto &n, const char *name) const;
  int64_t attrInt(const onnx::NodeProto &n, const char *name, int64_t def) const;
  float attrFloat(const onnx::NodeProto &n, const char *name, float def) const;
  std::string attrString(const onnx::NodeProto &n, const char *name,
                         const std::string &def) const;
  std::vector<int64_t> attrInts(const onnx::NodeProto &n, const char *name) const;

  // Errors, with the node, operator and opset named.
  template <typename... Args>
  Error unsupported(const onnx::NodeProto &n, const Args &...args) const {
    return makeError(ErrorCode::Unsupported, describe(n), ": ", args...);
  }
  template <typename... Args>
  Error parseError(const onnx::NodeProto &n, const Args &...args) const {
    return makeError(ErrorCode::ModelParse, describe(n), ": ", args...);
  }
  std::string describe(const onnx::NodeProto &n) const;

  // Graph helpers.
  /// A graph Constant holding \p t.
  NodeValue makeConstant(const std::string &name, Tensor t);
  /// A scalar-valued tensor of \p dims and kind \p k filled with \p v (a Splat).
  NodeValue splat(const std::string &name, ElemKind k, const Dims &dims, double v);
  /// Broadcasts every value in \p vs to their common numpy shape (ModelParse error when
  /// incompatible).
  Error broadcastAll(const onnx::NodeProto &n, std::vector<NodeValue> &vs);
  /// Reshape, skipped when the shape already matches.
  NodeValue reshape(const std::string &name, NodeValue v, const Dims &dims);
  /// Checks rank <= kMaxDims for a shape the converter computed.
  Expected<Dims> toDims(const onnx::NodeProto &n, const std::vector<dim_t> &v) const;
  /// Normalises an axis in [-rank, rank) (or [-rank-1, rank] with \p inclusive).
  Expected<int64_t> normAxis(const onnx::NodeProto &n, int64_t axis, int64_t rank,
                             bool inclusive = false) const;

  /// A value of a subgraph (If branch, Loop body): a graph value, or a known constant.
  struct SubValue {
    NodeValue v;
    std::optional<Tensor> c;
  };
  /// Converts the nodes of subgraph \p g in this scope: its inputs are bound to \p ins (by
  /// position), it sees every outer value, and the names it defines are forgotten after,
  /// so the same body may be converted again. Its outputs come back in \p outs.
  Error convertSubgraph(const onnx::NodeProto &owner, const onnx::GraphProto &g,
                        std::vector<SubValue> ins, std::vector<SubValue> &outs);

private:
  struct Known {
    Tensor owned;
    Constant *c = nullptr;
    /// The Int32I copy of an 8-bit `owned`, made on first use by a converter that needs it.
    mutable Tensor wide;
    const Tensor &get() const {
      if (c)
        return c->getPayload();
      if (isEightBitKind(owned.getElementType())) {
        if (wide.getElementType() != ElemKind::Int32I)
          wide = widenEightBit(owned);
        return wide;
      }
      return owned;
    }
    const Tensor &asStored() const {
      return isEightBitKind(owned.getElementType()) || !c ? owned : c->getPayload();
    }
  };
  Error importGraph(const onnx::GraphProto &g, ONNXModel &out);
  /// Indexes \p g's nodes and counts the reads of every value (bodies' reads included).
  void countUses(const onnx::GraphProto &g);
  /// Converts \p g's initializers into constants, freeing the model's copies as it goes.
  Error importInitializers(const onnx::GraphProto &g);
  /// The initializers of \p g that only a Gemm with transB reads as its B: the importer
  /// reads them transposed from the file (transposedFromProto) instead of reading them and
  /// then making a transposed copy, so a classifier's weights take fresh memory once.
  std::unordered_set<std::string> transposedOnLoad(const onnx::GraphProto &g) const;
  /// \p g's inputs that are not initializers: placeholders, or frozen constant inputs.
  Error importInputs(const onnx::GraphProto &g, ONNXModel &out);
  /// A Save per graph output (a constant output becomes a Constant first).
  Error importOutputs(const onnx::GraphProto &g, ONNXModel &out);
  /// The top-level graph, whose initializers' data importGraph frees once converted.
  onnx::GraphProto *releasable_ = nullptr;
  /// Where the top-level initializers' raw_data is when the model was parsed stripped.
  const std::vector<RawSpan> *raw_ = nullptr;
  const FileBytes *file_ = nullptr;
  Error collectUnsupported(const onnx::GraphProto &g);
  Error convertNode(const onnx::NodeProto &n);
  Error checkOutputs(const onnx::NodeProto &n);
  Expected<Dims> inputShape(const onnx::ValueInfoProto &vi);
  /// Values of the symbolic dimensions (dim_param): ONNXLoadOptions::symbolicDims, then
  /// those the shapes of ONNXLoadOptions::inputShapes give, so that inputs left symbolic
  /// take them too (symbols_).
  Error bindSymbols(const onnx::GraphProto &g);

  ConverterMap converters_;
  std::unordered_map<std::string, NodeValue> values_;
  std::unordered_map<std::string, Known> consts_;
  std::unordered_map<std::string, unsigned> uses_;
  /// Initializers read transposed at load (transposedOnLoad), by name.
  std::unordered_set<std::string> loadTransposed_;
  std::unordered_map<std::string, int32_t> onnxTypes_;
  const onnx::GraphProto *graph_ = nullptr;
  std::unordered_map<const onnx::NodeProto *, int> nodeIndex_;
  /// Values of symbolic dimensions by dim_param.
  std::map<std::string, dim_t> symbols_;
};

} // namespace kiln::onnximport

#endif // KILN_SRC_IMPORTER_ONNXIMPORTER_H
