#include "ResNet50.h"

#include <cmath>

namespace kiln::test {

namespace {

class Builder {
public:
  Builder(Module &m, Function *f) : m_(m), f_(f) {}

  Constant *uniform(const std::string &name, Dims dims, float lo, float hi) {
    Tensor t(ElemKind::Float, dims);
    t.randomize(lo, hi, rng_);
    return m_.createConstant(name, std::move(t));
  }

  NodeValue conv(const std::string &name, NodeValue x, dim_t out, dim_t k, dim_t stride,
                 dim_t pad) {
    dim_t in = x.dims()[1];
    float bound = std::sqrt(6.0f / float(in * k * k));
    Constant *w = uniform(name + ".w", {out, in, k, k}, -bound, bound);
    Constant *b = m_.createConstant(ElemKind::Float, {out}, name + ".b");
    return f_->createConvolution(name, x, w, b, {k, k}, {stride, stride}, {pad, pad, pad, pad},
                                 {1, 1}, 1);
  }

  /// Statistics as if measured: the scale shrinks the last BN of a block (residual
  /// branches start small, as trained ResNets' do).
  NodeValue bn(const std::string &name, NodeValue x, float scaleHi = 1.2f) {
    dim_t c = x.dims()[1];
    return f_->createBatchNormalization(
        name, x, uniform(name + ".scale", {c}, 0.5f * scaleHi, scaleHi),
        uniform(name + ".bias", {c}, -0.1f, 0.1f), uniform(name + ".mean", {c}, -0.1f, 0.1f),
        uniform(name + ".var", {c}, 0.5f, 1.5f), 1e-5f, 1);
  }

  NodeValue convBnRelu(const std::string &name, NodeValue x, dim_t out, dim_t k, dim_t stride,
                       dim_t pad) {
    return f_->createRelu(name + ".relu", bn(name + ".bn", conv(name, x, out, k, stride, pad)));
  }

  NodeValue bottleneck(const std::string &name, NodeValue x, dim_t width, dim_t stride) {
    dim_t out = width * 4;
    NodeValue y = convBnRelu(name + ".conv1", x, width, 1, 1, 0);
    y = convBnRelu(name + ".conv2", y, width, 3, stride, 1);
    y = bn(name + ".bn3", conv(name + ".conv3", y, out, 1, 1, 0), 0.4f);
    NodeValue shortcut = x;
    if (stride != 1 || x.dims()[1] != out)
      shortcut = bn(name + ".down.bn", conv(name + ".down", x, out, 1, stride, 0), 0.4f);
    return f_->createRelu(name + ".relu", f_->createAdd(name + ".add", y, shortcut));
  }

  PseudoRNG rng_{2024};
  Module &m_;
  Function *f_;
};

} // namespace

Function *buildResNet50(Module &m, const std::string &name, dim_t batch, dim_t imageSize) {
  Function *f = m.createFunction(name);
  Builder b(m, f);
  Placeholder *data =
      m.createPlaceholder(ElemKind::Float, {batch, 3, imageSize, imageSize}, "data");
  NodeValue x = b.convBnRelu("conv1", data, 64, 7, 2, 3);
  x = f->createMaxPool("pool1", x, {3, 3}, {2, 2}, {1, 1, 1, 1});
  const dim_t blocks[4] = {3, 4, 6, 3};
  const dim_t widths[4] = {64, 128, 256, 512};
  for (int s = 0; s < 4; s++)
    for (dim_t i = 0; i < blocks[s]; i++)
      x = b.bottleneck("res" + std::to_string(s + 2) + char('a' + i), x, widths[s],
                       i == 0 && s > 0 ? 2 : 1);
  x = f->createGlobalAvgPool("pool5", x);
  x = f->createFlatten("flatten", x, 1);
  dim_t in = x.dims()[1];
  float bound = 1.0f / std::sqrt(float(in));
  Constant *w = b.uniform("fc1000.w", {in, 1000}, -bound, bound);
  Constant *bias = b.uniform("fc1000.b", {1000}, -0.1f, 0.1f);
  x = f->createFullyConnected("fc1000", x, w, bias);
  f->createSave("logits", x);
  x = f->createSoftMax("softmax", x, 1);
  f->createSave("prob", x);
  return f;
}

} // namespace kiln::test
