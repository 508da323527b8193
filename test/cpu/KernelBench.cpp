// Microbenchmark of the non-GEMM-bound CPU kernels at the layer shapes of small networks
// (squeezenet1_1, mobilenet_v2, resnet50 at batch 1): pooling, depthwise convolution and
// GEMM-based convolutions with few channels, JIT-compiled for this host exactly as the
// backend's shared kernels are. Prints per case the minimum and median microseconds of one
// call on one thread (or on --threads N spinning threads), and GB/s (input + output bytes
// over the minimum) or GFLOP/s.
//
//   bazel run -c opt //test/cpu:kernel_bench -- [--filter SUBSTR] [--reps 200] [--no-avx512]
//                                                [--threads N]
#include "backends/CPU/CPUBackend.h"
#include "backends/CPU/jit/Jit.h"
#include "backends/CPU/libjit/libjit.h"
#include "backends/CPU/libjit/libjit_gemm_config.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kMaxThreads = 4;

/// Runs a call's thread shares on nth spinning threads (the caller is share 0), so that a
/// timing shows how a kernel's partition scales without the thread pool's wake-up cost.
class Team {
public:
  explicit Team(int64_t nth) : nth_(nth) {
    for (int64_t t = 1; t < nth; t++)
      workers_.emplace_back([this, t] {
        uint64_t seen = 0;
        for (;;) {
          uint64_t g;
          while ((g = gen_.load(std::memory_order_acquire)) == seen)
            ;
          seen = g;
          if (stop_)
            return;
          (*job_)(t, nth_);
          done_.fetch_add(1, std::memory_order_acq_rel);
        }
      });
  }
  ~Team() {
    stop_ = true;
    gen_.fetch_add(1, std::memory_order_acq_rel);
    for (auto &w : workers_)
      w.join();
  }
  void run(const std::function<void(int64_t, int64_t)> &f) {
    job_ = &f;
    done_.store(0, std::memory_order_relaxed);
    gen_.fetch_add(1, std::memory_order_acq_rel);
    f(0, nth_);
    while (done_.load(std::memory_order_acquire) != nth_ - 1)
      ;
  }

private:
  int64_t nth_;
  const std::function<void(int64_t, int64_t)> *job_ = nullptr;
  std::atomic<uint64_t> gen_{0};
  std::atomic<int64_t> done_{0};
  std::atomic<bool> stop_{false};
  std::vector<std::thread> workers_;
};

std::vector<float> filled(size_t n, unsigned seed) {
  std::vector<float> v(n);
  uint32_t s = seed * 2654435761u + 1;
  for (float &x : v) {
    s = s * 1664525u + 1013904223u;
    x = float(int32_t(s >> 8) % 2001 - 1000) / 1000.0f;
  }
  return v;
}

struct Case {
  std::string name;
  double bytes = 0, flops = 0;
  std::function<void(int64_t tid, int64_t nth)> run;
};

using MaxPoolFn = decltype(&libjit_maxpool_f32);
using AvgPoolFn = decltype(&libjit_avgpool_f32);
using DwFn = decltype(&libjit_conv2d_dw_f32);
using ConvFn = decltype(&libjit_conv2d_f32_avx512);
using ConvTFn = decltype(&libjit_conv2d_t_f32_avx512);
using ConvSFn = decltype(&libjit_conv2d_strip_f32_avx512);

struct Kernels {
  MaxPoolFn maxpool;
  AvgPoolFn avgpool;
  DwFn dw;
  ConvFn conv;
  ConvTFn convT;
  ConvSFn convS;
  bool avx512;
  int64_t gemmScratch;
};

int64_t outDim(int64_t in, int64_t k, int64_t s, int64_t pb, int64_t pe, bool ceil) {
  int64_t span = in + pb + pe - k;
  return (ceil ? (span + s - 1) / s : span / s) + 1;
}

