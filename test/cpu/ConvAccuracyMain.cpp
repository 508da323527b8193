// The error of every convolution algorithm of the CPU backend against a float64
// reference, on realistic 3x3 stride-1 layers (ResNet and VGG shapes, 64-512 channels,
// 7x7 to 56x56; ReLU'd N(0, 1) activations, He-initialised weights; see ConvAccuracy.h).
// Each algorithm is forced in turn (backend option conv-algorithm); "naive f32" is a plain
// float loop, "planner" the algorithm chooseConvAlgorithm takes. Prints, per algorithm,
// the max and RMS relative error over all layers (max |y - ref| / max |ref|,
// rms(y - ref) / rms(ref)), then per layer. The table in backends/CPU/README.md.
//
//   bazel run -c opt //test/cpu:conv_accuracy -- [--threads 1] [--seeds 2] [--no-avx512]
//       [--layers 64,64,56;...]
#include "ConvAccuracy.h"
#include "test/cpu/ConvBenchBuild.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <sstream>
#include <string>

using namespace kiln::cpu;
using namespace kiln::cpu::accuracy;

namespace {

using kiln::bench::split;

struct Row {
  double maxRel = 0, sumSq = 0;
  int n = 0;
  void add(const ErrorStats &e) {
    maxRel = std::max(maxRel, e.maxRel);
    sumSq += e.rmsRel * e.rmsRel;
    n++;
  }
  double rms() const { return n ? std::sqrt(sumSq / n) : 0; }
};

} // namespace

int main(int argc, char **argv) {
  std::vector<Layer> layers = {
      {64, 64, 56},   {128, 128, 56}, {128, 128, 28}, {256, 256, 28},
      {256, 256, 14}, {512, 512, 14}, {512, 512, 7},  {64, 128, 28},
  };
  unsigned threads = 1;
  int seeds = 2;
  bool noAvx512 = false;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--threads")
      threads = unsigned(std::stoul(next()));
    else if (a == "--seeds")
      seeds = std::stoi(next());
    else if (a == "--no-avx512")
      noAvx512 = true;
    else if (a == "--layers") {
      layers.clear();
      for (auto &l : split(next(), ';')) {
        auto v = split(l, ',');
        if (v.size() != 3) {
          std::cerr << "--layers wants C,O,H;...\n";
          return 2;
        }
        layers.push_back({std::stol(v[0]), std::stol(v[1]), std::stol(v[2])});
      }
    } else {
      std::cerr << "unknown argument " << a << "\n";
      return 2;
    }
  }
  const ConvAlgorithm algorithms[] = {ConvAlgorithm::Strip, ConvAlgorithm::PackedGemm,
                                      ConvAlgorithm::Transposed, ConvAlgorithm::WinogradRows2,
                                      ConvAlgorithm::WinogradRows4, ConvAlgorithm::Winograd};
  std::vector<std::string> names = {"naive f32"};
  for (ConvAlgorithm a : algorithms)
    names.push_back(convAlgorithmName(a));
  names.push_back("planner");
  std::map<std::string, Row> total;
  std::printf("%-18s %-12s %10s %10s\n", "layer C->O HxW", "algorithm", "max rel", "rms rel");
  for (const Layer &l : layers) {
    std::map<std::string, Row> rows;
    std::string chosen;
    for (int seed = 0; seed < seeds; seed++) {
      Data d = makeData(l, 1000 + seed);
      auto record = [&](const std::string &n, const std::vector<float> &y) {
        ErrorStats e = measure(y, d.ref);
        rows[n].add(e);
        total[n].add(e);
      };
      record("naive f32", naiveFloat(l, d));
      for (ConvAlgorithm a : algorithms)
        record(convAlgorithmName(a), runCPU(l, d, a, threads, noAvx512));
      record("planner", runCPU(l, d, std::nullopt, threads, noAvx512, &chosen));
    }
    char lname[64];
    std::snprintf(lname, sizeof lname, "%ld->%ld %ldx%ld", long(l.C), long(l.O), long(l.H),
                  long(l.H));
    for (const std::string &n : names)
      std::printf("%-18s %-12s %10.2e %10.2e%s\n", lname, n.c_str(), rows[n].maxRel, rows[n].rms(),
                  n == "planner" ? ("  (" + chosen + ")").c_str() : "");
    std::fflush(stdout);
  }
  std::printf("\nall layers, %d seed(s) each, %u thread(s), %s\n", seeds, threads,
              noAvx512 ? "AVX2" : "host ISA");
  for (const std::string &n : names)
    std::printf("%-12s max rel %9.2e  rms rel %9.2e\n", n.c_str(), total[n].maxRel, total[n].rms());
  return 0;
}
