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
// - Float16 and BFloat16 results are computed in float and rounded once per operator. The
//   CPU backend runs them so: a float operator on 16-bit floats becomes ConvertTo(float)
//   operands -> the float32 kernel -> ConvertTo back (backends/CPU/WidenHalfFloats.h);
//   data movement moves them as they are.

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
                "filter, int32 bias with scale inScale*filterScale and offset 0.")
      .lowering("lowerGroupedConvolution",
                "Group > 1: per group g, Convolution(Slice_g input channels, Slice_g filter, "
                "Slice_g bias, Group = 1), joined by Concat on the channel axis")
      .onnx({"Conv"})
      .interpreter("uniform(floats); i8q, i8q, i32q -> i8q")
      .cpu("uniform(floats); i8q, i8q, i32q -> i8q",
           "rank-4 Input and Filter; int8: Input offset in [-128, 127] (Filter and Bias packed "
           "at compile time when constant, per run otherwise)")
      .sim("uniform(f32|f16); i8q, i8q, i32q -> i8q");
  t.node("MaxPool")
      .input("Input")
      .attr(AttrKind::Dims, "Kernels").attr(AttrKind::Dims, "Strides").attr(AttrKind::Dims, "Pads")
      .result("Result")
      .describe("Maximum over each window of Input [N,C,H,W]; padding never wins. Quantized "
                "input and output must share scale and offset.")
      .noLowering()
      .onnx({"MaxPool"})
      .interpreter("floats|i8q|index -> =")
      .cpu("uniform(floats|index); i8q -> i8q", "rank-4 Input")
      .sim("f32|f16|i8q -> =");
  t.node("AvgPool")
      .input("Input")
      .attr(AttrKind::Dims, "Kernels").attr(AttrKind::Dims, "Strides").attr(AttrKind::Dims, "Pads")
      .attr(AttrKind::Bool, "CountIncludePads")
      .result("Result")
      .describe("Mean over each window of Input [N,C,H,W]. With CountIncludePads the divisor is "
                "kH*kW, otherwise the number of in-bounds elements.")
      .noLowering()
      .onnx({"AveragePool"})
      .interpreter("floats|i8q -> =")
      .cpu("uniform(floats); i8q -> i8q", "rank-4 Input")
      .sim("f32|f16|i8q -> =");
  t.node("AdaptiveAvgPool")
      .input("Input")
      .attr(AttrKind::Dims, "OutputSize")
      .result("Result")
      .describe("Average pooling of Input [N,C,H,W] to [N,C,oH,oW]; output cell (i,j) averages "
                "rows floor(i*H/oH)..ceil((i+1)*H/oH)-1 and likewise columns (PyTorch rule). "
                "OutputSize [1,1] is global average pooling.")
      .noLowering()
      .onnx({"GlobalAveragePool"})
      .interpreter("floats|i8q -> =")
      .cpu("uniform(floats); i8q -> i8q", "rank-4 Input")
      .sim("f32|f16|i8q -> =");
}

void defineLinearAlgebra(Table &t) {
  t.node("FullyConnected")
      .input("Input").input("Weights").input("Bias")
      .result("Result")
      .describe("Input [N,K] times Weights [K,M] plus Bias [M] -> [N,M]. Quantized: int8 input "
                "and weights, int32 bias (scale inScale*wScale, offset 0).")
      .lowering("lowerFullyConnected", "BatchedAdd(MatMul(Input, Weights), Bias)")
      .onnx({"Gemm"})
      .interpreter("uniform(floats); i8q, i8q, i32q -> i8q")
      .cpu("uniform(floats); i8q, i8q, i32q -> i8q",
           "rank-2 Input and Weights; int8: Input offset in [-128, 127] (Weights and Bias packed "
           "at compile time when constant, per run otherwise)")
      .sim("uniform(f32|f16); i8q, i8q, i32q -> i8q");
  t.node("MatMul")
      .input("LHS").input("RHS")
      .result("Result")
      .describe("Matrix product LHS [N,K] x RHS [K,M] -> [N,M].")
      .noLowering()
      .onnx({"MatMul", "Gemm"})
      .interpreter("uniform(floats); i8q, i8q -> i8q")
      .cpu("uniform(floats); i8q, i8q -> i8q",
           "rank-2 LHS and RHS; int8: LHS offset in [-128, 127] (RHS packed at compile time "
           "when constant, per run otherwise)")
      .sim("uniform(f32|f16); i8q, i8q -> i8q");
  t.node("BatchMatMul")
      .input("LHS").input("RHS")
      .result("Result")
      .describe("Batched matrix product LHS [B,N,K] x RHS [B,K,M] -> [B,N,M].")
      .lowering("lowerBatchMatMul",
                "per batch i: Reshape(MatMul(Reshape(Slice_i LHS), Reshape(Slice_i RHS))), "
                "joined by Concat on axis 0")
      .onnx({"MatMul"})
      .interpreter("uniform(floats); i8q, i8q -> i8q")
      .cpu("uniform(floats); i8q, i8q -> i8q",
           "rank-3 LHS and RHS; int8: as MatMul's, per batch")
      .sim("none");
  t.node("BatchedAdd")
      .input("Batch").input("Slice")
      .result("Result")
      .describe("Adds Slice to every batch of Batch: Batch [N, d1..dk] + Slice [d1..dk].")
      .noLowering()
      .interpreter("uniform(floats); i8q, i8q -> i8q")
      .cpu("uniform(floats); i8q, i8q -> i8q")
      .sim("none");
}

