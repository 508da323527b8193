// The operator table: every graph node and low-level instruction of Kiln, declared once.
// Everything else (kind enums, node and instruction classes, typed getters, the
// Function::create* builders, default IRGen, printer/parser attribute access) is generated
// from this file by `nodegen` at build time.
//
// Conventions, for every operator unless its doc says otherwise:
// - Layout of images is NCHW; filters are [outChannels, inChannels / group, kH, kW].
// - Pads of 2-D windows are [top, left, bottom, right]; Kernels, Strides and Dilations
//   are [h, w]. Output size: floor((in + padBegin + padEnd - dil*(k-1) - 1) / stride) + 1.
// - Element-wise binary operators take operands of identical type; broadcasting is explicit
//   (a Broadcast node), so backends never see implicit broadcasting.
// - Quantized values follow real = scale * (q - offset); results round half away from zero
//   and saturate to the element kind's range.
// - Float16 and BFloat16 results are computed in float and rounded once per operator.

#include "NodeGen.h"

namespace kiln::classgen {

namespace {

void defineConvolutionsAndPooling(Table &t) {
  t.node("Convolution")
      .input("Input").input("Filter").input("Bias")
      .attr(AttrKind::Dims, "Kernels").attr(AttrKind::Dims, "Strides")
      .attr(AttrKind::Dims, "Pads").attr(AttrKind::Dims, "Dilations")
      .attr(AttrKind::Dim, "Group")
      .result("Result")
      .describe("2-D convolution of Input [N,C,H,W] with Filter [O,C/Group,kH,kW] plus Bias [O]; "
                "Group divides C and O (Group == C == O is depthwise). Quantized: int8 input and "
                "filter, int32 bias with scale inScale*filterScale and offset 0.");
  t.node("MaxPool")
      .input("Input")
      .attr(AttrKind::Dims, "Kernels").attr(AttrKind::Dims, "Strides").attr(AttrKind::Dims, "Pads")
      .result("Result")
      .describe("Maximum over each window of Input [N,C,H,W]; padding never wins. Quantized "
                "input and output must share scale and offset.");
  t.node("AvgPool")
      .input("Input")
      .attr(AttrKind::Dims, "Kernels").attr(AttrKind::Dims, "Strides").attr(AttrKind::Dims, "Pads")
      .attr(AttrKind::Bool, "CountIncludePads")
      .result("Result")
      .describe("Mean over each window of Input [N,C,H,W]. With CountIncludePads the divisor is "
                "kH*kW, otherwise the number of in-bounds elements.");
  t.node("AdaptiveAvgPool")
      .input("Input")
      .attr(AttrKind::Dims, "OutputSize")
      .result("Result")
      .describe("Average pooling of Input [N,C,H,W] to [N,C,oH,oW]; output cell (i,j) averages "
                "rows floor(i*H/oH)..ceil((i+1)*H/oH)-1 and likewise columns (PyTorch rule). "
                "OutputSize [1,1] is global average pooling.");
}

void defineLinearAlgebra(Table &t) {
  t.node("FullyConnected")
      .input("Input").input("Weights").input("Bias")
      .result("Result")
      .describe("Input [N,K] times Weights [K,M] plus Bias [M] -> [N,M]. Quantized: int8 input "
                "and weights, int32 bias (scale inScale*wScale, offset 0).");
  t.node("MatMul")
      .input("LHS").input("RHS")
      .result("Result")
      .describe("Matrix product LHS [N,K] x RHS [K,M] -> [N,M].");
  t.node("BatchMatMul")
      .input("LHS").input("RHS")
      .result("Result")
      .describe("Batched matrix product LHS [B,N,K] x RHS [B,K,M] -> [B,N,M].");
  t.node("BatchedAdd")
      .input("Batch").input("Slice")
      .result("Result")
      .describe("Adds Slice to every batch of Batch: Batch [N, d1..dk] + Slice [d1..dk].");
}

void defineNormalization(Table &t) {
  t.node("BatchNormalization")
      .input("Input").input("Scale").input("Bias").input("Mean").input("Var")
      .attr(AttrKind::Float, "Epsilon")
      .attr(AttrKind::Axis, "ChannelIdx")
      .result("Result")
      .describe("Inference batch normalization: (x - Mean) / sqrt(Var + Epsilon) * Scale + Bias, "
                "the four vectors indexed along ChannelIdx.");
  t.node("LayerNormalization")
      .input("Input").input("Scale").input("Bias")
      .attr(AttrKind::Axis, "Axis")
      .attr(AttrKind::Float, "Epsilon")
      .result("Result")
      .describe("Normalizes over dimensions Axis..rank-1 (biased variance): "
                "(x - mean) / sqrt(var + Epsilon) * Scale + Bias; Scale and Bias have the "
                "shape of those dimensions.");
  t.node("SoftMax")
      .input("Input").attr(AttrKind::Axis, "Axis").result("Result")
      .describe("exp(x - max) / sum(exp(x - max)) along Axis.");
  t.node("LogSoftMax")
      .input("Input").attr(AttrKind::Axis, "Axis").result("Result")
      .describe("x - max - log(sum(exp(x - max))) along Axis.");
}

void defineActivations(Table &t) {
  auto unary = [&](const char *name, const char *doc) -> NodeDef & {
    return t.node(name).input("Input").result("Result").typeRule(TypeRule::SameAsInput)
        .dataParallelOp().describe(doc);
  };
  unary("Relu", "max(x, 0). Quantized: output may have its own scale and offset.");
  unary("Sigmoid", "1 / (1 + exp(-x)).");
  unary("Tanh", "Hyperbolic tangent.");
  unary("Gelu", "x * Phi(x); with Approximate, the tanh form "
                "0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))).")
      .attr(AttrKind::Bool, "Approximate");
  unary("HardSwish", "x * min(max(x + 3, 0), 6) / 6.");
  unary("Swish", "x * sigmoid(x) (SiLU).");
  unary("Clip", "min(max(x, Min), Max).")
      .attr(AttrKind::Float, "Min").attr(AttrKind::Float, "Max");
  unary("LeakyRelu", "x if x >= 0, else Alpha * x.").attr(AttrKind::Float, "Alpha");
  t.node("PRelu")
      .input("Input").input("Slope").result("Result")
      .typeRule(TypeRule::SameAsInputs).dataParallelOp()
      .describe("x if x >= 0, else Slope * x; Slope has the shape of Input.");
  unary("Neg", "-x.");
  unary("Abs", "|x|.");
  unary("Exp", "e^x.");
  unary("Log", "Natural logarithm (NaN below 0, -inf at 0).");
  unary("Sqrt", "Square root.");
  unary("Rsqrt", "1 / sqrt(x).");
  unary("Reciprocal", "1 / x.");
  unary("Erf", "The error function.");
  unary("Floor", "Largest integer not above x.");
  unary("Ceil", "Smallest integer not below x.");
  unary("Round", "Nearest integer, halves to even (ONNX Round).");
}

void defineArithmetic(Table &t) {
  auto binary = [&](const char *name, const char *doc) -> NodeDef & {
    return t.node(name).input("LHS").input("RHS").result("Result")
        .typeRule(TypeRule::SameAsInputs).dataParallelOp().describe(doc);
  };
  binary("Add", "LHS + RHS. Quantized operands may have different scales; so may the result.");
  binary("Sub", "LHS - RHS.");
  binary("Mul", "LHS * RHS.");
  binary("Div", "LHS / RHS (IEEE for floats; integers truncate toward zero).");
  binary("Max", "max(LHS, RHS).");
  binary("Min", "min(LHS, RHS).");
  binary("Pow", "LHS raised to RHS.");
  auto cmp = [&](const char *name, const char *doc) {
    t.node(name).input("LHS").input("RHS").result("Result")
        .typeRule(TypeRule::BoolOfInputs).dataParallelOp().describe(doc);
  };
  cmp("CmpEQ", "LHS == RHS, a Bool tensor.");
  cmp("CmpLT", "LHS < RHS, a Bool tensor.");
  cmp("CmpLTE", "LHS <= RHS, a Bool tensor.");
  t.node("Select")
      .input("Cond").input("LHS").input("RHS").result("Result").dataParallelOp()
      .describe("Cond ? LHS : RHS element-wise; Cond is Bool of the same shape.");
}

void defineReductions(Table &t) {
  auto reduce = [&](const char *name, const char *doc) {
    t.node(name).input("Input")
        .attr(AttrKind::Axes, "Axes").attr(AttrKind::Bool, "KeepDims")
        .result("Result").describe(doc);
  };
  reduce("ReduceSum", "Sum over Axes (distinct); KeepDims keeps them as size 1.");
  reduce("ReduceMean", "Mean over Axes.");
  reduce("ReduceMax", "Maximum over Axes.");
  reduce("ReduceMin", "Minimum over Axes.");
  reduce("ReduceProd", "Product over Axes.");
  t.node("ArgMax")
      .input("Input").attr(AttrKind::Axis, "Axis").attr(AttrKind::Bool, "KeepDims")
      .result("Result")
      .describe("Int64 index of the largest element along Axis (first one on ties).");
  t.node("ArgMin")
      .input("Input").attr(AttrKind::Axis, "Axis").attr(AttrKind::Bool, "KeepDims")
      .result("Result")
      .describe("Int64 index of the smallest element along Axis (first one on ties).");
  t.node("TopK")
      .input("Input").attr(AttrKind::Dim, "K")
      .result("Values").result("Indices")
      .describe("The K largest elements along the last axis, in descending order, and their "
                "Int64 indices (lower index first on ties).");
}

void defineDataMovement(Table &t) {
  t.node("Concat")
      .variadic("Inputs").attr(AttrKind::Axis, "Axis").result("Result")
      .describe("Joins Inputs along Axis; all other dimensions and the type must agree.");
  t.node("Slice")
      .input("Input").attr(AttrKind::Dims, "Starts").attr(AttrKind::Dims, "Ends")
      .result("Result")
      .describe("Elements Starts[i] <= idx < Ends[i] in every dimension.");
  t.node("Reshape")
      .input("Input").attr(AttrKind::Dims, "Dims").result("Result").customIRGen()
      .describe("Same elements, row-major, new shape of the same element count.");
  t.node("Transpose")
      .input("Input").attr(AttrKind::Dims, "Shuffle").result("Result")
      .describe("Permutes dimensions: result dim i is input dim Shuffle[i].");
  t.node("Gather")
      .input("Data").input("Indices").attr(AttrKind::Axis, "Axis").result("Result")
      .describe("Takes slices of Data along Axis at Indices (Int32I or Int64I; negative "
                "indices count from the end); result dims: Data[:Axis] + Indices + Data[Axis+1:].");
  t.node("Tile")
      .input("Input").attr(AttrKind::Dims, "Repeats").result("Result")
      .describe("Repeats the input Repeats[i] times along dimension i.");
  t.node("Pad")
      .input("Input").attr(AttrKind::Dims, "Pads").attr(AttrKind::Float, "Value")
      .result("Result")
      .describe("Constant padding: Pads holds rank begin counts then rank end counts.");
  t.node("Broadcast")
      .input("Input").attr(AttrKind::Dims, "TargetDims").result("Result")
      .describe("Numpy broadcasting to TargetDims: input dims are right-aligned and each must "
                "be 1 or equal to the target.");
  t.node("Splat")
      .attr(AttrKind::Float, "Value").result("Result").typeRule(TypeRule::Explicit)
      .describe("A tensor of the given type filled with Value (quantized: the raw value).");
  t.node("ConvertTo")
      .input("Input").result("Result").typeRule(TypeRule::Explicit).dataParallelOp()
      .describe("Converts element kinds (Cast): floats round to nearest even into integers "
                "and saturate; Bool is x != 0.");
  t.node("Save")
      .input("Input").input("Output").typeRule(TypeRule::NoResult).customIRGen()
      .extraMethod("/// The placeholder written (null if Output is not a placeholder).\n"
                   "  Placeholder *getPlaceholder() const;")
      .describe("Writes Input into the placeholder Output.");
}

void defineQuantization(Table &t) {
  t.node("Quantize")
      .input("Input").result("Result").typeRule(TypeRule::Explicit).dataParallelOp()
      .describe("Float to quantized: q = clamp(round(x / scale) + offset).");
  t.node("Dequantize")
      .input("Input").result("Result").typeRule(TypeRule::Explicit).dataParallelOp()
      .describe("Quantized to float: scale * (q - offset).");
  t.node("RescaleQuantized")
      .input("Input").result("Result").typeRule(TypeRule::Explicit).dataParallelOp()
      .describe("Quantized to quantized with a new scale and offset.");
}

/// Nodes that exist as targets of lowering and fusion (src/Lower, src/Passes/Graph); their
/// type rules are in src/Graph/TypeRulesLowered.cpp and their Interpreter kernels in
/// backends/Interpreter/InterpreterLowered.cpp.
void defineLoweringTargets(Table &t) {
  t.node("InsertTensor")
      .input("Big").input("Small").attr(AttrKind::Dims, "Offsets").result("Result")
      .describe("Big with Small written over it starting at Offsets (one per dimension); "
                "Small has Big's kind and rank and must fit. Pad lowers to InsertTensor "
                "into a Splat.");
  t.node("FusedConvolution")
      .input("Input").input("Filter").input("Bias").variadic("Residual")
      .attr(AttrKind::Dims, "Kernels").attr(AttrKind::Dims, "Strides")
      .attr(AttrKind::Dims, "Pads").attr(AttrKind::Dims, "Dilations")
      .attr(AttrKind::Dim, "Group")
      .attr(AttrKind::String, "Activation").attr(AttrKind::Float, "Alpha")
      .attr(AttrKind::Float, "Beta")
      .result("Result")
      .describe("A Convolution, then the Add of an optional Residual (none or one tensor of "
                "the result's type), then an activation, applied to each output element "
                "before it is stored: Activation is None, Relu, Clip (min(max(x, Alpha), "
                "Beta)), LeakyRelu (x >= 0 ? x : Alpha * x), Sigmoid or Tanh.");
  t.node("FusedFullyConnected")
      .input("Input").input("Weights").input("Bias").variadic("Residual")
      .attr(AttrKind::String, "Activation").attr(AttrKind::Float, "Alpha")
      .attr(AttrKind::Float, "Beta")
      .result("Result")
      .describe("A FullyConnected, then an optional Residual Add and an activation, as for "
                "FusedConvolution.");
}

void defineIRInstructions(Table &t) {
  t.instr("AllocActivation")
      .describe("Allocates an activation buffer of the instruction's type.");
  t.instr("DeallocActivation")
      .operand("Src", OperandKind::Out)
      .describe("Ends the lifetime of an activation buffer.");
  t.instr("TensorView")
      .operand("Src", OperandKind::In)
      .attr(AttrKind::Dims, "Offsets")
      .describe("A view of Src with the instruction's type, starting at Offsets (one per "
                "dimension of Src); a reshape when all offsets are zero and sizes match.");
  t.instr("Copy")
      .operand("Dest", OperandKind::Out).operand("Src", OperandKind::In)
      .describe("Copies Src into Dest (same type).");
}

} // namespace

void defineOperators(Table &t) {
  defineConvolutionsAndPooling(t);
  defineLinearAlgebra(t);
  defineNormalization(t);
  defineActivations(t);
  defineArithmetic(t);
  defineReductions(t);
  defineDataMovement(t);
  defineQuantization(t);
  defineLoweringTargets(t);
  defineIRInstructions(t);
}

} // namespace kiln::classgen
