// What the CPU backend runs. The element kinds are the CPU column of the operator table
// (src/ClassGen/NodeTable.cpp, docs/Operators.md): float32 compute, int8 convolution,
// fully connected (per-tensor and channelwise), MatMul, BatchMatMul and BatchedAdd,
// integer reductions,
// ArgMax/ArgMin/TopK, quantization, and data movement of every element type; this file adds what the table cannot say, the ranks and fused
// activations the kernels handle (the convolutions' beside their emitter, in
// codegen/EmitConv.cpp: convolutionSupported). Every kind claimed has a kernel (an emitter
// in codegen/Emit*.cpp, or the table-driven element-wise default) and runs in the operator
// suite against the Interpreter.

#include "CPUBackend.h"
#include "WidenHalfFloats.h"

#include "kiln/Graph/FusedActivation.h"

#include "backends/CPU/codegen/Codegen.h"
#include "backends/CPU/jit/Jit.h"
#include "src/ClassGen/OpTable.h"

namespace kiln::cpu {

namespace {

unsigned rankOf(const Node &n, unsigned i) { return unsigned(n.getNthInput(i).dims().size()); }

/// The int8 convolution, FC and matrix-product kernels (EmitQuantConv.cpp) pack their
/// weights and fold the bias at compile time when they are Constants, else per run
/// (libjit_qpack_*_rt); the
/// channelwise nodes' scales and offsets (inputs 2 and 3) must be Constants, and the
/// activation offset a value of its 8-bit kind (the padding byte).
bool int8Operands(const Node &n, bool channelwise) {
  ElemKind k = n.getNthInput(0).getElementType();
  if (k != ElemKind::Int8Q && k != ElemKind::UInt8Q)
    return true;
  int32_t off = n.getNthInput(0).getType()->offset;
  int32_t lo = k == ElemKind::Int8Q ? -128 : 0;
  if (off < lo || off > lo + 255)
    return false;
  if (channelwise)
    for (unsigned i = 2; i < 4; i++)
      if (!isa<Constant>(n.getNthInput(i).getNode()))
        return false;
  return true;
}

/// Rank and attribute conditions of the CPU kernels, for a node whose kinds the table
/// accepts. A new operator needs no case here unless its kernel has such a limit.
bool shapeSupported(const Node &n, bool fuseEpilogues, bool fuseSigmoids) {
  switch (n.getKind()) {
  case NodeKind::Convolution:
    return convolutionSupported(n, fuseEpilogues, fuseSigmoids) && int8Operands(n, false);
  case NodeKind::FusedConvolution:
    return convolutionSupported(n, fuseEpilogues, fuseSigmoids) && int8Operands(n, false);
  case NodeKind::ChannelwiseQuantizedConvolution:
    return rankOf(n, 0) == 4 && rankOf(n, 1) == 4 && int8Operands(n, true) &&
           (fuseEpilogues ||
            cast<ChannelwiseQuantizedConvolutionNode>(&n)->getActivation() == "None");
  case NodeKind::ChannelwiseQuantizedFullyConnected:
    return rankOf(n, 0) == 2 && rankOf(n, 1) == 2 && int8Operands(n, true) &&
           (fuseEpilogues ||
            cast<ChannelwiseQuantizedFullyConnectedNode>(&n)->getActivation() == "None");
  case NodeKind::FusedFullyConnected:
    return fuseEpilogues && rankOf(n, 0) == 2 && rankOf(n, 1) == 2 &&
           epilogueRunsFused(cast<FusedFullyConnectedNode>(&n)->getActivation(), fuseSigmoids) &&
           int8Operands(n, false);
  case NodeKind::MaxPool:
  case NodeKind::AvgPool:
  case NodeKind::AdaptiveAvgPool:
    return rankOf(n, 0) == 4;
  case NodeKind::FullyConnected:
    return rankOf(n, 0) == 2 && rankOf(n, 1) == 2 && int8Operands(n, false);
  case NodeKind::MatMul:
    return rankOf(n, 0) == 2 && rankOf(n, 1) == 2 && int8Operands(n, false);
  case NodeKind::BatchMatMul:
    return rankOf(n, 0) == 3 && rankOf(n, 1) == 3 && int8Operands(n, false);
  case NodeKind::ReduceSum:
  case NodeKind::ReduceMean:
  case NodeKind::ReduceMax:
  case NodeKind::ReduceMin:
  case NodeKind::ReduceProd:
    return rankOf(n, 0) <= 16;
  case NodeKind::Tile:
    return rankOf(n, 0) <= 8;
  case NodeKind::GatherElements:
    return rankOf(n, 0) <= 16;
  case NodeKind::ScatterElements:
  case NodeKind::ScatterND: {
    // Reductions compute on f32, index kinds and Bool; 16-bit floats are only replaced.
    const std::string &red = n.getKind() == NodeKind::ScatterND
                                 ? cast<ScatterNDNode>(&n)->getReduction()
                                 : cast<ScatterElementsNode>(&n)->getReduction();
    ElemKind k = n.getType(0)->kind;
    bool half = k == ElemKind::Float16 || k == ElemKind::BFloat16;
    return (n.getKind() == NodeKind::ScatterND || rankOf(n, 0) <= 16) &&
           (red == "none" || !half);
  }
  case NodeKind::Concat:
    // The table checks the first input's kind; the kernels need every input's.
    for (unsigned i = 0; i < n.getNumInputs(); i++)
      if (n.getNthInput(i).getElementType() != n.getType(0)->kind)
        return false;
    return true;
  default:
    return true;
  }
}

/// The kinds whose kernels handle 16-bit floats as they are: they move elements by size
/// (ConvertTo converts them). Every other kind computes on float32 only.
bool movesHalfFloats(const Node &n) {
  switch (n.getKind()) {
  case NodeKind::Concat:
  case NodeKind::Slice:
  case NodeKind::Reshape:
  case NodeKind::Transpose:
  case NodeKind::Gather:
  case NodeKind::Tile:
  case NodeKind::Pad:
  case NodeKind::Broadcast:
  case NodeKind::Splat:
  case NodeKind::ConvertTo:
  case NodeKind::Save:
  case NodeKind::InsertTensor:
  case NodeKind::GatherElements:
  case NodeKind::GatherND:
  case NodeKind::ScatterElements:
  case NodeKind::ScatterND:
    return true;
  default:
    return false;
  }
}

} // namespace

bool CPUBackend::isBf16Gemm(const Node &n) {
  return (n.getKind() == NodeKind::FullyConnected || n.getKind() == NodeKind::MatMul) &&
         n.getType(0)->kind == ElemKind::BFloat16;
}

bool CPUBackend::isBf16Conv(const Node &n) {
  if ((n.getKind() != NodeKind::Convolution && n.getKind() != NodeKind::FusedConvolution) ||
      n.getType(0)->kind != ElemKind::BFloat16)
    return false;
  for (unsigned i = 0; i < 3; i++)
    if (n.getNthInput(i).getElementType() != ElemKind::BFloat16)
      return false;
  if (!isa<Constant>(n.getNthInput(1).getNode()) || rankOf(n, 0) != 4 || rankOf(n, 1) != 4)
    return false;
  if (auto *c = dyn_cast<ConvolutionNode>(&n))
    return c->getGroup() == 1 && c->getKernels().size() == 2;
  auto *f = cast<FusedConvolutionNode>(&n);
  std::optional<FusedActivation> a = parseFusedActivation(f->getActivation());
  return f->getGroup() == 1 && f->getKernels().size() == 2 &&
         (f->getActivation().empty() || a == FusedActivation::None ||
          a == FusedActivation::Relu || a == FusedActivation::Clip);
}

bool CPUBackend::isNativelySupported(const Node &n) const {
  return optable::kindsSupported(n, optable::TableBackend::CPU) &&
         shapeSupported(n, opts_.fuseEpilogues, opts_.fuseSigmoids) &&
         (!hasHalfFloats(n) || movesHalfFloats(n) ||
          (isBf16Gemm(n) && !opts_.disableAvx512 && hostHasAvx512Bf16()) || isBf16Conv(n));
}

bool CPUBackend::isOpSupported(const Node &n) const {
  // The table's CPU column lists float16 and bfloat16 for the float operators: they run
  // widened (WidenHalfFloats.h) when their float32 form runs natively.
  if (isNativelySupported(n))
    return true;
  return optable::kindsSupported(n, optable::TableBackend::CPU) && hasHalfFloats(n) &&
         !movesHalfFloats(n) &&
         isWidenable(n, [this](const Node &w) { return isNativelySupported(w); });
}

} // namespace kiln::cpu