void defineNormalization(Table &t) {
  t.node("BatchNormalization")
      .input("Input").input("Scale").input("Bias").input("Mean").input("Var")
      .attr(AttrKind::Float, "Epsilon")
      .attr(AttrKind::Axis, "ChannelIdx")
      .result("Result")
      .describe("Inference batch normalization: (x - Mean) / sqrt(Var + Epsilon) * Scale + Bias, "
                "the four vectors indexed along ChannelIdx.")
      .lowering("lowerBatchNormalization",
                "x * A + B with A = Scale / Sqrt(Var + Epsilon), B = Bias - Mean * A, the "
                "vectors reshaped to 1s but at ChannelIdx and broadcast")
      .onnx({"BatchNormalization"})
      .interpreter("uniform(floats)")
      .cpu("uniform(floats)")
      .sim("none");
  t.node("LayerNormalization")
      .input("Input").input("Scale").input("Bias")
      .attr(AttrKind::Axis, "Axis")
      .attr(AttrKind::Float, "Epsilon")
      .result("Result")
      .describe("Normalizes over dimensions Axis..rank-1 (biased variance): "
                "(x - mean) / sqrt(var + Epsilon) * Scale + Bias; Scale and Bias have the "
                "shape of those dimensions.")
      .lowering("lowerLayerNormalization",
                "R = ReduceSum over Axis..rank-1 (kept dims), n = elements reduced: "
                "mean = R(x) / n, d = x - mean, var = R(d * d) / n, "
                "y = d * Rsqrt(var + Epsilon) * Scale + Bias (broadcast to x)")
      .onnx({"LayerNormalization"})
      .interpreter("uniform(floats)")
      .cpu("uniform(floats)")
      .sim("none");
  t.node("SoftMax")
      .input("Input").attr(AttrKind::Axis, "Axis").result("Result")
      .describe("exp(x - max) / sum(exp(x - max)) along Axis.")
      .noLowering()
      .onnx({"Softmax"})
      .interpreter("uniform(floats)")
      .cpu("uniform(floats)")
      .sim("none");
  t.node("LogSoftMax")
      .input("Input").attr(AttrKind::Axis, "Axis").result("Result")
      .describe("x - max - log(sum(exp(x - max))) along Axis.")
      .lowering("lowerLogSoftMax",
                "d = x - ReduceMax(x, Axis), y = d - Log(ReduceSum(Exp(d), Axis)) "
                "(kept dims, broadcast)")
      .onnx({"LogSoftmax"})
      .interpreter("uniform(floats)")
      .cpu("uniform(floats)")
      .sim("none");
}

