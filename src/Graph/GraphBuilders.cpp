// Convenience builders on top of the generated ones: layers that create their own weights,
// and shape helpers.

#include "kiln/Graph/Graph.h"

#include <cmath>

namespace kiln {

SaveNode *Function::createSave(const std::string &name, NodeValue v) {
  TypeRef ty = v.node ? v.getType() : parent_->uniqueType(ElemKind::Float, {});
  Placeholder *ph = parent_->createPlaceholder(ty, name);
  return createSave(name, v, NodeValue(ph));
}

FullyConnectedNode *Function::createFullyConnected(const std::string &name, NodeValue input,
                                                   dim_t outDepth, uint64_t seed) {
  NodeValue in = input;
  if (in.node && in.dims().size() > 2)
    in = createFlatten(name + ".flatten", in, 1);
  dim_t k = in.node && in.dims().size() == 2 ? in.dims()[1] : 1;
  ElemKind kind = in.node ? in.getElementType() : ElemKind::Float;
  Tensor w(kind, {k, outDepth});
  PseudoRNG rng(seed ? seed : std::hash<std::string>()(name));
  float bound = 1.0f / std::sqrt(float(k));
  w.randomize(-bound, bound, rng);
  Constant *wc = parent_->createConstant(name + ".weights", std::move(w));
  Constant *bc = parent_->createConstant(kind, {outDepth}, name + ".bias");
  return createFullyConnected(name, in, NodeValue(wc), NodeValue(bc));
}

ConvolutionNode *Function::createConv(const std::string &name, NodeValue input, dim_t outChannels,
                                      dim_t kernel, dim_t stride, dim_t pad, dim_t group,
                                      dim_t dilation, uint64_t seed) {
  dim_t c = input.node && input.dims().size() == 4 ? input.dims()[1] : 1;
  dim_t cPerGroup = group ? c / group : c;
  ElemKind kind = input.node ? input.getElementType() : ElemKind::Float;
  Tensor w(kind, {outChannels, cPerGroup, kernel, kernel});
  PseudoRNG rng(seed ? seed : std::hash<std::string>()(name));
  float bound = 1.0f / std::sqrt(float(std::max<dim_t>(1, cPerGroup * kernel * kernel)));
  w.randomize(-bound, bound, rng);
  Constant *wc = parent_->createConstant(name + ".filter", std::move(w));
  Constant *bc = parent_->createConstant(kind, {outChannels}, name + ".bias");
  return createConvolution(name, input, NodeValue(wc), NodeValue(bc), {kernel, kernel},
                           {stride, stride}, {pad, pad, pad, pad}, {dilation, dilation}, group);
}

AdaptiveAvgPoolNode *Function::createGlobalAvgPool(const std::string &name, NodeValue input) {
  return createAdaptiveAvgPool(name, input, {1, 1});
}

ReshapeNode *Function::createFlatten(const std::string &name, NodeValue input, int64_t axis) {
  if (!input.node)
    return createReshape(name, input, {});
  const Dims &d = input.dims();
  int64_t rank = int64_t(d.size());
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a > rank) {
    recordError(makeError(ErrorCode::InvalidArgument, "Flatten '", name, "': axis ", axis,
                          " is out of range for input ", input.getType()->toString()));
    a = 1;
  }
  dim_t outer = 1, inner = 1;
  for (int64_t i = 0; i < rank; i++)
    (i < a ? outer : inner) *= d[i];
  return createReshape(name, input, {outer, inner});
}

NodeValue Function::createBroadcastTo(const std::string &name, NodeValue v, const Dims &dims) {
  if (v.node && v.dims() == dims)
    return v;
  return createBroadcast(name, v, dims.vec());
}

} // namespace kiln

namespace kiln {

Placeholder *SaveNode::getPlaceholder() const {
  return dyn_cast<Placeholder>(getOutput().node);
}

} // namespace kiln
