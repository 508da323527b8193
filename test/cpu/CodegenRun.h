/// \file
/// Tests that force the CPU code generator's options per call (threads, ISA, Winograd,
/// kernels) compile through it directly: the backend's graph preparation (fusion), IRGen,
/// the static memory plan, then generateProgram with those options.
#ifndef KILN_TEST_CPU_CODEGENRUN_H
#define KILN_TEST_CPU_CODEGENRUN_H

#include "backends/CPU/CPUBackend.h"
#include "backends/CPU/ThreadPool.h"
#include "backends/CPU/codegen/Codegen.h"
#include "kiln/Backend/Compiler.h"
#include "kiln/Memory/MemoryPipeline.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace kiln::test {

/// \p F prepared for \p cpu and compiled with \p co (kernel cache: the default directory);
/// the stage descriptions are appended to \p stages. Null, with a test failure, on error.
inline std::unique_ptr<cpu::CPUFunction> compileWithCodegen(Function *F, cpu::CPUBackend &cpu,
                                                            const cpu::CodegenOptions &co,
                                                            std::vector<std::string> &stages) {
  Error prep = prepareFunction(F, cpu);
  EXPECT_FALSE(bool(prep)) << prep.message();
  auto ir = generateIR(F);
  EXPECT_TRUE(bool(ir)) << ir.getError().message();
  if (!ir)
    return nullptr;
  auto plan = planMemory(**ir);
  EXPECT_TRUE(bool(plan)) << plan.getError().message();
  if (!plan)
    return nullptr;
  cpu::CodegenOptions withCache = co;
  withCache.jit.cacheDir = cpu::CPUBackendOptions::defaultKernelCacheDir();
  auto prog = cpu::generateProgram(**ir, *plan, withCache);
  EXPECT_TRUE(bool(prog)) << prog.getError().message();
  if (!prog)
    return nullptr;
  for (const cpu::Stage &s : (*prog)->stages)
    stages.push_back(s.desc);
  return std::make_unique<cpu::CPUFunction>(std::move(*prog),
                                            std::make_shared<cpu::ThreadPool>(co.threads));
}

} // namespace kiln::test

#endif // KILN_TEST_CPU_CODEGENRUN_H