void defineActivations(Table &t) {
  // Unary element-wise operators: no lowering, run by the CPU backend on the float kinds
  // (16-bit ones widened to float32) and not by the Sim chip, unless stated after.
  auto unary = [&](const char *name, const char *doc) -> NodeDef & {
    return t.node(name).input("Input").result("Result").typeRule(TypeRule::SameAsInput)
        .dataParallelOp().describe(doc)
        .noLowering().interpreter("uniform(floats)").cpu("uniform(floats)").sim("none");
  };
  unary("Relu", "max(x, 0). Quantized: output may have its own scale and offset.")
      .onnx({"Relu"}).interpreter("floats|i8q -> =").cpu("uniform(floats); i8q -> i8q")
      .sim("f32|f16|i8q -> =");
  unary("Sigmoid", "1 / (1 + exp(-x)).").onnx({"Sigmoid"});
  unary("Tanh", "Hyperbolic tangent.").onnx({"Tanh"});
  unary("Gelu", "x * Phi(x); with Approximate, the tanh form "
                "0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))).")
      .attr(AttrKind::Bool, "Approximate")
      .lowering("lowerGelu", "0.5 * x * (1 + Erf(x / sqrt 2)); with Approximate "
                             "0.5 * x * (1 + Tanh(sqrt(2/pi) * (x + 0.044715 * x * x * x)))");
  unary("HardSwish", "x * min(max(x + 3, 0), 6) / 6.")
      .lowering("lowerHardSwish", "x * Min(Max(x + 3, 0), 6) / 6")
      .onnx({"HardSwish"});
  unary("Swish", "x * sigmoid(x) (SiLU).").lowering("lowerSwish", "x * Sigmoid(x)");
  unary("Clip", "min(max(x, Min), Max).")
      .attr(AttrKind::Float, "Min").attr(AttrKind::Float, "Max")
      .lowering("lowerClip", "Min(Max(x, Min), Max); an infinite bound is dropped")
      .onnx({"Clip", "HardSigmoid"});
  unary("LeakyRelu", "x if x >= 0, else Alpha * x.").attr(AttrKind::Float, "Alpha")
      .lowering("lowerLeakyRelu", "Max(x, 0) + Min(x, 0) * Alpha")
      .onnx({"LeakyRelu"});
  t.node("PRelu")
      .input("Input").input("Slope").result("Result")
      .typeRule(TypeRule::SameAsInputs).dataParallelOp()
      .describe("x if x >= 0, else Slope * x; Slope has the shape of Input.")
      .lowering("lowerPRelu", "Max(x, 0) + Min(x, 0) * Slope")
      .onnx({"PRelu"})
      .interpreter("uniform(floats)")
      .cpu("uniform(floats)")
      .sim("none");
  unary("Neg", "-x (integers wrap).").onnx({"Neg"}).interpreter("numeric")
      .cpu("uniform(numeric)");
  unary("Abs", "|x| (integers: |MIN| wraps to MIN).").onnx({"Abs"}).interpreter("numeric")
      .cpu("uniform(numeric)");
  unary("Exp", "e^x.").onnx({"Exp"});
  unary("Log", "Natural logarithm (NaN below 0, -inf at 0).").onnx({"Log", "Softplus"});
  unary("Sqrt", "Square root.").onnx({"Sqrt"});
  unary("Rsqrt", "1 / sqrt(x).");
  unary("Reciprocal", "1 / x.").onnx({"Reciprocal"});
  unary("Erf", "The error function.").onnx({"Erf"});
  unary("Floor", "Largest integer not above x.").onnx({"Floor"});
  unary("Ceil", "Smallest integer not below x.").onnx({"Ceil"});
  unary("Round", "Nearest integer, halves to even (ONNX Round).").onnx({"Round"});
}

void defineArithmetic(Table &t) {
  // Binary element-wise operators: no lowering, the float kinds, int32 and int64 on the CPU
  // backend (integers wrap), not on Sim, unless stated after.
  auto binary = [&](const char *name, const char *doc) -> NodeDef & {
    return t.node(name).input("LHS").input("RHS").result("Result")
        .typeRule(TypeRule::SameAsInputs).dataParallelOp().describe(doc)
        .noLowering().cpu("uniform(numeric)").sim("none");
  };
  binary("Add", "LHS + RHS. Quantized operands may have different scales; so may the result.")
      .onnx({"Add", "Sum"}).interpreter("numeric|i8q -> =").sim("f32|f16|i8q -> =")
      .cpu("uniform(numeric); i8q, i8q -> i8q");
  binary("Sub", "LHS - RHS.").onnx({"Sub"}).interpreter("numeric|i8q -> =")
      .cpu("uniform(numeric); i8q, i8q -> i8q");
  binary("Mul", "LHS * RHS.").onnx({"Mul"}).interpreter("numeric|i8q -> =")
      .cpu("uniform(numeric); i8q, i8q -> i8q");
  binary("Div", "LHS / RHS (IEEE for floats; integers truncate toward zero, MIN / -1 is "
               "MIN; integer division by zero is an error on the Interpreter and 0 on the CPU "
               "backend, whose kernels cannot stop a run).")
      .onnx({"Div"}).interpreter("numeric");
  binary("Max", "max(LHS, RHS).").onnx({"Max"}).interpreter("numeric|i8q -> =")
      .cpu("uniform(numeric); i8q, i8q -> i8q");
  binary("Min", "min(LHS, RHS).").onnx({"Min"}).interpreter("numeric|i8q -> =")
      .cpu("uniform(numeric); i8q, i8q -> i8q");
  binary("Pow", "LHS raised to RHS. Integers: exact with wrapping; a negative exponent "
                "gives 1 / LHS^-RHS truncated (0 unless LHS is 1 or -1); 0^negative is an "
                "error on the Interpreter and 0 on the CPU backend.")
      .onnx({"Pow"}).interpreter("numeric");
  auto cmp = [&](const char *name, const char *doc) -> NodeDef & {
    return t.node(name).input("LHS").input("RHS").result("Result")
        .typeRule(TypeRule::BoolOfInputs).dataParallelOp().describe(doc)
        .noLowering().interpreter("numeric").cpu("numeric, = -> bool").sim("none");
  };
  cmp("CmpEQ", "LHS == RHS, a Bool tensor.").onnx({"Equal", "Not"});
  cmp("CmpLT", "LHS < RHS, a Bool tensor.").onnx({"Less", "Greater"});
  cmp("CmpLTE", "LHS <= RHS, a Bool tensor.").onnx({"LessOrEqual", "GreaterOrEqual"});
  t.node("Select")
      .input("Cond").input("LHS").input("RHS").result("Result").dataParallelOp()
      .describe("Cond ? LHS : RHS element-wise; Cond is Bool of the same shape.")
      .noLowering()
      .onnx({"Where"})
      .interpreter("bool, all")
      .cpu("bool, plain")
      .sim("none");
}

