/// \file
/// CPU graph step `widen-half-floats`: the CPU computes float16 and bfloat16 by the
/// operator table's rule (computed in float, rounded once per operator). Every node that
/// reads or produces a 16-bit float and whose kernel computes on float32 only becomes
/// ConvertTo(float) of each 16-bit operand -> the node on float32 -> ConvertTo back to each
/// 16-bit result's type; a 16-bit Constant operand becomes a float32 Constant at compile
/// time instead (exact; the kernels then pack it as they pack float32 weights, so a
/// network converted to bf16 or fp16 by convertPrecision holds float32 weights on this
/// path). The ConvertTo kernels are element-wise, so a chain of widened nodes' conversions
/// fuses into the neighbouring loops. Run by the compile driver on every
/// function the CPU compiles (BackendCompileSpec::graphSteps).
#ifndef KILN_BACKENDS_CPU_WIDENHALFFLOATS_H
#define KILN_BACKENDS_CPU_WIDENHALFFLOATS_H

#include "kiln/Graph/Graph.h"

#include <functional>

namespace kiln::cpu {

/// What the kernels run as the node stands (kinds, ranks, attributes).
using NativeSupport = std::function<bool(const Node &)>;

/// True when \p n reads or produces a Float16 or BFloat16 value.
bool hasHalfFloats(const Node &n);

/// True when \p n (with 16-bit floats) is supported once widened: its float32 form (a copy
/// with every 16-bit operand and result type made Float, in a scratch function) is native.
bool isWidenable(const Node &n, const NativeSupport &native);

/// Widens every node of \p f for which \p widen is true (the CPU: supported, but not
/// natively). Returns true when it changed \p f.
bool widenHalfFloats(Function *f, const std::function<bool(const Node &)> &widen);

} // namespace kiln::cpu

#endif // KILN_BACKENDS_CPU_WIDENHALFFLOATS_H
