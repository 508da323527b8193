// Emitters of the int8 element-wise operators and pooling (libjit/libjit_qelem.cpp,
// libjit/libjit_qpool.cpp):
// Relu, Add, Sub, Mul, Max, Min, BatchedAdd, MaxPool, AvgPool and AdaptiveAvgPool on Int8Q
// operands. Add, Sub and BatchedAdd call libjit_qadd_i8_<isa> / libjit_qbadd_i8_<isa> (the
// Interpreter's arithmetic in registers).
// The other element-wise ones (and MaxPool's requantization) become tables computed here with
// the Interpreter's arithmetic: real values in double, round half away from zero,
// saturate. Float pools go on to planPool / planAdaptiveAvgPool; float element-wise
// instructions never reach these emitters (EmitElementwise.cpp takes them first).
#include "Emitter.h"

#include <algorithm>
#include <cmath>

namespace kiln::cpu {

namespace {

double dequant(int64_t q, const Type &t) { return double(t.scale) * double(q - int64_t(t.offset)); }

/// round(r / scale) + offset, halves away from zero, saturated to int8 (NaN: the offset).
int8_t quant(double r, const Type &t) {
  if (std::isnan(r))
    r = 0.0;
  double q = std::round(r / double(t.scale)) + double(t.offset);
  if (!(q >= -128.0))
    return -128;
  if (q > 127.0)
    return 127;
  return int8_t(q);
}

bool allInt8(const Instruction *I) {
  for (const auto &o : I->getOperands())
    if (o.first->getType()->kind != ElemKind::Int8Q)
      return false;
  return true;
}

} // namespace

Error Emitter::planQuantElem(Instruction *I, std::vector<Item> &items) {
  if (!allInt8(I))
    return unsupported(I);
  Value *dest = I->getOperand(0).first;
  const Type &ot = *dest->getType();
  const int64_t n = int64_t(ot.numElements());
  for (unsigned k = 1; k < I->getNumOperands(); k++)
    if (int64_t(I->getOperand(k).first->getType()->numElements()) != n)
      return makeError(ErrorCode::InvalidArgument, "CPU backend: ", I->getKindName(), " '",
                       I->getName(), "': operand ", I->getOperand(k).first->getType()->toString(),
                       " and result ", ot.toString(), " differ in size");
  if (I->getKind() == InstrKind::Relu) {
    Value *in = I->getOperand(1).first;
    const Type &it = *in->getType();
    int8_t lut[256];
    for (int q = -128; q < 128; q++)
      lut[q + 128] = quant(std::max(dequant(q, it), 0.0), ot);
    // Where the Relu keeps the grid (the quantizer gives its producer the Relu's type) the
    // table is a clamp of the raw value: computed as one, with no table lookups.
    const int64_t lo = lut[0], hi = lut[255];
    bool clamp = lo <= hi;
    for (int q = -128; q < 128 && clamp; q++)
      clamp = lut[q + 128] == std::min<int64_t>(std::max<int64_t>(q, lo), hi);
    if (clamp) {
      items.push_back({true, "qrelu clamp", [=] {
                         call("libjit_qclamp_i8",
                              {ptr(dest), ptr(in), I64(n), I64(lo), I64(hi), tid_, nth_});
                       }});
      return Error::success();
    }
    KILN_ASSIGN_OR_RETURN(uint64_t off, constBytes(lut, sizeof(lut)));
    items.push_back({true, "qrelu", [=] {
                       call("libjit_qlut8_i8",
                            {ptr(dest), ptr(in), I64(n), at({kConstantBase, off}), tid_, nth_});
                     }});
    return Error::success();
  }
  Value *a = I->getOperand(1).first, *b = I->getOperand(2).first;
  const Type &at_ = *a->getType(), &bt = *b->getType();
  if (I->getKind() == InstrKind::Add || I->getKind() == InstrKind::Sub) {
    // In registers (libjit_qadd_i8_<isa>): the Interpreter's double arithmetic, through an
    // exact float shortcut; Sub as Add of -scale_b.
    int64_t L;
    const std::string isa = qIsa(L);
    const float sa = at_.scale, so = ot.scale;
    const float sb = I->getKind() == InstrKind::Sub ? -bt.scale : bt.scale;
    const int64_t oa = at_.offset, ob = bt.offset, oo = ot.offset;
    std::string name = std::string("q") + I->getKindName() + " " + isa;
    items.push_back({true, name, [=] {
                       call("libjit_qadd_i8_" + isa,
                            {ptr(dest), ptr(a), ptr(b), I64(n), F32(sa), I64(oa), F32(sb),
                             I64(ob), F32(so), I64(oo), tid_, nth_});
                     }});
    return Error::success();
  }
  std::vector<int8_t> lut(65536);
  double da[256], db[256];
  for (int q = -128; q < 128; q++)
    da[q + 128] = dequant(q, at_), db[q + 128] = dequant(q, bt);
  for (int i = 0; i < 256; i++)
    for (int j = 0; j < 256; j++) {
      double x = da[i], y = db[j], r;
      switch (I->getKind()) {
      case InstrKind::Add: r = x + y; break;
      case InstrKind::Sub: r = x - y; break;
      case InstrKind::Mul: r = x * y; break;
      case InstrKind::Max: r = std::max(x, y); break;
      default: r = std::min(x, y); break;
      }
      lut[size_t(i * 256 + j)] = quant(r, ot);
    }
  KILN_ASSIGN_OR_RETURN(uint64_t off, constBytes(lut.data(), lut.size()));
  std::string name = std::string("q") + I->getKindName();
  items.push_back({true, name, [=] {
                     call("libjit_qlut16_i8", {ptr(dest), ptr(a), ptr(b), I64(n),
                                               at({kConstantBase, off}), tid_, nth_});
                   }});
  return Error::success();
}

Error Emitter::planQuantBatchedAdd(Instruction *I, std::vector<Item> &items) {
  auto *ba = cast<BatchedAddInst>(I);
  Value *dest = ba->getDest(), *batch = ba->getBatch(), *slice = ba->getSlice();
  if (!allInt8(I))
    return dest->getType()->isQuantizedType() ? unsupported(I) : planBatchedAdd(I, items);
  const Type &bt = *batch->getType(), &st = *slice->getType(), &ot = *dest->getType();
  const int64_t n = int64_t(ot.numElements()), S = int64_t(st.numElements());
  if (int64_t(bt.numElements()) != n || S == 0 || n % S != 0)
    return makeError(ErrorCode::InvalidArgument, "CPU backend: ", I->getKindName(), " '",
                     I->getName(), "': batch ", bt.toString(), " and slice ", st.toString(),
                     " do not fit result ", ot.toString());
  // The Interpreter's BatchedAdd is its Add with the slice repeated: the Add's kernel on
  // runs within a row (libjit_qbadd_i8_<isa>).
  int64_t L;
  const std::string isa = qIsa(L);
  const float sa = bt.scale, sb = st.scale, so = ot.scale;
  const int64_t oa = bt.offset, ob = st.offset, oo = ot.offset, rows = n / S;
  items.push_back({true, "qbatchedadd " + isa, [=] {
                     call("libjit_qbadd_i8_" + isa,
                          {ptr(dest), ptr(batch), ptr(slice), I64(rows), I64(S), F32(sa),
                           I64(oa), F32(sb), I64(ob), F32(so), I64(oo), tid_, nth_});
                   }});
  return Error::success();
}

Error Emitter::planQuantPool(Instruction *I, std::vector<Item> &items) {
  if (!allInt8(I))
    return I->getKind() == InstrKind::AdaptiveAvgPool ? planAdaptiveAvgPool(I, items)
                                                      : planPool(I, items);
  Value *dest = I->getOperand(0).first, *in = I->getOperand(1).first;
  const Type &it = *in->getType(), &ot = *dest->getType();
  if (it.rank() != 4 || ot.rank() != 4 || it.dims[0] != ot.dims[0] || it.dims[1] != ot.dims[1])
    return makeError(ErrorCode::InvalidArgument, "CPU backend: ", I->getKindName(), " '",
                     I->getName(), "': input ", it.toString(), " and output ", ot.toString(),
                     " must be [N,C,H,W] with the same N and C");
  int64_t mode = 2, countPads = 0, KH = 0, KW = 0, SH = 1, SW = 1, PT = 0, PL = 0;
  auto window = [&](const std::vector<dim_t> &k, const std::vector<dim_t> &s,
                    const std::vector<dim_t> &p) {
    KH = k[0], KW = k[1], SH = s[0], SW = s[1], PT = p[0], PL = p[1];
  };
  if (auto *mp = dyn_cast<MaxPoolInst>(I)) {
    mode = 0;
    window(mp->getKernels(), mp->getStrides(), mp->getPads());
  } else if (auto *ap = dyn_cast<AvgPoolInst>(I)) {
    mode = 1;
    countPads = ap->getCountIncludePads();
    window(ap->getKernels(), ap->getStrides(), ap->getPads());
  }
  int8_t lut[256];
  for (int q = -128; q < 128; q++)
    lut[q + 128] = quant(dequant(q, it), ot);
  KILN_ASSIGN_OR_RETURN(uint64_t off, constBytes(lut, sizeof(lut)));
  const int64_t planes = int64_t(it.dims[0] * it.dims[1]), H = it.dims[2], W = it.dims[3];
  const int64_t OH = ot.dims[2], OW = ot.dims[3];
  const float inScale = it.scale, outScale = ot.scale;
  const int64_t inOff = it.offset, outOff = ot.offset;
  // Max pooling in registers where the host has AVX2 (libjit_qpool_i8_<isa>, column strides
  // 1 and 2); the averages are the same portable code in every kernel.
  int64_t L;
  const std::string isa = mode == 0 ? qIsa(L) : "generic";
  std::string name = std::string("q") + I->getKindName() + (isa == "generic" ? "" : " " + isa);
  items.push_back({true, name, [=] {
                     call("libjit_qpool_i8_" + isa,
                          {ptr(dest), ptr(in), at({kConstantBase, off}), I64(planes), I64(H),
                           I64(W), I64(OH), I64(OW), I64(KH), I64(KW), I64(SH), I64(SW), I64(PT),
                           I64(PL), I64(mode), I64(countPads), F32(inScale), I64(inOff),
                           F32(outScale), I64(outOff), tid_, nth_});
                   }});
  return Error::success();
}

void registerQuantElemEmitters(EmitterTable &t) {
  for (InstrKind k : {InstrKind::Relu, InstrKind::Add, InstrKind::Sub, InstrKind::Mul,
                      InstrKind::Max, InstrKind::Min})
    t[k] = &Emitter::planQuantElem;
  for (InstrKind k : {InstrKind::MaxPool, InstrKind::AvgPool, InstrKind::AdaptiveAvgPool})
    t[k] = &Emitter::planQuantPool;
  t[InstrKind::BatchedAdd] = &Emitter::planQuantBatchedAdd;
}

} // namespace kiln::cpu
