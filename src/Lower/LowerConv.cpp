// Convolution with Group > 1 -> one Convolution per group on channel Slices of the input,
// filter and bias, joined by a Concat on the channel axis. Only for backends that ask
// (depthwise kernels usually beat Group separate convolutions).

#include "LowerUtil.h"

namespace kiln::lower {

NodeValue lowerGroupedConvolution(Function *f, ConvolutionNode *n) {
  dim_t groups = n->getGroup();
  if (groups <= 1)
    return NodeValue();
  Builder b(f, n);
  const Dims &in = n->getInput().dims();
  const Dims &w = n->getFilter().dims();
  const Type &out = *n->getResultType();
  dim_t cg = in[1] / groups, og = w[0] / groups;
  TypeRef partTy =
      f->getParent()->uniqueType(Type::withDims(out, {out.dims[0], og, out.dims[2], out.dims[3]}));
  std::vector<NodeValue> parts;
  for (dim_t g = 0; g < groups; g++) {
    std::string s = std::to_string(g);
    NodeValue x = f->createSlice(b.name("input") + s, n->getInput(), {0, g * cg, 0, 0},
                                 {in[0], (g + 1) * cg, in[2], in[3]});
    NodeValue fw = f->createSlice(b.name("filter") + s, n->getFilter(), {g * og, 0, 0, 0},
                                  {(g + 1) * og, w[1], w[2], w[3]});
    NodeValue fb = f->createSlice(b.name("bias") + s, n->getBias(), {g * og}, {(g + 1) * og});
    parts.push_back(f->createConvolution(b.name("group") + s, partTy, x, fw, fb, n->getKernels(),
                                         n->getStrides(), n->getPads(), n->getDilations(), 1));
  }
  return f->createConcat(b.name("concat"), parts, 1);
}

} // namespace kiln::lower
