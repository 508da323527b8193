// Reductions: ReduceMean(x, axes) -> Div(ReduceSum(x, axes), Splat(count)), count being
// the number of elements reduced into each result.

#include "LowerUtil.h"

namespace kiln::lower {

NodeValue lowerReduceMean(Function *f, ReduceMeanNode *n) {
  if (!isFloatResult(n))
    return NodeValue();
  Builder b(f, n);
  const Dims &in = n->getInput().dims();
  std::vector<int64_t> axes;
  double count = 1;
  for (dim_t a : n->getAxes()) {
    axes.push_back(int64_t(a));
    count *= double(in[a]);
  }
  NodeValue sum = f->createReduceSum(b.name("sum"), n->getInput(), axes, n->getKeepDims());
  return f->createDiv(b.name("mean"), sum, b.splatLike(sum, count, "count"));
}

} // namespace kiln::lower
