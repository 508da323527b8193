#include "kiln/Backend/Backend.h"

#include "src/ClassGen/OpTable.h"

#include <map>
#include <mutex>
#include <sstream>

namespace kiln {

namespace {
struct Registry {
  std::mutex mu;
  std::map<std::string, BackendFactory> factories;
};
Registry &registry() {
  static Registry r;
  return r;
}
} // namespace

void registerBackend(const std::string &name, BackendFactory factory) {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  r.factories[name] = std::move(factory);
}

Expected<std::unique_ptr<Backend>> createBackend(const std::string &name) {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.factories.find(name);
  if (it == r.factories.end()) {
    std::ostringstream os;
    os << "no backend named '" << name << "'; registered:";
    for (const auto &f : r.factories)
      os << " " << f.first;
    return Error(ErrorCode::NotFound, os.str());
  }
  return it->second();
}

std::vector<std::string> getRegisteredBackends() {
  Registry &r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<std::string> names;
  for (const auto &f : r.factories)
    names.push_back(f.first);
  return names;
}

double Backend::estimateNodeSeconds(const Node &n) const {
  if (n.getNumResults() == 0 || isa<ReshapeNode>(&n))
    return 0;
  uint64_t out = n.getType(0)->numElements(), work = out;
  if (auto *c = dyn_cast<ConvolutionNode>(&n)) {
    const Dims &f = c->getFilter().dims(); // [outC, C / group, kH, kW]
    work = out * f[1] * f[2] * f[3];
  } else if (auto *fc = dyn_cast<FullyConnectedNode>(&n)) {
    work = out * fc->getWeights().dims()[0];
  } else if (auto *mm = dyn_cast<MatMulNode>(&n)) {
    const Dims &l = mm->getLHS().dims();
    work = out * l[l.size() - 1];
  } else if (auto *bmm = dyn_cast<BatchMatMulNode>(&n)) {
    const Dims &l = bmm->getLHS().dims();
    work = out * l[l.size() - 1];
  }
  return double(work) * 1e-9;
}

bool Backend::isOpSupported(const Node &node) const {
  return optable::kindsSupported(node, getName());
}

Error Backend::checkAllNodesSupported(const Function &f) const {
  std::ostringstream os;
  unsigned bad = 0;
  for (const auto &n : f.getNodes()) {
    if (isOpSupported(*n))
      continue;
    std::string types;
    for (unsigned r = 0; r < n->getNumResults(); r++)
      types += (r ? ", " : "") + n->getType(r)->toString();
    os << (bad++ ? "; " : "") << n->describe() << (types.empty() ? "" : " -> ") << types;
  }
  if (!bad)
    return Error::success();
  return makeError(ErrorCode::Unsupported, "backend ", getName(), " does not support ", bad,
                   " node(s) of function '", f.getName(), "': ", os.str());
}


} // namespace kiln
