#include "kiln/Backend/ExecutionContext.h"

namespace kiln {

Tensor *PlaceholderBindings::allocate(const Placeholder *ph) {
  auto t = std::make_unique<Tensor>(*ph->getType());
  Tensor *r = t.get();
  map_[ph] = std::move(t);
  return r;
}

void PlaceholderBindings::allocate(const std::vector<std::unique_ptr<Placeholder>> &phs) {
  for (const auto &p : phs)
    if (!map_.count(p.get()))
      allocate(p.get());
}

void PlaceholderBindings::allocate(const std::vector<Placeholder *> &phs) {
  for (Placeholder *p : phs)
    if (!map_.count(p))
      allocate(p);
}

void PlaceholderBindings::insert(const Placeholder *ph, Tensor t) {
  map_[ph] = std::make_unique<Tensor>(std::move(t));
}

Tensor *PlaceholderBindings::get(const Placeholder *ph) const {
  auto it = map_.find(ph);
  return it == map_.end() ? nullptr : it->second.get();
}

Expected<Tensor *> PlaceholderBindings::getChecked(const Placeholder *ph) const {
  Tensor *t = get(ph);
  if (!t)
    return makeError(ErrorCode::InvalidArgument, "placeholder '", ph->getName(), "' of type ",
                     ph->getType()->toString(), " is not bound to a tensor");
  if (t->getType() != *ph->getType())
    return makeError(ErrorCode::InvalidArgument, "placeholder '", ph->getName(),
                     "' expects a tensor of type ", ph->getType()->toString(), " but is bound to ",
                     t->getType().toString());
  return t;
}

Tensor *PlaceholderBindings::getByName(const std::string &name) const {
  for (const auto &p : map_)
    if (p.first->getName() == name)
      return p.second.get();
  return nullptr;
}

} // namespace kiln
