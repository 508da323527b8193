/// \file
/// Kiln's API for embedders, in one include: build or import a model, compile it for a
/// backend, run it.
///
///  - kiln::ExecutionEngine (one backend, one call to compile, many runs) and
///    kiln::HostManager (several devices and backends, asynchronous runs);
///  - kiln::Module, kiln::Function and the generated Function::create* builders;
///  - kiln::Tensor, kiln::PlaceholderBindings, kiln::CompileOptions;
///  - kiln::Error / kiln::Expected<T>: every failure a caller can cause;
///  - kiln::loadONNX / loadONNXFromBuffer: ONNX import into a Function.
///  - kiln::ONNXSession: an ONNX model run with inputs of any shape it allows (one
///    compiled specialization per shape tuple, cached).
///
/// This layer pulls in no low-level IR, no generated instruction header, no logging
/// library, no LLVM, and none of the memory planner, passes or runtime internals
/// (test/api checks it). Writing a backend or a pass takes the second layer,
/// kiln/backend.h; see include/README.md.
#ifndef KILN_KILN_H
#define KILN_KILN_H

#include "kiln/Backend/CompileOptions.h"
#include "kiln/Backend/ExecutionContext.h"
#include "kiln/Base/Error.h"
#include "kiln/Base/Pages.h"
#include "kiln/Base/Tensor.h"
#include "kiln/Base/Type.h"
#include "kiln/ExecutionEngine/ExecutionEngine.h"
#include "kiln/ExecutionEngine/ONNXSession.h"
#include "kiln/Graph/Graph.h"
#include "kiln/Importer/ONNX.h"
#include "kiln/Quantization/Quantize.h"
#include "kiln/Quantization/ReducedPrecision.h"
#include "kiln/Runtime/HostManager.h"

#endif // KILN_KILN_H
