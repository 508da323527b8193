/// \file
/// Kiln's API for backend and pass authors: the embedder API (kiln/kiln.h) plus the
/// compiler's internals.
///
///  - kiln::Backend, CompiledFunction and KILN_REGISTER_BACKEND (kiln/Backend/Backend.h),
///    and the compile driver (kiln/Backend/Compiler.h);
///  - the low-level IR, its generated instruction classes and its text parser
///    (kiln/IR);
///  - the graph text form (kiln/Graph/TextIR.h);
///  - graph pass pipelines and the pass context (kiln/Passes), the IR passes
///    (kiln/Passes/IR);
///  - the memory-aware scheduler, the static memory planner and the planned-IR pipeline
///    (kiln/Memory);
///  - the runtime's internals: DeviceManager (subclass it for an accelerator),
///    Partitioner, Provisioner, Executor, createMultiDeviceNetwork (kiln/Runtime).
///
/// These headers change with the compiler; embedders should include kiln/kiln.h only.
/// See include/README.md.
#ifndef KILN_BACKEND_H
#define KILN_BACKEND_H

#include "kiln/kiln.h"

#include "kiln/Backend/Backend.h"
#include "kiln/Backend/Compiler.h"
#include "kiln/Graph/TextIR.h"
#include "kiln/IR/IR.h"
#include "kiln/IR/IRParser.h"
#include "kiln/Memory/MemoryPipeline.h"
#include "kiln/Memory/MemoryPlanner.h"
#include "kiln/Memory/Scheduler.h"
#include "kiln/Passes/IR/IRPasses.h"
#include "kiln/Passes/PassContext.h"
#include "kiln/Passes/Pipeline.h"
#include "kiln/Runtime/DeviceManager.h"
#include "kiln/Runtime/Executor.h"
#include "kiln/Runtime/MultiDevice.h"
#include "kiln/Runtime/Partitioner.h"
#include "kiln/Runtime/Provisioner.h"

#endif // KILN_BACKEND_H
