#include "Networks.h"

#include <algorithm>
#include <cmath>

namespace kiln::networks {

namespace {

dim_t scaled(dim_t c, const CNNOptions &o) { return std::max<dim_t>(1, c / o.widthDivisor); }

NodeValue convRelu(Function *f, const std::string &name, NodeValue x, dim_t out, dim_t k,
                   dim_t stride, bool relu = true) {
  NodeValue c = f->createConv(name, x, out, k, stride, k / 2);
  return relu ? NodeValue(f->createRelu(name + ".relu", c)) : c;
}

NodeValue classifier(Function *f, NodeValue x, const CNNOptions &o) {
  NodeValue p = f->createGlobalAvgPool("avgpool", x);
  NodeValue fc = f->createFullyConnected("fc", p, o.numClasses);
  return f->createSoftMax("softmax", fc, 1);
}

} // namespace

Function *buildResNet50(Module &m, const CNNOptions &o) {
  Function *f = m.createFunction("resnet50");
  auto *in = m.createPlaceholder(ElemKind::Float, {o.batch, 3, o.imageSize, o.imageSize}, "input");
  NodeValue x = convRelu(f, "conv1", in, scaled(64, o), 7, 2);
  x = f->createMaxPool("pool1", x, {3, 3}, {2, 2}, {1, 1, 1, 1});
  const unsigned blocks[4] = {3, 4, 6, 3};
  dim_t width = 64;
  for (unsigned l = 0; l < 4; l++, width *= 2) {
    for (unsigned b = 0; b < blocks[l]; b++) {
      std::string n = "layer" + std::to_string(l + 1) + "." + std::to_string(b);
      dim_t stride = (b == 0 && l > 0) ? 2 : 1;
      NodeValue y = convRelu(f, n + ".conv1", x, scaled(width, o), 1, 1);
      y = convRelu(f, n + ".conv2", y, scaled(width, o), 3, stride);
      y = convRelu(f, n + ".conv3", y, scaled(width * 4, o), 1, 1, false);
      NodeValue sc = x;
      if (b == 0)
        sc = f->createConv(n + ".downsample", x, scaled(width * 4, o), 1, stride, 0);
      NodeValue sum = f->createAdd(n + ".add", y, sc);
      x = f->createRelu(n + ".relu", sum);
    }
  }
  f->createSave("probs", classifier(f, x, o));
  return f;
}

Function *buildMobileNetV2(Module &m, const CNNOptions &o) {
  Function *f = m.createFunction("mobilenetv2");
  auto *in = m.createPlaceholder(ElemKind::Float, {o.batch, 3, o.imageSize, o.imageSize}, "input");
  auto relu6 = [&](const std::string &n, NodeValue v) -> NodeValue {
    return f->createClip(n + ".relu6", v, 0.0f, 6.0f);
  };
  NodeValue x = relu6("conv0", f->createConv("conv0", in, scaled(32, o), 3, 2, 1));
  dim_t inC = scaled(32, o);
  struct Stage {
    dim_t t, c, n, s;
  };
  const Stage stages[] = {{1, 16, 1, 1},  {6, 24, 2, 2},  {6, 32, 3, 2}, {6, 64, 4, 2},
                          {6, 96, 3, 1},  {6, 160, 3, 2}, {6, 320, 1, 1}};
  unsigned idx = 0;
  for (const Stage &st : stages) {
    for (dim_t i = 0; i < st.n; i++, idx++) {
      std::string n = "block" + std::to_string(idx);
      dim_t stride = i == 0 ? st.s : 1, outC = scaled(st.c, o), hidden = inC * st.t;
      NodeValue y = x;
      if (st.t != 1)
        y = relu6(n + ".expand", f->createConv(n + ".expand", y, hidden, 1, 1, 0));
      y = relu6(n + ".dw", f->createConv(n + ".dw", y, hidden, 3, stride, 1, /*group=*/hidden));
      y = f->createConv(n + ".project", y, outC, 1, 1, 0);
      if (stride == 1 && inC == outC)
        y = f->createAdd(n + ".add", x, y);
      x = y;
      inC = outC;
    }
  }
  x = relu6("conv_last", f->createConv("conv_last", x, scaled(1280, o), 1, 1, 0));
  f->createSave("probs", classifier(f, x, o));
  return f;
}

Function *buildTransformerEncoder(Module &m, const TransformerOptions &o) {
  Function *f = m.createFunction("transformer");
  const dim_t S = o.seqLen, D = o.dModel, H = o.heads, dh = o.dModel / o.heads;
  NodeValue x = m.createPlaceholder(ElemKind::Float, {S, D}, "tokens");
  auto layerNorm = [&](const std::string &n, NodeValue v) -> NodeValue {
    Tensor one(ElemKind::Float, {D});
    for (dim_t i = 0; i < D; i++)
      one.setFromDouble(i, 1.0);
    Constant *scale = m.createConstant(n + ".scale", std::move(one));
    Constant *bias = m.createConstant(ElemKind::Float, {D}, n + ".bias");
    return f->createLayerNormalization(n, v, scale, bias, 1, 1e-5f);
  };
  for (unsigned l = 0; l < o.layers; l++) {
    std::string n = "layer" + std::to_string(l);
    auto heads = [&](const std::string &which, const std::vector<dim_t> &shuffle) -> NodeValue {
      NodeValue p = f->createFullyConnected(n + "." + which, x, D);
      NodeValue r = f->createReshape(n + "." + which + ".split", p, {S, H, dh});
      return f->createTranspose(n + "." + which + ".heads", r, shuffle);
    };
    NodeValue q = heads("q", {1, 0, 2});  // [H, S, dh]
    NodeValue kT = heads("k", {1, 2, 0}); // [H, dh, S]
    NodeValue v = heads("v", {1, 0, 2});  // [H, S, dh]
    NodeValue scores = f->createBatchMatMul(n + ".scores", q, kT);
    NodeValue probs = f->createSoftMax(n + ".probs", scores, 2);
    NodeValue ctx = f->createBatchMatMul(n + ".context", probs, v);
    NodeValue merged = f->createTranspose(n + ".merge", ctx, {1, 0, 2});
    NodeValue flat = f->createReshape(n + ".concat_heads", merged, {S, D});
    NodeValue attn = f->createFullyConnected(n + ".out_proj", flat, D);
    NodeValue x1 = layerNorm(n + ".ln1", f->createAdd(n + ".residual1", x, attn));
    NodeValue h = f->createGelu(n + ".gelu", f->createFullyConnected(n + ".ff1", x1, o.ffDim), false);
    NodeValue ff = f->createFullyConnected(n + ".ff2", h, D);
    x = layerNorm(n + ".ln2", f->createAdd(n + ".residual2", x1, ff));
  }
  f->createSave("hidden", x);
  return f;
}

std::vector<std::string> getNetworkNames() { return {"resnet50", "mobilenetv2", "transformer"}; }

Function *buildNetwork(const std::string &name, Module &m) {
  if (name == "resnet50")
    return buildResNet50(m);
  if (name == "mobilenetv2")
    return buildMobileNetV2(m);
  if (name == "transformer")
    return buildTransformerEncoder(m);
  return nullptr;
}

} // namespace kiln::networks
