#include "Lowering.h"

namespace kiln::lower {

NodeValue Builder::splat(const Type &like, double v, const char *suffix) const {
  return f_->createSplat(name(suffix), f_->getParent()->uniqueType(like), float(v));
}

NodeValue Builder::broadcast(NodeValue v, const Dims &dims, const char *suffix) const {
  if (v.dims() == dims)
    return v;
  return f_->createBroadcast(name(suffix), v, dims.vec());
}

NodeValue Builder::alongAxis(NodeValue v, const Dims &dims, size_t axis, const char *suffix) const {
  std::vector<dim_t> shape(dims.size(), 1);
  shape[axis] = dims[axis];
  NodeValue r = v;
  if (v.dims() != Dims(shape))
    r = f_->createReshape(name(suffix) + "_shape", v, shape);
  return broadcast(r, dims, suffix);
}

} // namespace kiln::lower
