// Interpreter kernels of the normalization operators: BatchNormalization,
// LayerNormalization, SoftMax and LogSoftMax. All are float-kind only; Float16 and
// BFloat16 compute in float and round once per output element.

#include "InterpreterKernels.h"

namespace kiln {

using namespace interp;

namespace {

Error axisError(const Instruction *I, const char *attr, dim_t axis, const Tensor &in) {
  return makeError(ErrorCode::InvalidArgument, I->getKindName(), " '", I->getName(),
                   "': attribute ", attr, " = ", axis, " is out of range for input ",
                   in.getType().toString());
}

/// SoftMax (\p log false) or LogSoftMax (\p log true) of \p x along the middle axis of
/// \p split, subtracting the maximum first so large inputs do not overflow.
std::vector<float> softMax(const std::vector<float> &x, const AxisSplit &split, bool log) {
  std::vector<float> y(x.size());
  for (size_t o = 0; o < split.outer; o++) {
    for (size_t i = 0; i < split.inner; i++) {
      float max = -std::numeric_limits<float>::infinity();
      for (size_t a = 0; a < split.size; a++)
        max = std::max(max, x[split.index(o, a, i)]);
      float sum = 0;
      for (size_t a = 0; a < split.size; a++)
        sum += std::exp(x[split.index(o, a, i)] - max);
      for (size_t a = 0; a < split.size; a++) {
        size_t idx = split.index(o, a, i);
        y[idx] = log ? x[idx] - max - std::log(sum) : std::exp(x[idx] - max) / sum;
      }
    }
  }
  return y;
}

/// Shared body of SoftMax and LogSoftMax instructions.
template <typename InstT> Error softMaxInst(InterpreterRun &run, const InstT *I, bool log) {
  Tensor &out = run.getTensor(I->getDest());
  const Tensor &in = run.getTensor(I->getInput());
  if (!sameFloatKind(out, in))
    return unsupportedKinds(I);
  if (I->getAxis() >= in.getType().rank() || in.size() != out.size())
    return axisError(I, "Axis", I->getAxis(), in);
  storeFloats(out, softMax(loadFloats(in), AxisSplit(in.dims(), I->getAxis()), log));
  return Error::success();
}

} // namespace

Error InterpreterRun::fwdBatchNormalization(const BatchNormalizationInst *I) {
  Tensor &out = getTensor(I->getDest());
  const Tensor &in = getTensor(I->getInput());
  const Tensor &scale = getTensor(I->getScale());
  const Tensor &bias = getTensor(I->getBias());
  const Tensor &mean = getTensor(I->getMean());
  const Tensor &var = getTensor(I->getVar());
  if (!sameFloatKind(out, in, scale, bias, mean, var))
    return unsupportedKinds(I);
  const dim_t axis = I->getChannelIdx();
  if (axis >= in.getType().rank() || in.size() != out.size())
    return axisError(I, "ChannelIdx", axis, in);
  const AxisSplit split(in.dims(), axis);
  for (const Tensor *p : {&scale, &bias, &mean, &var})
    if (p->size() != split.size)
      return makeError(ErrorCode::InvalidArgument, "BatchNormalization '", I->getName(),
                       "': parameter ", p->getType().toString(), " must have one entry per ",
                       "channel of input ", in.getType().toString());

  std::vector<float> x = loadFloats(in), y(x.size());
  std::vector<float> s = loadFloats(scale), b = loadFloats(bias);
  std::vector<float> mu = loadFloats(mean), v = loadFloats(var);
  const float eps = I->getEpsilon();
  for (size_t o = 0; o < split.outer; o++)
    for (size_t c = 0; c < split.size; c++)
      for (size_t i = 0; i < split.inner; i++) {
        size_t idx = split.index(o, c, i);
        y[idx] = (x[idx] - mu[c]) / std::sqrt(v[c] + eps) * s[c] + b[c];
      }
  storeFloats(out, y);
  return Error::success();
}

Error InterpreterRun::fwdLayerNormalization(const LayerNormalizationInst *I) {
  Tensor &out = getTensor(I->getDest());
  const Tensor &in = getTensor(I->getInput());
  const Tensor &scale = getTensor(I->getScale());
  const Tensor &bias = getTensor(I->getBias());
  if (!sameFloatKind(out, in, scale, bias))
    return unsupportedKinds(I);
  const dim_t axis = I->getAxis();
  if (axis >= in.getType().rank() || in.size() != out.size())
    return axisError(I, "Axis", axis, in);
  // Rows are the dims before Axis; each row of `cols` elements is normalized on its own.
  size_t cols = 1;
  for (size_t d = axis; d < in.getType().rank(); d++)
    cols *= in.dims()[d];
  if (scale.size() != cols || bias.size() != cols)
    return makeError(ErrorCode::InvalidArgument, "LayerNormalization '", I->getName(), "': Scale ",
                     scale.getType().toString(), " and Bias ", bias.getType().toString(),
                     " must have the trailing dims of input ", in.getType().toString());

  std::vector<float> x = loadFloats(in), y(x.size());
  std::vector<float> s = loadFloats(scale), b = loadFloats(bias);
  const float eps = I->getEpsilon();
  const size_t rows = cols ? x.size() / cols : 0;
  for (size_t row = 0; row < rows; row++) {
    const float *xr = &x[row * cols];
    float mean = 0;
    for (size_t j = 0; j < cols; j++)
      mean += xr[j];
    mean /= float(cols);
    float var = 0;
    for (size_t j = 0; j < cols; j++)
      var += (xr[j] - mean) * (xr[j] - mean);
    var /= float(cols);
    const float invStd = 1.0f / std::sqrt(var + eps);
    for (size_t j = 0; j < cols; j++)
      y[row * cols + j] = (xr[j] - mean) * invStd * s[j] + b[j];
  }
  storeFloats(out, y);
  return Error::success();
}

Error InterpreterRun::fwdSoftMax(const SoftMaxInst *I) {
  return softMaxInst(*this, I, /*log=*/false);
}

Error InterpreterRun::fwdLogSoftMax(const LogSoftMaxInst *I) {
  return softMaxInst(*this, I, /*log=*/true);
}

} // namespace kiln