void defineReductions(Table &t) {
  auto reduce = [&](const char *name, const char *doc) -> NodeDef & {
    return t.node(name).input("Input")
        .attr(AttrKind::Axes, "Axes").attr(AttrKind::Bool, "KeepDims")
        .result("Result").describe(doc)
        .noLowering().interpreter("numeric").cpu("uniform(numeric)", "Input rank at most 16")
        .sim("none");
  };
  reduce("ReduceSum", "Sum over Axes (distinct); KeepDims keeps them as size 1.")
      .onnx({"ReduceSum"});
  reduce("ReduceMean", "Mean over Axes.")
      .lowering("lowerReduceMean", "ReduceSum(x, Axes) / Splat(count)")
      .onnx({"ReduceMean"})
      .interpreter("floats")
      .cpu("uniform(floats)", "Input rank at most 16");
  reduce("ReduceMax", "Maximum over Axes.").onnx({"ReduceMax", "GlobalMaxPool"});
  reduce("ReduceMin", "Minimum over Axes.").onnx({"ReduceMin"});
  reduce("ReduceProd", "Product over Axes.").onnx({"ReduceProd"});
  t.node("ArgMax")
      .input("Input").attr(AttrKind::Axis, "Axis").attr(AttrKind::Bool, "KeepDims")
      .result("Result")
      .describe("Int64 index of the largest element along Axis (first one on ties).")
      .noLowering().onnx({"ArgMax"}).interpreter("numeric|i8q").cpu("numeric|i8q -> i64")
      .sim("none");
  t.node("ArgMin")
      .input("Input").attr(AttrKind::Axis, "Axis").attr(AttrKind::Bool, "KeepDims")
      .result("Result")
      .describe("Int64 index of the smallest element along Axis (first one on ties).")
      .noLowering().onnx({"ArgMin"}).interpreter("numeric|i8q").cpu("numeric|i8q -> i64")
      .sim("none");
  t.node("TopK")
      .input("Input").attr(AttrKind::Dim, "K")
      .result("Values").result("Indices")
      .describe("The K largest elements along the last axis, in descending order, and their "
                "Int64 indices (lower index first on ties).")
      .noLowering().onnx({"TopK"}).interpreter("numeric|i8q").cpu("numeric|i8q -> =")
      .sim("none");
}

