// Emitter of the bfloat16 matrix products: FullyConnected and MatMul whose operands and
// result are bf16 (a function converted by convertPrecision). The weights are packed in
// bf16 pairs (libjit_pack_b_bf16): at compile time when constant, per run otherwise;
// the kernel accumulates in float32 and rounds once. libjit_fc_bf16_avx512bf16
// (vdpbf16ps) when the target has AVX512_BF16, else libjit_fc_bf16_generic (reached only
// where the graph step did not widen the node: a bundle for a target without it).
#include "Emitter.h"

#include "backends/CPU/libjit/libjit.h"

#include <cstring>

namespace kiln::cpu {

Error Emitter::planFCBf16(Instruction *I, Value *dest, Value *in, Value *weights, Value *bias,
                          std::vector<Item> &items) {
  auto id = dimsOf(in), wd = dimsOf(weights);
  if (id.size() != 2 || wd.size() != 2 || id[1] != wd[0])
    return makeError(ErrorCode::Unsupported, "CPU backend: bf16 ", I->getKindName(), " '",
                     I->getName(), "' needs [N, K] x [K, M] operands");
  int64_t N = id[0], K = id[1], M = wd[1];
  const int64_t elems = libjit_packed_b_bf16_elems(K, M);
  auto *cw = dyn_cast<WeightVar>(weights);
  Location wl;
  if (cw && cw->isConstant()) {
    auto key = std::make_tuple(static_cast<const WeightVar *>(cw), WeightPacking::GemmBBf16Pairs,
                               int64_t(1));
    auto it = constCache_.find(key);
    if (it == constCache_.end()) {
      uint64_t off = alignUp(consts_.size());
      if (!consts_.resize(off + alignUp(uint64_t(elems) * 2)))
        return makeError(ErrorCode::OutOfMemory, "CPU backend: cannot grow the constant arena by ",
                         elems * 2, " bytes");
      const Tensor &t = cast<Constant>(cw->getOrigin())->getPayload();
      libjit_pack_b_bf16(reinterpret_cast<uint16_t *>(consts_.data() + off),
                         reinterpret_cast<const uint16_t *>(t.getUnsafePtr()), K, M, M);
      it = constCache_.emplace(key, off).first;
    }
    wl = {kConstantBase, it->second};
  } else {
    wl = {kActivationBase, reserveExtra(uint64_t(elems) * 2)};
    items.push_back({false, "pack bf16", [=] {
                       call("libjit_pack_b_bf16", {at(wl), ptr(weights), I64(K), I64(M), I64(M)});
                     }});
  }
  const std::string kernel = avx512bf16_ ? "libjit_fc_bf16_avx512bf16" : "libjit_fc_bf16_generic";
  items.push_back(
      {true, "fc bf16 " + std::to_string(N) + "x" + std::to_string(K) + "x" + std::to_string(M),
       [=] {
         call(kernel, {ptr(dest), ptr(in), at(wl), bias ? ptr(bias) : nullPtr(), I64(N), I64(K),
                       I64(M), tid_, nth_});
       }});
  return Error::success();
}

} // namespace kiln::cpu