void addPool(std::vector<Case> &cases, const Kernels &k, bool isMax, int64_t C, int64_t H,
             int64_t K, int64_t S, int64_t P, bool ceil, int64_t countPads = 0) {
  int64_t OH = outDim(H, K, S, P, P, ceil);
  auto in = std::make_shared<std::vector<float>>(filled(C * H * H, 1));
  auto out = std::make_shared<std::vector<float>>(C * OH * OH);
  int64_t perThread = libjit_pool_scratch_floats(H, H, OH, OH, K, K, S, S, 1, 1) + 64;
  auto scratch = std::make_shared<std::vector<float>>(perThread * kMaxThreads);
  Case c;
  c.name = std::string(isMax ? "maxpool " : "avgpool ") + std::to_string(K) + "x" +
           std::to_string(K) + "/" + std::to_string(S) + " p" + std::to_string(P) + " " +
           std::to_string(C) + "x" + std::to_string(H) + "x" + std::to_string(H) +
           (countPads ? " incl" : "");
  c.bytes = 4.0 * double(C * H * H + C * OH * OH);
  c.run = [=, &k](int64_t tid, int64_t nth) {
    if (isMax)
      k.maxpool(out->data(), in->data(), 1, C, H, H, OH, OH, K, K, S, S, P, P,
                scratch->data() + tid * perThread, tid, nth);
    else
      k.avgpool(out->data(), in->data(), 1, C, H, H, OH, OH, K, K, S, S, P, P, countPads,
                scratch->data() + tid * perThread, tid, nth);
  };
  cases.push_back(c);
}

void addDw(std::vector<Case> &cases, const Kernels &k, int64_t C, int64_t H, int64_t S,
           int64_t K = 3) {
  int64_t P = K / 2, OH = outDim(H, K, S, P, P, false);
  auto in = std::make_shared<std::vector<float>>(filled(C * H * H, 2));
  auto w = std::make_shared<std::vector<float>>(filled(C * K * K, 3));
  auto b = std::make_shared<std::vector<float>>(filled(C, 4));
  auto out = std::make_shared<std::vector<float>>(C * OH * OH);
  int64_t perThread = libjit_conv2d_dw_scratch_floats(H, H, OH, OH, K, K, S, S, 1, 1) + 64;
  auto scratch = std::make_shared<std::vector<float>>(perThread * kMaxThreads);
  Case c;
  c.name = "conv_dw " + std::to_string(K) + "x" + std::to_string(K) + "/" + std::to_string(S) +
           " " + std::to_string(C) + "x" + std::to_string(H) + "x" + std::to_string(H);
  c.bytes = 4.0 * double(C * H * H + C * OH * OH);
  c.flops = 2.0 * double(C * OH * OH * K * K);
  c.run = [=, &k](int64_t tid, int64_t nth) {
    k.dw(out->data(), in->data(), w->data(), b->data(), 1, C, H, H, OH, OH, K, K, S, S, P, P, 1, 1,
         1, 0.0f, 6.0f, scratch->data() + tid * perThread, tid, nth);
  };
  cases.push_back(c);
}

enum class Algo { Packed, Transposed, Strip };

