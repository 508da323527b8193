/// \file
/// What a stage of a CPU program computes, for the profile's rates (kiln-run
/// --backend-opt profile=1 prints GFLOP/s and GB/s per stage): operations and bytes from
/// the instructions' operand types alone, not from the kernel that computes them.
#ifndef KILN_BACKENDS_CPU_CODEGEN_STAGEWORK_H
#define KILN_BACKENDS_CPU_CODEGEN_STAGEWORK_H

#include "kiln/IR/IR.h"

#include <vector>

namespace kiln::cpu {

struct StageWork {
  /// Arithmetic operations of the convolutions, fully-connected layers and matrix products
  /// (a multiply-add counts 2; integer ones too); 0 for the other kinds, which move data.
  double flops = 0;
  /// Bytes of every distinct operand, each read or written once (weights included).
  double bytes = 0;
  StageWork &operator+=(const StageWork &o) {
    flops += o.flops;
    bytes += o.bytes;
    return *this;
  }
};

/// The work of the instructions \p instrs computed as one stage (one instruction, or an
/// element-wise chain: an operand several of them touch counts once).
StageWork stageWork(const std::vector<const Instruction *> &instrs);

} // namespace kiln::cpu

#endif // KILN_BACKENDS_CPU_CODEGEN_STAGEWORK_H
