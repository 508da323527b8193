// Benchmark of the CPU backend on small networks built with the C++ API (random weights,
// batch 1, BatchNorm already folded into the convolutions): compile time, median and
// minimum run time, GFLOP/s, for 1 and 2 threads. Prints one line per network and
// thread count; --check compares each output with the Interpreter once.
//
//   bazel run -c opt //test/cpu:net_bench -- [--nets resnet50,block] [--threads 1,2]
//       [--iters 20] [--check] [--dump-ir FILE] [--dump-asm FILE] [--no-avx512]
//       [--specialize]
#include "backends/CPU/CPUBackend.h"
#include "kiln/Backend/Compiler.h"
#include "kiln/kiln.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <sstream>

namespace {

using namespace kiln;
using Clock = std::chrono::steady_clock;

double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

struct Builder {
  Module &m;
  Function *F;
  uint64_t seed = 1;
  double flops = 0;

  Constant *weights(const std::string &name, Dims dims, float scale) {
    Tensor t(ElemKind::Float, dims);
    PseudoRNG rng(seed++);
    t.randomize(-scale, scale, rng);
    return m.createConstant(name, std::move(t));
  }
  NodeValue conv(const std::string &name, NodeValue in, dim_t out, dim_t k, dim_t s, dim_t p,
                 bool relu, dim_t group = 1) {
    dim_t c = in.dims()[1];
    auto *w = weights(name + ".w", {out, c / group, k, k}, std::sqrt(2.0f / float(c / group * k * k)));
    auto *b = weights(name + ".b", {out}, 0.1f);
    NodeValue r = F->createConvolution(name, in, w, b, {k, k}, {s, s}, {p, p, p, p}, {1, 1}, group);
    const Dims &od = r.dims();
    flops += 2.0 * double(od[0] * od[1] * od[2] * od[3]) * double(c / group * k * k);
    return relu ? NodeValue(F->createRelu(name + ".relu", r)) : r;
  }
  NodeValue fc(const std::string &name, NodeValue in, dim_t out) {
    dim_t k = in.dims()[1];
    auto *w = weights(name + ".w", {k, out}, std::sqrt(1.0f / float(k)));
    auto *b = weights(name + ".b", {out}, 0.1f);
    flops += 2.0 * double(in.dims()[0] * k * out);
    return F->createFullyConnected(name, in, w, b);
  }
  NodeValue bottleneck(const std::string &name, NodeValue x, dim_t mid, dim_t out, dim_t stride) {
    NodeValue h = conv(name + ".c1", x, mid, 1, 1, 0, true);
    h = conv(name + ".c2", h, mid, 3, stride, 1, true);
    h = conv(name + ".c3", h, out, 1, 1, 0, false);
    NodeValue sc = x;
    if (stride != 1 || x.dims()[1] != out)
      sc = conv(name + ".down", x, out, 1, stride, 0, false);
    return F->createRelu(name + ".relu", F->createAdd(name + ".add", h, sc));
  }
};

using NetFn = std::function<void(Builder &, Placeholder *&, NodeValue &)>;

std::map<std::string, NetFn> networks() {
  std::map<std::string, NetFn> nets;
  nets["resnet50"] = [](Builder &b, Placeholder *&x, NodeValue &y) {
    x = b.m.createPlaceholder(ElemKind::Float, {1, 3, 224, 224}, "x");
    NodeValue h = b.conv("stem", x, 64, 7, 2, 3, true);
    h = b.F->createMaxPool("pool", h, {3, 3}, {2, 2}, {1, 1, 1, 1});
    int blocks[] = {3, 4, 6, 3};
    dim_t mid = 64;
    for (int s = 0; s < 4; s++, mid *= 2)
      for (int i = 0; i < blocks[s]; i++)
        h = b.bottleneck("s" + std::to_string(s) + "b" + std::to_string(i), h, mid, mid * 4,
                         i == 0 && s > 0 ? 2 : 1);
    h = b.F->createReshape("flat", b.F->createAdaptiveAvgPool("gap", h, {1, 1}), {1, 2048});
    y = b.fc("fc", h, 1000);
  };
  // One ResNet-50 bottleneck at stage 1 size.
  nets["block"] = [](Builder &b, Placeholder *&x, NodeValue &y) {
    x = b.m.createPlaceholder(ElemKind::Float, {1, 256, 56, 56}, "x");
    y = b.bottleneck("b", x, 64, 256, 1);
  };
  // A ResNet-18 basic block at 56x56x64.
  nets["basic"] = [](Builder &b, Placeholder *&x, NodeValue &y) {
    x = b.m.createPlaceholder(ElemKind::Float, {1, 64, 56, 56}, "x");
    NodeValue h = b.conv("c1", x, 64, 3, 1, 1, true);
    h = b.conv("c2", h, 64, 3, 1, 1, false);
    y = b.F->createRelu("relu", b.F->createAdd("add", h, x));
  };
  // MobileNet-v2 inverted residual at 28x28x32 (expand 6x, depthwise 3x3, ReLU6).
  nets["mbv2block"] = [](Builder &b, Placeholder *&x, NodeValue &y) {
    x = b.m.createPlaceholder(ElemKind::Float, {1, 32, 28, 28}, "x");
    NodeValue h = b.F->createClip("e6", b.conv("expand", x, 192, 1, 1, 0, false), 0, 6);
    h = b.F->createClip("d6", b.conv("dw", h, 192, 3, 1, 1, false, 192), 0, 6);
    h = b.conv("project", h, 32, 1, 1, 0, false);
    y = b.F->createAdd("add", h, x);
  };
  nets["mlp"] = [](Builder &b, Placeholder *&x, NodeValue &y) {
    x = b.m.createPlaceholder(ElemKind::Float, {1, 784}, "x");
    NodeValue h = b.F->createRelu("r1", b.fc("fc1", x, 512));
    h = b.F->createRelu("r2", b.fc("fc2", h, 512));
    y = b.F->createSoftMax("sm", b.fc("fc3", h, 10), 1);
  };
  return nets;
}

std::vector<std::string> split(const std::string &s) {
  std::vector<std::string> r;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty())
      r.push_back(item);
  return r;
}

} // namespace

