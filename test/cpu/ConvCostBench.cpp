// Every applicable convolution kernel timed on each layer of a list drawn from the corpus
// and the sweep networks: the measurements the cost model of codegen/ConvCost.h is
// calibrated on and test/cpu:conv_cost_test checks its ranking against
// (test/cpu/conv_times.tsv). Each layer (batch 1, bias + Relu fused) is compiled once per
// kernel that can compute it under the default accuracy rule (Winograd F(4x4) only from
// cpu::kWino4MinChannels input channels), forced with CodegenOptions::forceConv, and the
// builds are timed in alternating rounds. Before
// each timed run a 64 MB buffer is written and then the input and output read, so that
// the weights come from memory and the activations from the caches, as in a network whose
// weights do not fit the caches (--warm: neither).
// Prints one tab-separated line per (layer, threads, kernel): the table's format.
//
//   bazel run -c opt //test/cpu:conv_cost_bench -- [--threads 1,2] [--rounds 3]
//       [--iters 5] [--no-avx512] [--only NAME,...] [--warm]
#include "test/cpu/ConvBenchBuild.h"

#include "backends/CPU/CPUBackend.h"
#include "backends/CPU/ThreadPool.h"
#include "backends/CPU/codegen/Codegen.h"
#include "kiln/Backend/Compiler.h"
#include "kiln/kiln.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <sstream>