void defineDataMovement(Table &t) {
  t.node("Concat")
      .variadic("Inputs").attr(AttrKind::Axis, "Axis").result("Result")
      .describe("Joins Inputs along Axis; all other dimensions and the type must agree.")
      .noLowering()
      .onnx({"Concat"})
      .interpreter("all")
      .cpu("all -> =", "every input of the result's kind")
      .sim("f32|f16|i8q -> =");
  t.node("Slice")
      .input("Input").attr(AttrKind::Dims, "Starts").attr(AttrKind::Dims, "Ends")
      .result("Result")
      .describe("Elements Starts[i] <= idx < Ends[i] in every dimension.")
      .noLowering()
      .onnx({"Slice", "Split"})
      .interpreter("all")
      .cpu("all -> =")
      .sim("none");
  t.node("Reshape")
      .input("Input").attr(AttrKind::Dims, "Dims").result("Result").customIRGen()
      .describe("Same elements, row-major, new shape of the same element count.")
      .noLowering()
      .onnx({"Reshape", "Flatten", "Squeeze", "Unsqueeze"})
      .interpreter("all")
      .cpu("uniform type")
      .sim("f32|f16|i8q");
  t.node("Transpose")
      .input("Input").attr(AttrKind::Dims, "Shuffle").result("Result")
      .describe("Permutes dimensions: result dim i is input dim Shuffle[i].")
      .noLowering()
      .onnx({"Transpose"})
      .interpreter("all")
      .cpu("all -> =")
      .sim("none");
  t.node("Gather")
      .input("Data").input("Indices").attr(AttrKind::Axis, "Axis").result("Result")
      .describe("Takes slices of Data along Axis at Indices (Int32I or Int64I; negative "
                "indices count from the end); result dims: Data[:Axis] + Indices + Data[Axis+1:].")
      .noLowering()
      .onnx({"Gather"})
      .interpreter("all, index")
      .cpu("all, index -> =")
      .sim("none");
  t.node("Tile")
      .input("Input").attr(AttrKind::Dims, "Repeats").result("Result")
      .describe("Repeats the input Repeats[i] times along dimension i.")
      .lowering("lowerTile", "for each dimension with repeat r > 1: Concat of r copies")
      .onnx({"Tile"})
      .interpreter("all")
      .cpu("all -> =", "Input rank at most 8")
      .sim("none");
  t.node("Pad")
      .input("Input").attr(AttrKind::Dims, "Pads").attr(AttrKind::Float, "Value")
      .result("Result")
      .describe("Constant padding: Pads holds rank begin counts then rank end counts.")
      .lowering("lowerPad", "InsertTensor(Splat(Value, result type), x, Offsets = begin pads)")
      .onnx({"Pad"})
      .interpreter("all")
      .cpu("all -> =")
      .sim("none");
  t.node("Broadcast")
      .input("Input").attr(AttrKind::Dims, "TargetDims").result("Result")
      .describe("Numpy broadcasting to TargetDims: input dims are right-aligned and each must "
                "be 1 or equal to the target.")
      .lowering("lowerBroadcast",
                "Tile(Reshape(x, dims of x left-padded with 1s), TargetDims / those)")
      .onnx({"Expand"})
      .interpreter("all")
      .cpu("all -> =")
      .sim("none");
}

/// Nodes that make, convert or store a tensor rather than move its elements.
void defineFillsAndCasts(Table &t) {
  t.node("Splat")
      .attr(AttrKind::Float, "Value").result("Result").typeRule(TypeRule::Explicit)
      .describe("A tensor of the given type filled with Value (quantized: the raw value).")
      .noLowering()
      .interpreter("-> all")
      .cpu("-> all")
      .sim("none");
  t.node("ConvertTo")
      .input("Input").result("Result").typeRule(TypeRule::Explicit).dataParallelOp()
      .describe("Converts element kinds (Cast): floats round to nearest even into integers "
                "and saturate; Bool is x != 0.")
      .noLowering()
      .onnx({"Cast", "CastLike"})
      .interpreter("plain -> plain")
      .cpu("plain -> plain")
      .sim("none");
  t.node("Save")
      .input("Input").input("Output").typeRule(TypeRule::NoResult).customIRGen()
      .extraMethod("/// The placeholder written (null if Output is not a placeholder).\n"
                   "  Placeholder *getPlaceholder() const;")
      .describe("Writes Input into the placeholder Output.")
      .noLowering()
      .interpreter("all")
      .cpu("uniform type")
      .sim("f32|f16|i8q");
}