int main(int argc, char **argv) {
  std::vector<std::string> nets = {"basic", "block", "mbv2block", "mlp", "resnet50"};
  std::vector<unsigned> threads = {1, 2};
  int iters = 20;
  bool check = false, noAvx512 = false, specialize = false;
  std::string dumpIR, dumpAsm;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--nets")
      nets = split(next());
    else if (a == "--threads") {
      threads.clear();
      for (auto &t : split(next()))
        threads.push_back(unsigned(std::stoul(t)));
    } else if (a == "--iters")
      iters = std::stoi(next());
    else if (a == "--check")
      check = true;
    else if (a == "--no-avx512")
      noAvx512 = true;
    else if (a == "--specialize")
      specialize = true;
    else if (a == "--dump-ir")
      dumpIR = next();
    else if (a == "--dump-asm")
      dumpAsm = next();
    else {
      std::cerr << "unknown argument " << a << "\n";
      return 2;
    }
  }
  auto all = networks();
  for (const std::string &name : nets) {
    if (!all.count(name)) {
      std::cerr << "unknown network " << name << "\n";
      return 2;
    }
    for (unsigned th : threads) {
      Module m;
      Builder b{m, m.createFunction("main")};
      Placeholder *x = nullptr;
      NodeValue y;
      all[name](b, x, y);
      SaveNode *save = b.F->createSave("y", y);
      exitOnError(b.F->verify(), "verify");

      cpu::CPUBackendOptions o;
      o.keepIR = !dumpIR.empty();
      o.keepAsm = !dumpAsm.empty();
      o.disableAvx512 = noAvx512;
      o.specializeGemm = specialize;
      cpu::CPUBackend cpu(o);
      CompileOptions co;
      co.threads = th;
      auto t0 = Clock::now();
      auto cf = exitOnError(compileFunction(b.F, cpu, co), "compile");
      double compileMs = ms(Clock::now() - t0);
      auto *c = static_cast<cpu::CPUFunction *>(cf.get());
      if (!dumpIR.empty())
        std::ofstream(dumpIR) << c->getIR();
      if (!dumpAsm.empty())
        std::ofstream(dumpAsm) << c->getAsm();

      PlaceholderBindings bind;
      bind.allocate(m.getPlaceholders());
      Tensor *in = bind.get(x);
      PseudoRNG rng(42);
      in->randomize(-1, 1, rng);
      ExecutionContext ctx(&bind);
      exitOnError((cf)->execute(ctx), "run"); // warm-up
      std::vector<double> times;
      for (int i = 0; i < iters; i++) {
        auto s = Clock::now();
        exitOnError((cf)->execute(ctx), "run");
        times.push_back(ms(Clock::now() - s));
      }
      std::sort(times.begin(), times.end());
      double med = times[times.size() / 2];
      std::string verdict;
      if (check) {
        auto interp = exitOnError(createBackend("Interpreter"));
        auto icf = exitOnError(interp->compile(b.F, {}), "interpreter compile");
        PlaceholderBindings ib;
        ib.allocate(m.getPlaceholders());
        std::memcpy(ib.get(x)->getUnsafePtr(), in->getUnsafePtr(), in->getSizeInBytes());
        ExecutionContext ictx(&ib);
        exitOnError(icf->execute(ictx), "interpreter run");
        const Tensor &got = *bind.get(save->getPlaceholder());
        const Tensor &ref = *ib.get(save->getPlaceholder());
        double maxRef = 0, maxErr = 0;
        const float *g = reinterpret_cast<const float *>(got.getUnsafePtr());
        const float *r = reinterpret_cast<const float *>(ref.getUnsafePtr());
        bool ok = true;
        for (size_t i = 0; i < got.size(); i++)
          maxRef = std::max(maxRef, double(std::fabs(r[i])));
        for (size_t i = 0; i < got.size(); i++) {
          double err = std::fabs(double(g[i]) - r[i]);
          maxErr = std::max(maxErr, err);
          if (err > 1e-4 * maxRef + 1e-3 * std::fabs(r[i]))
            ok = false;
        }
        verdict = std::string(ok ? " match" : " MISMATCH") + " max_abs_err " + std::to_string(maxErr);
      }
      std::cout << name << " threads " << th << ": compile " << compileMs << " ms, median "
                << med << " ms, min " << times.front() << " ms, " << b.flops / 1e9
                << " GFLOP, " << b.flops / (times.front() * 1e6) << " GFLOP/s (best)"
                << verdict << "\n  " << c->getStats() << std::endl;
    }
  }
  return 0;
}