namespace {

using namespace kiln;
using Clock = std::chrono::steady_clock;
volatile float sink; // keeps the cache-warming reads

/// A layer: C -> O channels on an H x W image, KH x KW kernel, stride S, pads PH/PW on each
/// side, G groups.
struct Layer {
  const char *name;
  int64_t C, O, H, W, KH, KW, S, PH, PW, G;
  int64_t D = 1; ///< dilation
};

/// "Same" padding for odd kernels.
Layer L(const char *name, int64_t C, int64_t O, int64_t H, int64_t k, int64_t s = 1,
        int64_t g = 1) {
  return {name, C, O, H, H, k, k, s, k / 2, k / 2, g};
}

std::vector<Layer> defaultLayers() {
  return {
      // resnet50 (corpus)
      L("resnet50.stem", 3, 64, 224, 7, 2),
      L("resnet50.3x3.56", 64, 64, 56, 3),
      L("resnet50.3x3.28", 128, 128, 28, 3),
      L("resnet50.3x3.14", 256, 256, 14, 3),
      L("resnet50.3x3.7", 512, 512, 7, 3),
      L("resnet50.3x3s2.56", 128, 128, 56, 3, 2),
      L("resnet50.3x3s2.28", 256, 256, 28, 3, 2),
      L("resnet50.3x3s2.14", 512, 512, 14, 3, 2),
      L("resnet50.1x1.256-64.56", 256, 64, 56, 1),
      L("resnet50.1x1.64-256.56", 64, 256, 56, 1),
      L("resnet50.1x1.512-128.28", 512, 128, 28, 1),
      L("resnet50.1x1.1024-256.14", 1024, 256, 14, 1),
      L("resnet50.1x1.256-1024.14", 256, 1024, 14, 1),
      L("resnet50.1x1.2048-512.7", 2048, 512, 7, 1),
      L("resnet50.1x1.512-2048.7", 512, 2048, 7, 1),
      L("resnet50.1x1s2.512-1024.28", 512, 1024, 28, 1, 2),
      L("resnet50.1x1s2.1024-2048.14", 1024, 2048, 14, 1, 2),
      // vgg16_bn / vgg19 (corpus, sweep)
      L("vgg.3x3.3-64.224", 3, 64, 224, 3),
      L("vgg.3x3.64-64.224", 64, 64, 224, 3),
      L("vgg.3x3.128-128.112", 128, 128, 112, 3),
      L("vgg.3x3.256-256.56", 256, 256, 56, 3),
      L("vgg.3x3.512-512.28", 512, 512, 28, 3),
      L("vgg.3x3.512-512.14", 512, 512, 14, 3),
      // squeezenet1_1 (corpus)
      L("squeezenet.stem", 3, 64, 224, 3, 2),
      L("squeezenet.3x3.16-64.55", 16, 64, 55, 3),
      L("squeezenet.3x3.48-192.13", 48, 192, 13, 3),
      L("squeezenet.1x1.384-64.13", 384, 64, 13, 1),
      L("squeezenet.1x1.512-1000.13", 512, 1000, 13, 1),
      // mobilenet_v2 (corpus), mnasnet1_0 and efficientnet_b0 (sweep): pointwise
      L("mobilenet.1x1.16-96.112", 16, 96, 112, 1),
      L("mobilenet.1x1.144-24.56", 144, 24, 56, 1),
      L("mobilenet.1x1.32-192.28", 32, 192, 28, 1),
      L("mobilenet.1x1.384-64.14", 384, 64, 14, 1),
      L("mobilenet.1x1.960-160.7", 960, 160, 7, 1),
      L("mobilenet.1x1.320-1280.7", 320, 1280, 7, 1),
      L("mnasnet.1x1.32-16.112", 32, 16, 112, 1),
      L("mnasnet.1x1.24-72.56", 24, 72, 56, 1),
      L("mnasnet.1x1.40-120.28", 40, 120, 28, 1),
      L("mnasnet.1x1.480-80.14", 480, 80, 14, 1),
      L("mnasnet.1x1.96-576.14", 96, 576, 14, 1),
      L("mnasnet.1x1.192-1152.7", 192, 1152, 7, 1),
      L("mnasnet.1x1.1152-320.7", 1152, 320, 7, 1),
      L("mnasnet.1x1.16-48.112", 16, 48, 112, 1),
      L("mnasnet.1x1.72-24.56", 72, 24, 56, 1),
      L("mnasnet.1x1.120-40.28", 120, 40, 28, 1),
      L("mnasnet.1x1.80-480.14", 80, 480, 14, 1),
      L("mnasnet.1x1.576-96.14", 576, 96, 14, 1),
      L("mnasnet.1x1.1152-192.7", 1152, 192, 7, 1),
      L("efficientnet.1x1.112-672.14", 112, 672, 14, 1),
      L("efficientnet.1x1.672-192.7", 672, 192, 7, 1),
      // depthwise (mnasnet, mobilenet)
      L("mnasnet.dw3.32.112", 32, 32, 112, 3, 1, 32),
      L("mnasnet.dw5s2.240.28", 240, 240, 28, 5, 2, 240),
      L("mobilenet.dw3.960.7", 960, 960, 7, 3, 1, 960),
      // resnext50_32x4d (sweep): pointwise and grouped
      L("resnext.1x1.64-128.56", 64, 128, 56, 1),
      L("resnext.1x1.256-128.56", 256, 128, 56, 1),
      L("resnext.1x1.128-256.56", 128, 256, 56, 1),
      L("resnext.1x1.512-256.28", 512, 256, 28, 1),
      L("resnext.1x1.256-512.28", 256, 512, 28, 1),
      L("resnext.1x1.1024-512.14", 1024, 512, 14, 1),
      L("resnext.1x1s2.256-512.56", 256, 512, 56, 1, 2),
      L("resnext.1x1.256-256.56", 256, 256, 56, 1),
      L("resnext.1x1.512-512.28", 512, 512, 28, 1),
      L("resnext.1x1.512-1024.14", 512, 1024, 14, 1),
      L("resnext.1x1.1024-1024.14", 1024, 1024, 14, 1),
      L("resnext.1x1.1024-2048.7", 1024, 2048, 7, 1),
      L("resnext.1x1.2048-1024.7", 2048, 1024, 7, 1),
      L("resnext.g32.128.56", 128, 128, 56, 3, 1, 32),
      L("resnext.g32.256.28", 256, 256, 28, 3, 1, 32),
      L("resnext.g32s2.512.28", 512, 512, 28, 3, 2, 32),
      L("resnext.g32s2.256.56", 256, 256, 56, 3, 2, 32),
      L("resnext.g32.512.14", 512, 512, 14, 3, 1, 32),
      L("resnext.g32.1024.7", 1024, 1024, 7, 3, 1, 32),
      L("resnext.g32s2.1024.14", 1024, 1024, 14, 3, 2, 32),
      // regnet_x_400mf (sweep): pointwise and grouped
      L("regnet.stem", 3, 32, 224, 3, 2),
      L("regnet.1x1.32-32.112", 32, 32, 112, 1),
      L("regnet.1x1s2.32-64.56", 32, 64, 56, 1, 2),
      L("regnet.1x1.64-160.28", 64, 160, 28, 1),
      L("regnet.1x1.160-160.14", 160, 160, 14, 1),
      L("regnet.1x1.160-400.14", 160, 400, 14, 1),
      L("regnet.1x1.400-400.7", 400, 400, 7, 1),
      L("regnet.g2s2.32.112", 32, 32, 112, 3, 2, 2),
      L("regnet.g4s2.64.56", 64, 64, 56, 3, 2, 4),
      L("regnet.g10s2.160.28", 160, 160, 28, 3, 2, 10),
      L("regnet.g25s2.400.14", 400, 400, 14, 3, 2, 25),
      L("regnet.1x1.64-64.28", 64, 64, 28, 1),
      L("regnet.g4.64.28", 64, 64, 28, 3, 1, 4),
      L("regnet.g10.160.14", 160, 160, 14, 3, 1, 10),
      L("regnet.g25.400.7", 400, 400, 7, 3, 1, 25),
      // inception_v3 (sweep): valid 3x3, 5x5, 1x7 / 7x1, 8x8 head
      {"inception.3x3v.32-32.147", 32, 32, 147, 147, 3, 3, 1, 0, 0, 1},
      {"inception.3x3v.80-192.73", 80, 192, 73, 73, 3, 3, 1, 0, 0, 1},
      L("inception.5x5.48-64.35", 48, 64, 35, 5),
      L("inception.3x3.64-96.35", 64, 96, 35, 3),
      {"inception.3x3s2v.288-384.35", 288, 384, 35, 35, 3, 3, 2, 0, 0, 1},
      {"inception.1x7.128-128.17", 128, 128, 17, 17, 1, 7, 1, 0, 3, 1},
      {"inception.7x1.160-192.17", 160, 192, 17, 17, 7, 1, 1, 3, 0, 1},
      L("inception.1x1.768-192.17", 768, 192, 17, 1),
      L("inception.1x1.2048-320.8", 2048, 320, 8, 1),
      L("inception.3x3.448-384.8", 448, 384, 8, 3),
      // fcn_resnet50 (sweep): the dilated 3x3 layers and the head's 1x1 input
      {"fcn.3x3d2.256-256.28", 256, 256, 28, 28, 3, 3, 1, 2, 2, 1, 2},
      {"fcn.3x3d4.512-512.28", 512, 512, 28, 28, 3, 3, 1, 4, 4, 1, 4},
      L("fcn.1x1.2048-512.28", 2048, 512, 28, 1),
      // inception_v3's 8x8 1x3 / 3x1 and its strided 17x17 layers
      {"inception.1x3.384-384.8", 384, 384, 8, 8, 1, 3, 1, 0, 1, 1},
      {"inception.3x1.384-384.8", 384, 384, 8, 8, 3, 1, 1, 1, 0, 1},
      {"inception.3x3s2v.192-320.17", 192, 320, 17, 17, 3, 3, 2, 0, 0, 1},
      // googlenet and efficientnet_v2_s: few channels, and the squeeze-and-excitation
      // FCs as 1x1 convolutions of 1x1 images
      L("googlenet.3x3.16-32.28", 16, 32, 28, 3),
      L("googlenet.3x3.16-48.14", 16, 48, 14, 3),
      L("googlenet.3x3.160-320.7", 160, 320, 7, 3),
      L("googlenet.3x3.48-128.7", 48, 128, 7, 3),
      L("effv2.3x3.24-24.112", 24, 24, 112, 3),
      L("effv2.se.960-40.1", 960, 40, 1, 1),
      L("effb0.se.1152-48.1", 1152, 48, 1, 1),
      // alexnet (corpus)
      L("alexnet.5x5.64-192.27", 64, 192, 27, 5),
      L("alexnet.3x3.384-256.13", 384, 256, 13, 3),
  };
}

using Built = bench::BuiltConv;
using bench::split;

Built build(Function *F, cpu::ConvAlgorithm a, unsigned threads, bool noAvx512) {
  cpu::CodegenOptions co;
  co.threads = threads;
  co.forceConv = a;
  co.jit.disableAvx512 = noAvx512;
  return bench::buildConv(F, co);
}

cpu::ConvShape shapeOf(const Layer &l) {
  cpu::ConvShape s;
  s.N = 1, s.C = l.C, s.H = l.H, s.W = l.W, s.O = l.O;
  s.KH = l.KH, s.KW = l.KW, s.SH = s.SW = l.S, s.PT = l.PH, s.PL = l.PW;
  s.DH = s.DW = l.D;
  s.OH = (l.H + 2 * l.PH - l.D * (l.KH - 1) - 1) / l.S + 1;
  s.OW = (l.W + 2 * l.PW - l.D * (l.KW - 1) - 1) / l.S + 1;
  s.group = l.G;
  return s;
}

} // namespace