void defineQuantization(Table &t) {
  t.node("Quantize")
      .input("Input").result("Result").typeRule(TypeRule::Explicit).dataParallelOp()
      .describe("Float to quantized: q = clamp(round(x / scale) + offset).")
      .noLowering()
      .onnx({"QuantizeLinear", "DynamicQuantizeLinear"})
      .interpreter("f32 -> quantized")
      .cpu("f32 -> quantized")
      .sim("f32 -> i8q");
  t.node("Dequantize")
      .input("Input").result("Result").typeRule(TypeRule::Explicit).dataParallelOp()
      .describe("Quantized to float: scale * (q - offset).")
      .noLowering()
      .onnx({"DequantizeLinear"})
      .interpreter("quantized -> f32")
      .cpu("quantized -> f32")
      .sim("i8q -> f32");
  t.node("RescaleQuantized")
      .input("Input").result("Result").typeRule(TypeRule::Explicit).dataParallelOp()
      .describe("Quantized to quantized with a new scale and offset.")
      .noLowering()
      .interpreter("quantized -> =")
      .cpu("quantized -> =")
      .sim("none");
  t.node("ChannelwiseQuantizedConvolution")
      .input("Input").input("Filter").input("FilterScales").input("FilterOffsets")
      .input("Bias")
      .attr(AttrKind::Dims, "Kernels").attr(AttrKind::Dims, "Strides")
      .attr(AttrKind::Dims, "Pads").attr(AttrKind::Dims, "Dilations")
      .attr(AttrKind::Dim, "Group")
      .attr(AttrKind::String, "Activation").attr(AttrKind::Float, "Alpha")
      .attr(AttrKind::Float, "Beta")
      .result("Result").typeRule(TypeRule::Explicit)
      .describe("Convolution (Convolution's shapes and attributes) of a quantized Input "
                "[N,C,H,W] (i8q or u8q) with an 8-bit Filter [O,C/Group,kH,kW] (i8q or u8q, "
                "its type's scale 1 and offset 0) quantized per output channel: filter "
                "value f of channel o means FilterScales[o] * (f - FilterOffsets[o]) "
                "(FilterScales [O] float, positive and finite; FilterOffsets [O] i32, usually "
                "Constants). Bias [O] is i32 in accumulator units (worth inScale * "
                "FilterScales[o] each, as ONNX QLinearConv's) or float (real values). Per "
                "output: acc = sum of (x - inOffset) * (f - FilterOffsets[o]) over the "
                "in-bounds taps (the padding is real zero), exact in 64-bit integers, plus an "
                "i32 bias; real = inScale * FilterScales[o] * acc (plus a float bias) in "
                "double; an i8q or u8q result is round(real / outScale) + outOffset, halves "
                "away from zero, saturated. An i32 result (ONNX ConvInteger) is acc plus an "
                "i32 bias itself, wrapped to 32 bits; the scales do not enter it. Activation "
                "None, Relu (max(real, 0)) or Clip (min(max(real, Alpha), Beta), Alpha <= "
                "Beta) is applied to the real value before its one rounding (so the result "
                "saturates at the activation's bounds quantized on the result's grid: a Relu "
                "or Clip fused by fuse-activations); an i32 result takes None only.")
      .noLowering()
      .onnx({"QLinearConv", "ConvInteger"})
      .interpreter("i8q|u8q, i8q|u8q, f32, i32, i32|f32 -> i8q|u8q|i32")
      .cpu("i8q|u8q, i8q|u8q, f32, i32, i32|f32 -> i8q|u8q|i32",
           "rank 4; constant FilterScales and FilterOffsets (Filter and Bias packed at compile "
           "time when constant, per run otherwise); Input offset in its kind's range")
      .sim("none");
  t.node("ChannelwiseQuantizedFullyConnected")
      .input("Input").input("Weights").input("WeightScales").input("WeightOffsets")
      .input("Bias")
      .attr(AttrKind::String, "Activation").attr(AttrKind::Float, "Alpha")
      .attr(AttrKind::Float, "Beta")
      .result("Result").typeRule(TypeRule::Explicit)
      .describe("Quantized Input [N,K] (i8q or u8q) times 8-bit Weights [K,M] (i8q or u8q, "
                "its type's scale 1 and offset 0) quantized per output column: weight w of "
                "column m means WeightScales[m] * (w - WeightOffsets[m]) (WeightScales [M] "
                "float, WeightOffsets [M] i32), plus Bias [M] (i32 in accumulator units, "
                "worth inScale * WeightScales[m] each, or float) -> [N,M] i8q, u8q or i32. "
                "Arithmetic, rounding, the i32 result (ONNX MatMulInteger) and Activation as "
                "ChannelwiseQuantizedConvolution.")
      .noLowering()
      .onnx({"QLinearMatMul", "MatMulInteger"})
      .interpreter("i8q|u8q, i8q|u8q, f32, i32, i32|f32 -> i8q|u8q|i32")
      .cpu("i8q|u8q, i8q|u8q, f32, i32, i32|f32 -> i8q|u8q|i32",
           "rank 2; constant WeightScales and WeightOffsets (Weights and Bias packed at "
           "compile time when constant, per run otherwise); Input offset in its kind's range")
      .sim("none");
}

