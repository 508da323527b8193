#include "PassTestUtils.h"

#include <algorithm>

namespace kiln::test {

Function *optimizedCopy(Function *f, const std::string &passes, const Backend *backend) {
  Function *g = f->clone(f->getName() + "_opt");
  Expected<Pipeline> p = parsePassList(passes);
  EXPECT_TRUE(bool(p)) << p.getError().message();
  if (!p)
    return g;
  Expected<PipelineReport> r = runPipeline(g, *p, backend);
  EXPECT_TRUE(bool(r)) << r.getError().message();
  return g;
}

void expectSameNumbers(Function *before, Function *after, float atol, float rtol, uint64_t seed) {
  Module &m = *before->getParent();
  std::unique_ptr<Backend> interp = exitOnError(createBackend("Interpreter"));
  auto cb = interp->compile(before, CompileOptions());
  ASSERT_TRUE(bool(cb)) << cb.getError().message();
  auto ca = interp->compile(after, CompileOptions());
  ASSERT_TRUE(bool(ca)) << ca.getError().message();
  std::vector<Placeholder *> outs;
  for (SaveNode *s : before->getSaves())
    outs.push_back(s->getPlaceholder());
  PlaceholderBindings b;
  b.allocate(m.getPlaceholders());
  PseudoRNG rng(seed);
  for (const auto &ph : m.getPlaceholders())
    if (!std::count(outs.begin(), outs.end(), ph.get()))
      b.get(ph.get())->randomize(-1, 1, rng);
  ExecutionContext ctx(&b);
  ASSERT_FALSE(bool((*cb)->execute(ctx)));
  std::vector<Tensor> want;
  for (Placeholder *ph : outs)
    want.push_back(b.get(ph)->clone());
  for (Placeholder *ph : outs)
    b.get(ph)->zero();
  ASSERT_FALSE(bool((*ca)->execute(ctx)));
  for (size_t i = 0; i < outs.size(); i++)
    EXPECT_TRUE(b.get(outs[i])->isEqual(want[i], atol, rtol))
        << "output '" << outs[i]->getName() << "': max |diff| "
        << b.get(outs[i])->maxAbsDiff(want[i]);
}

unsigned countKind(const Function *f, NodeKind k) {
  unsigned n = 0;
  for (const auto &p : f->getNodes())
    n += p->getKind() == k;
  return n;
}

Constant *randomConstant(Module &m, const std::string &name, Dims dims, float lo, float hi,
                         uint64_t seed) {
  Tensor t(ElemKind::Float, dims);
  PseudoRNG rng(seed);
  t.randomize(lo, hi, rng);
  return m.createConstant(name, std::move(t));
}

} // namespace kiln::test
