#include "RuntimeTestUtils.h"

#include <gtest/gtest.h>

namespace kiln::test {

Net buildMLP(Module &m, const std::string &name, unsigned layers, dim_t width) {
  Net n;
  n.f = m.createFunction(name);
  n.input = m.createPlaceholder(ElemKind::Float, {1, width}, name + ".x");
  NodeValue v = NodeValue(n.input);
  for (unsigned i = 0; i < layers; i++) {
    std::string l = name + ".fc" + std::to_string(i);
    v = n.f->createRelu(l + ".relu", n.f->createFullyConnected(l, v, width, 100 + i));
  }
  n.outputs.push_back(n.f->createSave(name + ".y", v)->getPlaceholder());
  return n;
}

Net buildMixed(Module &m, const std::string &name) {
  Net n;
  Function *f = n.f = m.createFunction(name);
  n.input = m.createPlaceholder(ElemKind::Float, {2, 3, 8, 8}, name + ".x");
  auto *c1 = f->createConv(name + ".conv1", n.input, 4, 3, 1, 1, 1, 1, 11);
  auto *r1 = f->createRelu(name + ".relu1", c1);
  auto *s1 = f->createSigmoid(name + ".sig", r1); // host
  auto *c2 = f->createConv(name + ".conv2", s1, 4, 3, 1, 1, 1, 1, 12);
  auto *a = f->createAdd(name + ".add", c2, r1);
  auto *cat = f->createConcat(name + ".cat", {NodeValue(a), NodeValue(c1)}, 1);
  auto *mp = f->createMaxPool(name + ".pool", cat, {2, 2}, {2, 2}, {0, 0, 0, 0});
  auto *ap = f->createAvgPool(name + ".avg", mp, {2, 2}, {1, 1}, {0, 0, 0, 0}, false);
  auto *t = f->createTanh(name + ".tanh", ap); // host
  auto *fc = f->createFullyConnected(name + ".fc", t, 10, 13);
  n.outputs.push_back(f->createSave(name + ".y", fc)->getPlaceholder());
  // int8 round trip on the Sim's quantize path.
  TypeRef qt = m.uniqueType(ElemKind::Int8Q, fc->getResult().dims(), 0.05f, 3);
  auto *q = f->createQuantize(name + ".q", qt, fc);
  auto *dq = f->createDequantize(name + ".dq", m.uniqueType(ElemKind::Float, qt->dims), q);
  n.outputs.push_back(f->createSave(name + ".yq", dq)->getPlaceholder());
  return n;
}

Tensor makeInput(const Placeholder *ph, unsigned i) {
  Tensor t(*ph->getType());
  PseudoRNG rng(1000 + i);
  t.randomize(-1.0f, 1.0f, rng);
  return t;
}

std::unique_ptr<PlaceholderBindings> makeBindings(const Net &n, const Tensor &x) {
  auto b = std::make_unique<PlaceholderBindings>();
  b->insert(n.input, x.clone());
  for (Placeholder *o : n.outputs)
    b->allocate(o);
  return b;
}

std::vector<Tensor> reference(const Net &n, const Tensor &x) {
  auto backend = exitOnError(createBackend("Interpreter"));
  auto cf = exitOnError(backend->compile(n.f, {}));
  auto b = makeBindings(n, x);
  ExecutionContext ctx(b.get());
  exitOnError(cf->execute(ctx), "reference run");
  std::vector<Tensor> out;
  for (Placeholder *o : n.outputs)
    out.push_back(b->get(o)->clone());
  return out;
}

bool sameOutputs(const Net &n, const PlaceholderBindings &b, const std::vector<Tensor> &ref,
                 std::string *why) {
  for (size_t i = 0; i < n.outputs.size(); i++) {
    const Tensor *t = b.get(n.outputs[i]);
    if (!t || !t->isEqual(ref[i])) {
      if (why)
        *why = "output '" + n.outputs[i]->getName() +
               "' differs: " + (t ? t->toString(8) : std::string("unbound")) + " vs " +
               ref[i].toString(8);
      return false;
    }
  }
  return true;
}

std::vector<DeviceConfig> simDevices(unsigned count, uint64_t memory, bool withHost) {
  std::vector<DeviceConfig> d;
  for (unsigned i = 0; i < count; i++) {
    DeviceConfig c;
    c.backendName = "Sim";
    c.memoryBytes = memory;
    d.push_back(c);
  }
  if (withHost) {
    DeviceConfig c;
    c.backendName = "Interpreter";
    d.push_back(c);
  }
  return d;
}

} // namespace kiln::test