/// Nodes that exist as targets of lowering and fusion (src/Lower, src/Passes/Graph); their
/// type rules and Interpreter kernels are with their families: InsertTensor with Data,
/// FusedConvolution with Conv, FusedFullyConnected with Linalg.
void defineLoweringTargets(Table &t) {
  t.node("InsertTensor")
      .input("Big").input("Small").attr(AttrKind::Dims, "Offsets").result("Result")
      .describe("Big with Small written over it starting at Offsets (one per dimension); "
                "Small has Big's kind and rank and must fit. Pad lowers to InsertTensor "
                "into a Splat.")
      .noLowering()
      .interpreter("all, =")
      .cpu("all, =")
      .sim("none");
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
                "Beta)), LeakyRelu (x >= 0 ? x : Alpha * x), Sigmoid, Tanh, Swish (x * sigmoid(x)), "
                "HardSwish (x * min(max(Alpha * x + Beta, 0), 1)), HardSigmoid "
                "(min(max(Alpha * x + Beta, 0), 1)), Gelu (x * Phi(x)) or GeluTanh (GELU's "
                "tanh form). Quantized (i8q Input and Filter, i32q Bias, i8q result, as "
                "Convolution): Activation None, Relu or Clip applied to the real value "
                "before its one rounding to the result's grid (the result saturates at the "
                "activation's bounds quantized on that grid), no Residual.")
      .noLowering()
      .interpreter("uniform(floats); i8q, i8q, i32q -> i8q")
      .cpu("uniform(f32|bf16); i8q, i8q, i32q -> i8q",
           "rank-4 Input and Filter; no Residual on depthwise; bf16: "
           "group 1, constant Filter, Activation None, Relu or Clip; int8: as Convolution")
      .sim("none");
  t.node("FusedFullyConnected")
      .input("Input").input("Weights").input("Bias").variadic("Residual")
      .attr(AttrKind::String, "Activation").attr(AttrKind::Float, "Alpha")
      .attr(AttrKind::Float, "Beta")
      .result("Result")
      .describe("A FullyConnected, then an optional Residual Add and an activation, as for "
                "FusedConvolution (quantized too).")
      .noLowering()
      .interpreter("uniform(floats); i8q, i8q, i32q -> i8q")
      .cpu("uniform(f32); i8q, i8q, i32q -> i8q", "rank-2 Input and Weights; int8: as "
           "FullyConnected")
      .sim("none");
}

/// Operators added for ONNX breadth, element-wise and running sums (defineIndexing has the
/// rest). Their type rules and Interpreter kernels are with their families: the
/// trigonometric functions, Mod and BitShift with Elementwise, CumSum with Reduce, the
/// gathers and scatters with Data.
void defineOnnxBreadth(Table &t) {
  auto unary = [&](const char *name, const char *doc) -> NodeDef & {
    return t.node(name).input("Input").result("Result").typeRule(TypeRule::SameAsInput)
        .dataParallelOp().describe(doc)
        .noLowering().interpreter("uniform(floats)").cpu("uniform(floats)").sim("none");
  };
  unary("Sin", "Sine (radians).").onnx({"Sin"});
  unary("Cos", "Cosine (radians).").onnx({"Cos"});
  unary("Tan", "Tangent (radians).").onnx({"Tan"});
  unary("Asin", "Arcsine; NaN outside [-1, 1].").onnx({"Asin"});
  unary("Acos", "Arccosine; NaN outside [-1, 1].").onnx({"Acos"});
  unary("Atan", "Arctangent.").onnx({"Atan"});
  unary("Sinh", "Hyperbolic sine.").onnx({"Sinh"});
  unary("Cosh", "Hyperbolic cosine.").onnx({"Cosh"});
  unary("Asinh", "Inverse hyperbolic sine.").onnx({"Asinh"});
  unary("Acosh", "Inverse hyperbolic cosine; NaN below 1.").onnx({"Acosh"});
  unary("Atanh", "Inverse hyperbolic tangent; NaN outside [-1, 1], +-inf at +-1.")
      .onnx({"Atanh"});
  t.node("Mod")
      .input("LHS").input("RHS").attr(AttrKind::Bool, "Fmod").result("Result")
      .typeRule(TypeRule::SameAsInputs).dataParallelOp()
      .describe("Remainder of LHS / RHS. With Fmod the result has the sign of LHS (C fmod; "
                "integers truncate); without, the sign of RHS (Python %; floor division). "
                "Integer x mod 0 is an error on the Interpreter and 0 on the CPU backend (as "
                "Div); float x mod 0 is NaN.")
      .noLowering()
      .onnx({"Mod"})
      .interpreter("numeric")
      .cpu("uniform(numeric)")
      .sim("none");
  t.node("BitShift")
      .input("LHS").input("RHS").attr(AttrKind::Bool, "Left").result("Result")
      .typeRule(TypeRule::SameAsInputs).dataParallelOp()
      .describe("LHS shifted left (Left) or right by RHS bits, on the unsigned bit pattern "
                "(right shifts bring in zeros); shifts of the width or more give 0, as do "
                "negative amounts.")
      .noLowering()
      .onnx({"BitShift"})
      .interpreter("uniform(index)")
      .cpu("uniform(index)")
      .sim("none");
  t.node("CumSum")
      .input("Input").attr(AttrKind::Axis, "Axis").attr(AttrKind::Bool, "Exclusive")
      .attr(AttrKind::Bool, "Reverse")
      .result("Result").typeRule(TypeRule::SameAsInput)
      .describe("Running sum along Axis: element i holds the sum of elements 0..i (Reverse: "
                "i..end); Exclusive leaves element i itself out (the first is 0). Integers "
                "wrap; floats accumulate in order in float.")
      .noLowering()
      .onnx({"CumSum"})
      .interpreter("numeric")
      .cpu("uniform(numeric)")
      .sim("none");
}