/// A convolution through the GEMM path with packed weights (transposed: pixels as rows), or
/// the strip kernel (row-major weights, activations read in column strips).
void addConv(std::vector<Case> &cases, const Kernels &k, Algo algo, int64_t C, int64_t H, int64_t O,
             int64_t KS, int64_t S, int64_t P, bool withAdd) {
  bool transposed = algo == Algo::Transposed;
  int64_t OH = outDim(H, KS, S, P, P, false), Kd = C * KS * KS;
  auto in = std::make_shared<std::vector<float>>(filled(C * H * H, 5));
  auto w = filled(O * Kd, 6);
  auto b = std::make_shared<std::vector<float>>(filled(O, 7));
  auto add = std::make_shared<std::vector<float>>(filled(O * OH * OH, 8));
  auto out = std::make_shared<std::vector<float>>(O * OH * OH);
  auto scratch = std::make_shared<std::vector<float>>(k.gemmScratch * kMaxThreads);
  auto t = std::make_shared<std::vector<float>>(O * OH * OH);
  std::shared_ptr<std::vector<float>> packed;
  if (algo == Algo::Strip) {
    packed = std::make_shared<std::vector<float>>(w);
  } else if (transposed) {
    packed = std::make_shared<std::vector<float>>(
        k.avx512 ? libjit::packedBFloats<libjit::GemmAvx512>(Kd, O)
                 : libjit::packedBFloats<libjit::GemmAvx2>(Kd, O));
    (k.avx512 ? libjit_pack_bt_f32_avx512 : libjit_pack_bt_f32_avx2)(packed->data(), w.data(), Kd,
                                                                     O);
  } else {
    packed = std::make_shared<std::vector<float>>(
        k.avx512 ? libjit::packedAFloats<libjit::GemmAvx512>(O, Kd)
                 : libjit::packedAFloats<libjit::GemmAvx2>(O, Kd));
    (k.avx512 ? libjit_pack_a_f32_avx512 : libjit_pack_a_f32_avx2)(packed->data(), w.data(), O, Kd,
                                                                   Kd);
  }
  Case c;
  c.name = std::string(algo == Algo::Strip ? "convS "
                       : transposed        ? "convT "
                                           : "conv ") +
           std::to_string(KS) + "x" + std::to_string(KS) + "/" + std::to_string(S) + " " +
           std::to_string(C) + "->" + std::to_string(O) + " " + std::to_string(H) + "x" +
           std::to_string(H) + (withAdd ? " +add" : "");
  c.flops = 2.0 * double(O * OH * OH) * double(Kd);
  c.run = [=, &k](int64_t tid, int64_t nth) {
    const float *a = withAdd ? add->data() : nullptr;
    if (algo == Algo::Strip)
      k.convS(out->data(), in->data(), packed->data(), b->data(), a, 1, C, H, H, O, OH, OH, KS, KS,
              S, S, P, P, 1, 1, 1, 0.0f, 6.0f, scratch->data(), tid, nth);
    else if (transposed)
      k.convT(out->data(), in->data(), packed->data(), b->data(), a, 1, C, H, H, O, OH, OH, KS, KS,
              S, S, P, P, 1, 1, 1, 0.0f, 6.0f, t->data(), scratch->data(), tid, nth);
    else
      k.conv(out->data(), in->data(), packed->data(), b->data(), a, 1, C, H, H, O, OH, OH, KS, KS,
             S, S, P, P, 1, 1, 1, 1, 0.0f, 6.0f, scratch->data(), tid, nth);
  };
  cases.push_back(c);
}

