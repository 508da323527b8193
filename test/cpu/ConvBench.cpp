// Convolution benchmark of the CPU backend, one layer at a time: each 3x3 stride-1 layer
// of ResNet-50, SqueezeNet 1.1 and VGG-19 (batch 1, bias + Relu fused) compiled without
// Winograd (winograd=0), with the default F(2x2)-only Winograd (winograd=1) and with
// F(4x4) allowed (winograd=fast), timed in alternating rounds. Prints the kernel each
// build chose, min and median ms, and the ratios of the medians; the data behind the
// Winograd selection rules in codegen/EmitConv.cpp.
//
//   bazel run -c opt //test/cpu:conv_bench -- [--threads 1,2] [--rounds 5] [--iters 10]
//       [--layers 64,64,56,56;...] [--no-avx512]
#include "test/cpu/ConvBenchBuild.h"

#include "backends/CPU/CPUBackend.h"
#include "backends/CPU/ThreadPool.h"
#include "backends/CPU/codegen/Codegen.h"
#include "kiln/Backend/Compiler.h"
#include "kiln/kiln.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>

namespace {

using namespace kiln;
using Clock = std::chrono::steady_clock;

struct Layer {
  dim_t C, O, H, W;
};

using Built = bench::BuiltConv;
using bench::split;

Built build(Function *F, int mode, unsigned threads, bool noAvx512) {
  cpu::CodegenOptions co;
  co.threads = threads;
  co.winograd = mode > 0;
  co.fastWinograd = mode == 2;
  co.jit.disableAvx512 = noAvx512;
  return bench::buildConv(F, co);
}

} // namespace

int main(int argc, char **argv) {
  std::vector<Layer> layers = {// ResNet-50
                               {64, 64, 56, 56},
                               {128, 128, 28, 28},
                               {256, 256, 14, 14},
                               {512, 512, 7, 7},
                               // SqueezeNet 1.1
                               {16, 64, 55, 55},
                               {32, 128, 27, 27},
                               {48, 192, 13, 13},
                               {64, 256, 13, 13},
                               // VGG-19
                               {3, 64, 224, 224},
                               {64, 64, 224, 224},
                               {64, 128, 112, 112},
                               {128, 128, 112, 112},
                               {128, 256, 56, 56},
                               {256, 256, 56, 56},
                               {256, 512, 28, 28},
                               {512, 512, 28, 28},
                               {512, 512, 14, 14}};
  std::vector<unsigned> threads = {1, 2};
  int rounds = 5, iters = 10;
  bool noAvx512 = false;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--threads") {
      threads.clear();
      for (auto &t : split(next(), ','))
        threads.push_back(unsigned(std::stoul(t)));
    } else if (a == "--rounds")
      rounds = std::stoi(next());
    else if (a == "--iters")
      iters = std::stoi(next());
    else if (a == "--no-avx512")
      noAvx512 = true;
    else if (a == "--layers") {
      layers.clear();
      for (auto &l : split(next(), ';')) {
        auto v = split(l, ',');
        if (v.size() != 4) {
          std::cerr << "--layers wants C,O,H,W;...\n";
          return 2;
        }
        layers.push_back({std::stoul(v[0]), std::stoul(v[1]), std::stoul(v[2]), std::stoul(v[3])});
      }
    } else {
      std::cerr << "unknown argument " << a << "\n";
      return 2;
    }
  }
  std::printf("%-22s %3s  %-11s %7s %7s  %-11s %7s %7s  %-11s %7s %7s  %6s %6s\n",
              "layer C->O HxW", "thr", "0: kernel", "min ms", "med ms", "1: kernel", "min ms",
              "med ms", "fast: kernel", "min ms", "med ms", "1/0", "fast/1");
  for (const Layer &l : layers) {
    for (unsigned th : threads) {
      Module m;
      Function *F = m.createFunction("main");
      auto *x = m.createPlaceholder(ElemKind::Float, {1, l.C, l.H, l.W}, "x");
      PseudoRNG rng(7);
      Tensor wt(ElemKind::Float, {l.O, l.C, 3, 3}), bt(ElemKind::Float, {l.O});
      wt.randomize(-0.1f, 0.1f, rng);
      bt.randomize(-0.1f, 0.1f, rng);
      auto *w = m.createConstant("w", std::move(wt));
      auto *b = m.createConstant("b", std::move(bt));
      auto *c = F->createConvolution("c", x, w, b, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1);
      F->createSave("y", F->createRelu("r", c));
      Built built[3] = {build(F, 0, th, noAvx512), build(F, 1, th, noAvx512),
                        build(F, 2, th, noAvx512)};
      PlaceholderBindings bind;
      bind.allocate(m.getPlaceholders());
      bind.get(x)->randomize(-1, 1, rng);
      ExecutionContext ctx(&bind);
      std::vector<double> t[3];
      for (int r = 0; r < rounds; r++) {
        for (int v = 0; v < 3; v++) {
          cpu::CPUFunction &f = *built[v].fn;
          exitOnError(f.execute(ctx), "run"); // warm the caches for this variant
          for (int i = 0; i < iters; i++) {
            auto s = Clock::now();
            exitOnError(f.execute(ctx), "run");
            t[v].push_back(std::chrono::duration<double, std::milli>(Clock::now() - s).count());
          }
        }
      }
      double med[3];
      for (int v = 0; v < 3; v++) {
        std::sort(t[v].begin(), t[v].end());
        med[v] = t[v][t[v].size() / 2];
      }
      char name[64];
      std::snprintf(name, sizeof name, "%lu->%lu %lux%lu", (unsigned long)l.C, (unsigned long)l.O,
                    (unsigned long)l.H, (unsigned long)l.W);
      std::printf("%-22s %3u", name, th);
      for (int v = 0; v < 3; v++)
        std::printf("  %-11s %7.3f %7.3f", built[v].kernel.c_str(), t[v].front(), med[v]);
      std::printf("  %6.2f %6.2f\n", med[1] / med[0], med[2] / med[1]);
      std::fflush(stdout);
    }
  }
  return 0;
}