/// Indexing and sampling operators: gathers and scatters by index tensors, GridSample,
/// RoiAlign.
void defineIndexing(Table &t) {
  t.node("GatherElements")
      .input("Data").input("Indices").attr(AttrKind::Axis, "Axis").result("Result")
      .describe("Result has the shape of Indices (same rank as Data, every dim other than "
                "Axis at most Data's): result[i] = Data[i with dim Axis replaced by "
                "Indices[i]]; negative indices count from the end; an out-of-range index is "
                "an error at run time.")
      .noLowering()
      .onnx({"GatherElements", "NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"})
      .interpreter("all, index")
      .cpu("all, index -> =", "Data rank at most 16")
      .sim("none");
  t.node("ScatterElements")
      .input("Data").input("Indices").input("Updates").attr(AttrKind::Axis, "Axis")
      .attr(AttrKind::String, "Reduction")
      .result("Result")
      .describe("A copy of Data where, for every index i of Indices (Updates has its shape), "
                "element (i with dim Axis replaced by Indices[i]) becomes Updates[i] "
                "(Reduction none; the last write wins), or is combined with it (add, mul, "
                "max, min) in row-major order of i.")
      .noLowering()
      .onnx({"ScatterElements", "Scatter"})
      .interpreter("plain, index, =")
      .cpu("plain, index, =", "Data rank at most 16; Reduction add, mul, max or min not on 16-bit floats")
      .sim("none");
  t.node("ScatterND")
      .input("Data").input("Indices").input("Updates").attr(AttrKind::String, "Reduction")
      .result("Result")
      .describe("A copy of Data where the slice Data[Indices[j]] (Indices [..., k], each row a "
                "k-prefix index) is replaced by (or, with Reduction add / mul / max / min, "
                "combined with) Updates[j]; Updates has shape Indices.dims[:-1] + "
                "Data.dims[k:].")
      .noLowering()
      .onnx({"ScatterND"})
      .interpreter("plain, index, =")
      .cpu("plain, index, =", "Reduction add, mul, max or min not on 16-bit floats")
      .sim("none");
  t.node("GatherND")
      .input("Data").input("Indices").attr(AttrKind::Dim, "BatchDims").result("Result")
      .describe("Gathers slices of Data by index tuples: Indices [b..., m..., k] (the first "
                "BatchDims dims shared with Data) picks Data[b..., idx] for each tuple idx of "
                "k entries; result dims: Indices.dims[:-1] + Data.dims[BatchDims + k:].")
      .noLowering()
      .onnx({"GatherND"})
      .interpreter("all, index")
      .cpu("all, index -> =")
      .sim("none");
  t.node("GridSample")
      .input("Input").input("Grid")
      .attr(AttrKind::String, "Mode").attr(AttrKind::String, "PaddingMode")
      .attr(AttrKind::Bool, "AlignCorners")
      .result("Result")
      .describe("Samples Input [N,C,H,W] at the points of Grid [N,oH,oW,2] ((x, y) in [-1, 1]: "
                "-1 and 1 are the outer pixels' centres with AlignCorners, their outer edges "
                "without) -> [N,C,oH,oW], as PyTorch's grid_sample: Mode bilinear, nearest "
                "(halves to even) or bicubic (A = -0.75); PaddingMode zeros, border or "
                "reflection for points outside.")
      .noLowering()
      .onnx({"GridSample"})
      .interpreter("uniform(floats)")
      .cpu("uniform(floats)")
      .sim("none");
  t.node("RoiAlign")
      .input("Input").input("Rois").input("BatchIndices")
      .attr(AttrKind::String, "Mode").attr(AttrKind::Dim, "OutputHeight")
      .attr(AttrKind::Dim, "OutputWidth").attr(AttrKind::Dim, "SamplingRatio")
      .attr(AttrKind::Float, "SpatialScale").attr(AttrKind::Bool, "HalfPixel")
      .result("Result")
      .describe("For each region r of Rois [R,4] (x1, y1, x2, y2, scaled by SpatialScale, "
                "less 0.5 with HalfPixel) of image BatchIndices[r] of Input [N,C,H,W]: "
                "[R,C,OutputHeight,OutputWidth] bins, each the average (Mode avg) or maximum "
                "(max) of SamplingRatio^2 bilinear samples (0: ceil(bin size) per axis), "
                "as ONNX RoiAlign.")
      .noLowering()
      .onnx({"RoiAlign"})
      .interpreter("floats, =, index -> =")
      .cpu("floats, =, index -> =")
      .sim("none");
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
  defineFillsAndCasts(t);
  defineQuantization(t);
  defineLoweringTargets(t);
  defineOnnxBreadth(t);
  defineIndexing(t);
  defineIRInstructions(t);
}

} // namespace kiln::classgen
