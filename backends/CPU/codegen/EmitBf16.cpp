// Emitter of the bfloat16 matrix products: FullyConnected and MatMul whose operands and
// result are bf16 (a function converted by convertPrecision), and bf16 Convolution /
// FusedConvolution of group 1 (libjit_conv_bf16_*: filter packed at compile time in
// blocks of 4 output channels of channel pairs per tap; in the thread's scratch the input
// as padded channel-pair planes and the patch of each 64-pixel tile; reached from
// planConv). The weights are packed in
// bf16 pairs (libjit_pack_b_bf16): at compile time when constant, per run otherwise;
// the kernel accumulates in float32 and rounds once. libjit_fc_bf16_avx512bf16
// (vdpbf16ps) when the target has AVX512_BF16, else libjit_fc_bf16_generic (reached only
// where the graph step did not widen the node: a bundle for a target without it).
#include "Emitter.h"

#include "backends/CPU/libjit/libjit.h"
#include "backends/CPU/libjit/libjit_act.h"

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

Expected<Location> Emitter::packConvBf16Filter(WeightVar *cw, int64_t O, int64_t C,
                                                int64_t taps, bool channelLanes) {
  const WeightPacking packing =
      channelLanes ? WeightPacking::ConvBf16ChannelPanels : WeightPacking::ConvBf16Pairs;
  auto key = std::make_tuple(static_cast<const WeightVar *>(cw), packing, int64_t(1));
  auto it = constCache_.find(key);
  if (it == constCache_.end()) {
    const int64_t elems = channelLanes ? libjit_conv_wt_bf16_elems(O, C, taps)
                                       : libjit_conv_w_bf16_elems(O, C, taps);
    uint64_t off = alignUp(consts_.size());
    if (!consts_.resize(off + alignUp(uint64_t(elems) * 2)))
      return makeError(ErrorCode::OutOfMemory, "CPU backend: cannot grow the constant arena by ",
                       elems * 2, " bytes");
    const Tensor &t = cast<Constant>(cw->getOrigin())->getPayload();
    auto *dst = reinterpret_cast<uint16_t *>(consts_.data() + off);
    auto *src = reinterpret_cast<const uint16_t *>(t.getUnsafePtr());
    if (channelLanes)
      libjit_pack_conv_wt_bf16(dst, src, O, C, taps);
    else
      libjit_pack_conv_w_bf16(dst, src, O, C, taps);
    it = constCache_.emplace(key, off).first;
  }
  return Location{kConstantBase, it->second};
}

Error Emitter::planConvBf16(Instruction *I, std::vector<Item> &items) {
  FusedEpilogue epi;
  KILN_ASSIGN_OR_RETURN(ConvShape s, convShapeOf(I, epi));
  if (epi.act != libjit::ActNone && epi.act != libjit::ActClamp)
    return makeError(ErrorCode::Unsupported, "CPU backend: activation ",
                     cast<FusedConvolutionInst>(I)->getActivation(), " of bf16 ",
                     I->getKindName(), " '", I->getName(), "'");
  Value *dest = I->getOperand(0).first, *in = I->getOperand(1).first,
        *filter = I->getOperand(2).first, *bias = I->getOperand(3).first;
  auto fd = dimsOf(filter);
  auto *cw = dyn_cast<WeightVar>(filter);
  if (s.group != 1 || !s.constantWeights || fd.size() != 4 ||
      bias->getType()->kind != ElemKind::BFloat16 || in->getType()->kind != ElemKind::BFloat16 ||
      filter->getType()->kind != ElemKind::BFloat16)
    return makeError(ErrorCode::Unsupported, "CPU backend: bf16 ", I->getKindName(), " '",
                     I->getName(), "' needs a 2-D convolution of group 1 with a constant bf16 ",
                     "filter and bf16 bias (input ", in->getType()->toString(), ", filter ",
                     filter->getType()->toString(), ", group ", s.group, ")");
  const int64_t N = s.N, C = s.C, H = s.H, W = s.W, O = s.O, OH = s.OH, OW = s.OW;
  const int64_t KH = s.KH, KW = s.KW, SH = s.SH, SW = s.SW, PT = s.PT, PL = s.PL, DH = s.DH,
                DW = s.DW;
  // Small planes (7x7) with many pairs on vdpbf16ps: output channels as the lanes (libjit.h).
  const bool channelLanes = avx512bf16_ && libjit_conv_bf16_channel_lanes(C, KH * KW, OH, OW);
  KILN_ASSIGN_OR_RETURN(Location wl, packConvBf16Filter(cw, O, C, KH * KW, channelLanes));
  needPoolScratch((libjit_conv_bf16_scratch_bytes(C, OH, OW, KH, KW, SH, SW, DH, DW) + 3) / 4);
  const std::string kernel = channelLanes  ? "libjit_conv_bf16_cl_avx512bf16"
                             : avx512bf16_ ? "libjit_conv_bf16_avx512bf16"
                                           : "libjit_conv_bf16_generic";
  const std::string label = "conv_bf16 " + std::to_string(KH) + "x" + std::to_string(KW) + "/" +
                            std::to_string(SH) + " " + std::to_string(C) + "->" +
                            std::to_string(O) + " " + std::to_string(H) + "x" +
                            std::to_string(W) + (epi.add ? " +add" : "");
  Value *residual = epi.add;
  items.push_back({true, label, [=] {
                     call(kernel, {ptr(dest), ptr(in), at(wl), ptr(bias),
                                   residual ? ptr(residual) : nullPtr(), I64(N), I64(C), I64(H),
                                   I64(W), I64(O), I64(OH), I64(OW), I64(KH), I64(KW), I64(SH),
                                   I64(SW), I64(PT), I64(PL), I64(DH), I64(DW), I64(epi.act),
                                   F32(epi.lo), F32(epi.hi), scratch(),
                                   I64(scratchPerThread_ * 4), tid_, nth_});
                   }});
  return Error::success();
}

} // namespace kiln::cpu