std::vector<Case> allCases(const Kernels &k) {
  std::vector<Case> cs;
  // squeezenet1_1 (ceil mode) and resnet50 max pools; an average pool of the same shapes.
  addPool(cs, k, true, 64, 111, 3, 2, 0, true);
  addPool(cs, k, true, 128, 55, 3, 2, 0, true);
  addPool(cs, k, true, 256, 27, 3, 2, 0, true);
  addPool(cs, k, true, 64, 112, 3, 2, 1, false);
  addPool(cs, k, true, 64, 56, 2, 2, 0, false);
  addPool(cs, k, false, 64, 112, 3, 2, 1, false);
  addPool(cs, k, false, 256, 28, 2, 2, 0, false);
  // densenet121's transition average pools; inception_v3's "same" average pools (the pads
  // counted) and its max pools.
  addPool(cs, k, false, 128, 56, 2, 2, 0, false);
  addPool(cs, k, false, 512, 14, 2, 2, 0, false);
  addPool(cs, k, false, 192, 35, 3, 1, 1, false, 1);
  addPool(cs, k, false, 768, 17, 3, 1, 1, false, 1);
  addPool(cs, k, false, 2048, 8, 3, 1, 1, false, 1);
  addPool(cs, k, true, 64, 147, 3, 2, 0, false);
  addPool(cs, k, true, 288, 35, 3, 2, 0, false);
  addPool(cs, k, true, 768, 17, 3, 2, 0, false);
  // vgg16_bn's max pools.
  addPool(cs, k, true, 64, 224, 2, 2, 0, false);
  addPool(cs, k, true, 512, 14, 2, 2, 0, false);
  // mobilenet_v2 depthwise layers.
  addDw(cs, k, 32, 112, 1);
  addDw(cs, k, 96, 112, 2);
  addDw(cs, k, 144, 56, 1);
  addDw(cs, k, 144, 56, 2);
  addDw(cs, k, 192, 28, 1);
  addDw(cs, k, 192, 28, 2);
  addDw(cs, k, 384, 14, 1);
  addDw(cs, k, 576, 14, 1);
  addDw(cs, k, 576, 14, 2);
  addDw(cs, k, 960, 7, 1);
  // mnasnet1_0 and efficientnet_b0 5x5 (and their other 3x3) depthwise layers.
  addDw(cs, k, 48, 112, 2);
  addDw(cs, k, 72, 56, 1);
  addDw(cs, k, 72, 56, 2, 5);
  addDw(cs, k, 144, 56, 2, 5);
  addDw(cs, k, 120, 28, 1, 5);
  addDw(cs, k, 240, 28, 1, 5);
  addDw(cs, k, 240, 28, 2);
  addDw(cs, k, 240, 28, 2, 5);
  addDw(cs, k, 480, 14, 1, 5);
  addDw(cs, k, 576, 14, 2, 5);
  addDw(cs, k, 672, 14, 2, 5);
  addDw(cs, k, 1152, 7, 1, 5);
  // efficientnet_v2_s's and mnasnet1_0's 3x3 layers on 14x14 planes.
  addDw(cs, k, 960, 14, 1);
  addDw(cs, k, 960, 14, 2);
  addDw(cs, k, 480, 14, 1);
  addDw(cs, k, 1152, 7, 1);
  // First convolutions (few input channels).
  addConv(cs, k, Algo::Packed, 3, 224, 64, 3, 2, 0, false);
  addConv(cs, k, Algo::Strip, 3, 224, 64, 3, 2, 0, false);
  addConv(cs, k, Algo::Packed, 3, 224, 32, 3, 2, 1, false);
  addConv(cs, k, Algo::Strip, 3, 224, 32, 3, 2, 1, false);
  addConv(cs, k, Algo::Packed, 3, 224, 64, 7, 2, 3, false);
  addConv(cs, k, Algo::Strip, 3, 224, 64, 7, 2, 3, false);
  // mobilenet_v2 and squeezenet 1x1 convolutions (small K or small O).
  addConv(cs, k, Algo::Packed, 16, 112, 96, 1, 1, 0, false);
  addConv(cs, k, Algo::Strip, 16, 112, 96, 1, 1, 0, false);
  addConv(cs, k, Algo::Packed, 32, 112, 16, 1, 1, 0, false);
  addConv(cs, k, Algo::Strip, 32, 112, 16, 1, 1, 0, false);
  addConv(cs, k, Algo::Packed, 96, 56, 24, 1, 1, 0, false);
  addConv(cs, k, Algo::Strip, 96, 56, 24, 1, 1, 0, false);
  addConv(cs, k, Algo::Packed, 24, 56, 144, 1, 1, 0, false);
  addConv(cs, k, Algo::Strip, 24, 56, 144, 1, 1, 0, false);
  addConv(cs, k, Algo::Packed, 144, 56, 24, 1, 1, 0, true);
  addConv(cs, k, Algo::Strip, 144, 56, 24, 1, 1, 0, true);
  addConv(cs, k, Algo::Packed, 144, 28, 32, 1, 1, 0, false);
  addConv(cs, k, Algo::Strip, 144, 28, 32, 1, 1, 0, false);
  addConv(cs, k, Algo::Packed, 32, 28, 192, 1, 1, 0, false);
  addConv(cs, k, Algo::Strip, 32, 28, 192, 1, 1, 0, false);
  addConv(cs, k, Algo::Packed, 192, 28, 32, 1, 1, 0, true);
  addConv(cs, k, Algo::Strip, 192, 28, 32, 1, 1, 0, true);
  addConv(cs, k, Algo::Packed, 128, 55, 16, 1, 1, 0, false);
  addConv(cs, k, Algo::Strip, 128, 55, 16, 1, 1, 0, false);
  addConv(cs, k, Algo::Packed, 16, 55, 64, 1, 1, 0, false);
  addConv(cs, k, Algo::Strip, 16, 55, 64, 1, 1, 0, false);
  // resnet50 pointwise and 3x3 layers, squeezenet 3x3 expand: where the packed GEMM is near
  // peak, for the rule that picks the strip kernel.
  for (Algo a : {Algo::Packed, Algo::Strip}) {
    addConv(cs, k, a, 64, 56, 64, 1, 1, 0, false);
    addConv(cs, k, a, 64, 56, 256, 1, 1, 0, false);
    addConv(cs, k, a, 256, 56, 64, 1, 1, 0, false);
    addConv(cs, k, a, 512, 28, 128, 1, 1, 0, false);
    addConv(cs, k, a, 128, 28, 512, 1, 1, 0, true);
    addConv(cs, k, a, 64, 56, 64, 3, 1, 1, false);
    addConv(cs, k, a, 16, 55, 64, 3, 1, 1, false);
    addConv(cs, k, a, 128, 56, 128, 3, 2, 1, false);
    addConv(cs, k, a, 96, 14, 576, 1, 1, 0, false);
    addConv(cs, k, a, 576, 14, 96, 1, 1, 0, true);
    addConv(cs, k, a, 160, 7, 960, 1, 1, 0, false);
    addConv(cs, k, a, 960, 7, 160, 1, 1, 0, true);
    addConv(cs, k, a, 320, 7, 1280, 1, 1, 0, false);
    addConv(cs, k, a, 64, 14, 384, 1, 1, 0, false);
    addConv(cs, k, a, 384, 14, 64, 1, 1, 0, true);
    addConv(cs, k, a, 48, 13, 192, 3, 1, 1, false);
    addConv(cs, k, a, 64, 13, 256, 1, 1, 0, false);
    addConv(cs, k, a, 256, 14, 256, 3, 1, 1, false);
    addConv(cs, k, a, 1024, 14, 256, 1, 1, 0, false);
    addConv(cs, k, a, 256, 14, 1024, 1, 1, 0, true);
  }
  addConv(cs, k, Algo::Transposed, 96, 14, 576, 1, 1, 0, false);
  addConv(cs, k, Algo::Transposed, 576, 14, 96, 1, 1, 0, true);
  addConv(cs, k, Algo::Transposed, 64, 14, 384, 1, 1, 0, false);
  addConv(cs, k, Algo::Transposed, 384, 14, 64, 1, 1, 0, true);
  addConv(cs, k, Algo::Transposed, 160, 7, 960, 1, 1, 0, false);
  addConv(cs, k, Algo::Transposed, 960, 7, 160, 1, 1, 0, true);
  addConv(cs, k, Algo::Transposed, 960, 7, 320, 1, 1, 0, false);
  addConv(cs, k, Algo::Transposed, 320, 7, 1280, 1, 1, 0, false);
  addConv(cs, k, Algo::Transposed, 512, 13, 1000, 1, 1, 0, false);
  addConv(cs, k, Algo::Transposed, 48, 13, 192, 3, 1, 1, false);
  addConv(cs, k, Algo::Transposed, 64, 13, 256, 1, 1, 0, false);
  addConv(cs, k, Algo::Transposed, 256, 14, 256, 3, 1, 1, false);
  addConv(cs, k, Algo::Transposed, 1024, 14, 256, 1, 1, 0, false);
  addConv(cs, k, Algo::Transposed, 256, 14, 1024, 1, 1, 0, true);
  // Pointwise layers with large filters on 13x13 to 28x28 images (resnext50, wide_resnet50_2,
  // resnet50/101, fcn_resnet50, inception_v3): the strip kernel reads the whole filter once
  // per strip, the transposed GEMM once per block of rows; for the strip-first rule's
  // filter-size bound.
  for (Algo a : {Algo::Strip, Algo::Transposed}) {
    addConv(cs, k, a, 512, 14, 512, 1, 1, 0, false);
    addConv(cs, k, a, 1024, 14, 512, 1, 1, 0, false);
    addConv(cs, k, a, 512, 14, 1024, 1, 1, 0, true);
    addConv(cs, k, a, 768, 14, 768, 1, 1, 0, false);
    addConv(cs, k, a, 1024, 14, 768, 1, 1, 0, false);
    addConv(cs, k, a, 1024, 14, 1024, 1, 1, 0, false);
    addConv(cs, k, a, 768, 17, 768, 1, 1, 0, false);
    addConv(cs, k, a, 1024, 17, 1024, 1, 1, 0, false);
    addConv(cs, k, a, 512, 28, 512, 1, 1, 0, false);
    addConv(cs, k, a, 1024, 28, 512, 1, 1, 0, false);
    addConv(cs, k, a, 1024, 28, 1024, 1, 1, 0, false);
  }
  // resnet50's strided and 7x7 layers on every algorithm (which one the planner takes).
  for (Algo a : {Algo::Packed, Algo::Strip, Algo::Transposed}) {
    addConv(cs, k, a, 128, 56, 128, 3, 2, 1, false);
    addConv(cs, k, a, 256, 28, 256, 3, 2, 1, false);
    addConv(cs, k, a, 512, 14, 512, 3, 2, 1, false);
    addConv(cs, k, a, 512, 7, 512, 3, 1, 1, false);
    addConv(cs, k, a, 256, 56, 512, 1, 2, 0, true);
    addConv(cs, k, a, 512, 28, 1024, 1, 2, 0, true);
    addConv(cs, k, a, 1024, 14, 2048, 1, 2, 0, true);
  }
  return cs;
}

} // namespace

