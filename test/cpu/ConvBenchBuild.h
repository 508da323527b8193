// What the convolution benchmarks (conv_bench, conv_cost_bench) share: one layer's Function
// compiled by the CPU code generator with given options, the kernel its convolution stage
// took, and a list argument split at a separator.
#ifndef KILN_TEST_CPU_CONVBENCHBUILD_H
#define KILN_TEST_CPU_CONVBENCHBUILD_H

#include "backends/CPU/CPUBackend.h"
#include "backends/CPU/ThreadPool.h"
#include "backends/CPU/codegen/Codegen.h"
#include "kiln/Backend/Compiler.h"
#include "kiln/kiln.h"

#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace kiln::bench {

struct BuiltConv {
  std::unique_ptr<cpu::CPUFunction> fn;
  std::string kernel; ///< the convolution stage's kernel ("convS", "conv_wino2", ...)
};

/// \p F prepared for the CPU, lowered, planned and compiled with \p co (its kernel cache the
/// backend's default) into a program run by co.threads threads.
inline BuiltConv buildConv(Function *F, cpu::CodegenOptions co) {
  exitOnError(prepareFunction(F, cpu::CPUBackend()), "prepare");
  auto ir = exitOnError(generateIR(F), "IRGen");
  auto plan = exitOnError(planMemory(*ir), "plan");
  co.jit.cacheDir = cpu::CPUBackendOptions::defaultKernelCacheDir();
  auto prog = exitOnError(cpu::generateProgram(*ir, plan, co), "codegen");
  BuiltConv b;
  for (const cpu::Stage &s : prog->stages)
    if (s.desc.rfind("conv", 0) == 0)
      b.kernel = s.desc.substr(0, s.desc.find(' '));
  b.fn = std::make_unique<cpu::CPUFunction>(std::move(prog),
                                            std::make_shared<cpu::ThreadPool>(co.threads));
  return b;
}

/// The non-empty items of \p s between separators \p sep.
inline std::vector<std::string> split(const std::string &s, char sep) {
  std::vector<std::string> r;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep))
    if (!item.empty())
      r.push_back(item);
  return r;
}

} // namespace kiln::bench

#endif // KILN_TEST_CPU_CONVBENCHBUILD_H
