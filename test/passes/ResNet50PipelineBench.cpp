// Prints the time of the default graph pipeline on ResNet-50 (no timed test: numbers are
// for the note). The pipeline runs on the function itself, as ExecutionEngine::compile
// does, so weights are rewritten in place.
//
//   resnet50-pipeline-bench [--runs=N] [--backend=NAME] [--dump-text=FILE]
// --dump-text writes the unoptimised graph in the text form (constants elided) for
// `kiln-opt --pipeline=default --time-passes FILE`.

#include "ResNet50.h"

#include "kiln/Backend/Backend.h"
#include "kiln/Graph/TextIR.h"
#include "kiln/Passes/Pipeline.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>

using namespace kiln;

int main(int argc, char **argv) {
  unsigned runs = 5;
  std::string backendName = "Interpreter", dump;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (a.rfind("--runs=", 0) == 0)
      runs = unsigned(std::stoul(a.substr(7)));
    else if (a.rfind("--backend=", 0) == 0)
      backendName = a.substr(10);
    else if (a.rfind("--dump-text=", 0) == 0)
      dump = a.substr(12);
    else {
      std::cerr << "usage: resnet50-pipeline-bench [--runs=N] [--backend=NAME] "
                   "[--dump-text=FILE]\n";
      return 2;
    }
  }
  std::unique_ptr<Backend> backend = exitOnError(createBackend(backendName));
  if (!dump.empty()) {
    Module m;
    test::buildResNet50(m);
    PrintOptions po;
    po.maxConstantElements = 0;
    std::ofstream(dump) << printModule(m, po);
    std::cout << "wrote " << dump << "\n";
  }
  std::vector<double> times;
  PipelineReport last;
  for (unsigned r = 0; r < runs; r++) {
    Module m;
    Function *f = test::buildResNet50(m);
    size_t before = f->numNodes();
    auto t0 = std::chrono::steady_clock::now();
    PipelineReport rep =
        exitOnError(runPipeline(f, getPipelineForBackend(backend.get()), backend.get()));
    times.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (r == 0)
      std::cout << "ResNet-50: " << before << " nodes before, " << f->numNodes() << " after\n";
    last = rep;
  }
  std::sort(times.begin(), times.end());
  std::cout << "default pipeline for " << backendName << " on ResNet-50 (" << runs << " runs): min "
            << times.front() << " ms, median " << times[times.size() / 2] << " ms\n"
            << last.timingTable();
  return 0;
}