int main(int argc, char **argv) {
  std::string filter;
  int reps = 200;
  bool noAvx512 = false;
  int64_t threads = 1;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (a == "--filter" && i + 1 < argc)
      filter = argv[++i];
    else if (a == "--reps" && i + 1 < argc)
      reps = std::max(1, std::atoi(argv[++i]));
    else if (a == "--threads" && i + 1 < argc)
      threads = std::min<int64_t>(kMaxThreads, std::max(1, std::atoi(argv[++i])));
    else if (a == "--no-avx512")
      noAvx512 = true;
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  kiln::cpu::JitOptions opts;
  opts.disableAvx512 = noAvx512;
  opts.cacheDir = kiln::cpu::CPUBackendOptions::defaultKernelCacheDir();
  bool avx512 = kiln::cpu::detectHost(opts).avx512;
  std::string isa = avx512 ? "avx512" : "avx2";
  auto addrs = kiln::exitOnError(
      kiln::cpu::getSharedKernels({"libjit_maxpool_f32", "libjit_avgpool_f32",
                                   "libjit_conv2d_dw_f32", "libjit_conv2d_f32_" + isa,
                                   "libjit_conv2d_t_f32_" + isa, "libjit_conv2d_strip_f32_" + isa},
                                  opts),
      "JIT");
  Kernels k;
  k.maxpool = reinterpret_cast<MaxPoolFn>(addrs["libjit_maxpool_f32"]);
  k.avgpool = reinterpret_cast<AvgPoolFn>(addrs["libjit_avgpool_f32"]);
  k.dw = reinterpret_cast<DwFn>(addrs["libjit_conv2d_dw_f32"]);
  k.conv = reinterpret_cast<ConvFn>(addrs["libjit_conv2d_f32_" + isa]);
  k.convT = reinterpret_cast<ConvTFn>(addrs["libjit_conv2d_t_f32_" + isa]);
  k.convS = reinterpret_cast<ConvSFn>(addrs["libjit_conv2d_strip_f32_" + isa]);
  k.avx512 = avx512;
  k.gemmScratch = avx512 ? libjit::gemmScratchFloats<libjit::GemmAvx512>()
                         : libjit::gemmScratchFloats<libjit::GemmAvx2>();
  Team team(threads);
  std::printf("%-40s %9s %9s %9s\n",
              ("case (" + isa + ", " + std::to_string(threads) + "T)").c_str(), "min us", "med us",
              "rate");
  for (Case &c : allCases(k)) {
    if (!filter.empty() && c.name.find(filter) == std::string::npos)
      continue;
    for (int i = 0; i < 3; i++)
      team.run(c.run);
    std::vector<double> t;
    for (int i = 0; i < reps; i++) {
      auto s = Clock::now();
      team.run(c.run);
      t.push_back(std::chrono::duration<double, std::micro>(Clock::now() - s).count());
    }
    std::sort(t.begin(), t.end());
    double rate = c.flops ? c.flops / (t[0] * 1e3) : c.bytes / (t[0] * 1e3);
    std::printf("%-40s %9.1f %9.1f %7.1f %s\n", c.name.c_str(), t[0], t[t.size() / 2], rate,
                c.flops ? "GFLOP/s" : "GB/s");
  }
  return 0;
}