int main(int argc, char **argv) {
  std::vector<Layer> layers = defaultLayers();
  std::vector<unsigned> threads = {1};
  int rounds = 3, iters = 5;
  bool noAvx512 = false, warm = false;
  std::vector<std::string> only;
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
    else if (a == "--warm")
      warm = true;
    else if (a == "--only")
      only = split(next(), ',');
    else {
      std::cerr << "unknown argument " << a << "\n";
      return 2;
    }
  }
  const cpu::ConvAlgorithm candidates[] = {
      cpu::ConvAlgorithm::Depthwise,     cpu::ConvAlgorithm::Grouped,
      cpu::ConvAlgorithm::WinogradRows2, cpu::ConvAlgorithm::WinogradRows4,
      cpu::ConvAlgorithm::Winograd,      cpu::ConvAlgorithm::Transposed,
      cpu::ConvAlgorithm::Strip,         cpu::ConvAlgorithm::PackedGemm};
  std::vector<char> flush(64 << 20);
  std::printf("# layer\tN\tC\tH\tW\tO\tOH\tOW\tKH\tKW\tSH\tSW\tPT\tPL\tgroup\tisa\tthreads\t"
              "kernel\tmin_ms\tmedian_ms\tdilation\n");
  for (const Layer &l : layers) {
    if (!only.empty() && std::find(only.begin(), only.end(), l.name) == only.end())
      continue;
    cpu::ConvShape s = shapeOf(l);
    for (unsigned th : threads) {
      Module m;
      Function *F = m.createFunction("main");
      auto *x = m.createPlaceholder(ElemKind::Float, {1, dim_t(l.C), dim_t(l.H), dim_t(l.W)}, "x");
      PseudoRNG rng(7);
      Tensor wt(ElemKind::Float, {dim_t(l.O), dim_t(l.C / l.G), dim_t(l.KH), dim_t(l.KW)}),
          bt(ElemKind::Float, {dim_t(l.O)});
      wt.randomize(-0.1f, 0.1f, rng);
      bt.randomize(-0.1f, 0.1f, rng);
      auto *w = m.createConstant("w", std::move(wt));
      auto *b = m.createConstant("b", std::move(bt));
      auto *c = F->createConvolution("c", x, w, b, {dim_t(l.KH), dim_t(l.KW)},
                                     {dim_t(l.S), dim_t(l.S)},
                                     {dim_t(l.PH), dim_t(l.PW), dim_t(l.PH), dim_t(l.PW)},
                                     {dim_t(l.D), dim_t(l.D)}, unsigned(l.G));
      auto *y = F->createSave("y", F->createRelu("r", c))->getPlaceholder();
      std::vector<cpu::ConvAlgorithm> algs;
      std::vector<Built> built;
      for (cpu::ConvAlgorithm a : candidates) {
        bool f4 = a == cpu::ConvAlgorithm::WinogradRows4 || a == cpu::ConvAlgorithm::Winograd;
        if (!cpu::convAlgorithmApplies(a, s) || (f4 && s.C < cpu::kWino4MinChannels))
          continue;
        // Each build prepares its own copy of the function (forced kernels differ).
        Function *G = F->clone(std::string("f_") + cpu::convAlgorithmName(a));
        built.push_back(build(G, a, th, noAvx512));
        if (built.back().kernel != cpu::convAlgorithmName(a)) {
          std::cerr << l.name << ": forced " << cpu::convAlgorithmName(a) << " built "
                    << built.back().kernel << "\n";
          return 1;
        }
        algs.push_back(a);
      }
      PlaceholderBindings bind;
      bind.allocate(m.getPlaceholders());
      bind.get(x)->randomize(-1, 1, rng);
      ExecutionContext ctx(&bind);
      std::vector<std::vector<double>> t(algs.size());
      for (int r = 0; r < rounds; r++) {
        for (size_t v = 0; v < algs.size(); v++) {
          cpu::CPUFunction &f = *built[v].fn;
          exitOnError(f.execute(ctx), "run"); // code and scratch paged in
          for (int i = 0; i < iters; i++) {
            if (!warm) {
              // The weights from memory, the activations from the caches (a network's
              // weights do not fit them; its layer reads what the one before wrote).
              std::memset(flush.data(), r + i, flush.size());
              for (Tensor *t : {bind.get(x), bind.get(y)}) {
                const float *v = reinterpret_cast<const float *>(t->getUnsafePtr());
                float acc = 0;
                for (size_t e = 0, n = t->size(); e < n; e += 16)
                  acc += v[e];
                sink += acc;
              }
            }
            auto st = Clock::now();
            exitOnError(f.execute(ctx), "run");
            t[v].push_back(std::chrono::duration<double, std::milli>(Clock::now() - st).count());
          }
        }
      }
      for (size_t v = 0; v < algs.size(); v++) {
        std::sort(t[v].begin(), t[v].end());
        std::printf("%s\t1\t%ld\t%ld\t%ld\t%ld\t%ld\t%ld\t%ld\t%ld\t%ld\t%ld\t%ld\t%ld\t%ld\t%s\t%u\t"
                    "%s\t%.4f\t%.4f\t%ld\n",
                    l.name, long(s.C), long(s.H), long(s.W), long(s.O), long(s.OH), long(s.OW),
                    long(s.KH), long(s.KW), long(s.SH), long(s.SW), long(s.PT), long(s.PL),
                    long(s.group), noAvx512 ? "avx2" : "avx512", th,
                    cpu::convAlgorithmName(algs[v]), t[v].front(), t[v][t[v].size() / 2],
                    long(l.D));
      }
      std::fflush(stdout);
    }
  }
  return 0;
}
