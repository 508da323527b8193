// bfloat16 FullyConnected / MatMul on the CPU (libjit_bf16.cpp, codegen/EmitBf16.cpp):
// the kernels natively against a double-precision reference, and the backend on both ISAs
// (vdpbf16ps on this host when it has AVX512_BF16; widened under avx512=0) against the
// Interpreter.
//
// Bounds. Operands are bf16 values, so every product x*w is exact in float32 (8 x 8
// significant bits). A float32 sum of K such products (in any order) differs from the
// exact sum by at most (K - 1) 2^-24 S, S = sum |x w|; adding the bias rounds once more
// (2^-24 (S + |b|)); rounding to bf16 (8 significant bits, round to nearest) adds at most
// half an ulp, <= 2^-8 |y|. So against the exact y: |r - y| <= 2^-8 |y| + (K + 1) 2^-24
// (S + |b|) (1 + 2^-8). Two float32 results of different summation orders (the CPU's and
// the Interpreter's) round to bf16 values at most 2^-7 |y| apart (each rounding <= 2^-8
// relative, in opposite directions across a boundary) plus twice the accumulation bound.
#include "backends/CPU/CPUBackend.h"
#include "backends/CPU/jit/Jit.h"
#include "backends/CPU/libjit/libjit.h"
#include "test/cpu/Bf16Values.h"
#include "kiln/Backend/Compiler.h"
#include "kiln/kiln.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace kiln {
namespace {

struct Case {
  int64_t N, K, M;
};

using bf16test::f;
using bf16test::randomBf16;

/// The bound of the file comment for one output against the exact value.
double exactBound(double y, double sumAbs, double absBias, int64_t K) {
  return std::ldexp(std::fabs(y), -8) +
         double(K + 1) * std::ldexp(sumAbs + absBias, -24) * (1 + std::ldexp(1.0, -8));
}

using Kernel = void (*)(uint16_t *, const uint16_t *, const uint16_t *, const uint16_t *, int64_t,
                        int64_t, int64_t, int64_t, int64_t);

void checkKernel(Kernel k, const char *name, const Case &c, int64_t nthreads, bool bias) {
  SCOPED_TRACE(std::string(name) + " N=" + std::to_string(c.N) + " K=" + std::to_string(c.K) +
               " M=" + std::to_string(c.M) + " threads=" + std::to_string(nthreads));
  std::vector<uint16_t> x = randomBf16(c.N * c.K, 1), w = randomBf16(c.K * c.M, 2),
                        b = randomBf16(c.M, 3);
  std::vector<uint16_t> packed(libjit_packed_b_bf16_elems(c.K, c.M), 0xffff);
  libjit_pack_b_bf16(packed.data(), w.data(), c.K, c.M, c.M);
  std::vector<uint16_t> y(c.N * c.M, 0xffff);
  for (int64_t t = 0; t < nthreads; t++)
    k(y.data(), x.data(), packed.data(), bias ? b.data() : nullptr, c.N, c.K, c.M, t, nthreads);
  for (int64_t i = 0; i < c.N; i++)
    for (int64_t j = 0; j < c.M; j++) {
      double e = bias ? f(b[j]) : 0.0, s = 0;
      for (int64_t p = 0; p < c.K; p++) {
        e += double(f(x[i * c.K + p])) * f(w[p * c.M + j]);
        s += std::fabs(double(f(x[i * c.K + p])) * f(w[p * c.M + j]));
      }
      double got = f(y[i * c.M + j]);
      ASSERT_LE(std::fabs(got - e), exactBound(e, s, bias ? std::fabs(f(b[j])) : 0, c.K))
          << "y[" << i << "][" << j << "] = " << got << ", exact " << e;
    }
}

const Case kCases[] = {{1, 1, 1},   {1, 2, 16},  {3, 7, 17},     {5, 33, 70},
                       {4, 64, 16}, {9, 5, 129}, {1, 2048, 1000}};

TEST(Bf16Gemm, GenericKernelWithinTheBound) {
  for (const Case &c : kCases)
    for (int64_t threads : {1, 3})
      for (bool bias : {true, false})
        checkKernel(libjit_fc_bf16_generic, "generic", c, threads, bias);
}

TEST(Bf16Gemm, Avx512Bf16KernelWithinTheBound) {
  if (!__builtin_cpu_supports("avx512bf16"))
    GTEST_SKIP() << "this host has no AVX512_BF16";
  for (const Case &c : kCases)
    for (int64_t threads : {1, 3})
      for (bool bias : {true, false})
        checkKernel(libjit_fc_bf16_avx512bf16, "avx512bf16", c, threads, bias);
}

// Packing: pairs of rows side by side per column, 16-column panels, zeros beyond K and M.
// B = [[1, 2], [3, 4], [5, 6]] (K 3, M 2): pair 0 of panel 0 = {1,3, 2,4, 0,0 x14}, pair 1 =
// {5,0, 6,0, 0,0 x14}.
TEST(Bf16Gemm, PackingLayout) {
  std::vector<uint16_t> B;
  for (float v : {1, 2, 3, 4, 5, 6})
    B.push_back(bfloat16(v).bits());
  ASSERT_EQ(libjit_packed_b_bf16_elems(3, 2), 64);
  std::vector<uint16_t> p(64, 0xffff);
  libjit_pack_b_bf16(p.data(), B.data(), 3, 2, 2);
  std::vector<float> got;
  for (uint16_t v : p)
    got.push_back(f(v));
  std::vector<float> want(64, 0.0f);
  want[0] = 1, want[1] = 3, want[2] = 2, want[3] = 4, want[32] = 5, want[34] = 6;
  EXPECT_EQ(got, want);
}

/// FC (constant weights, bias) and MatMul (run-time right operand) in bf16, saved.
struct Net {
  Module mod;
  Function *F = mod.createFunction("main");
  Placeholder *x, *a, *b;
  Net(const Case &c, const Case &mm) {
    PseudoRNG rng(11);
    x = mod.createPlaceholder(ElemKind::BFloat16, {dim_t(c.N), dim_t(c.K)}, "x");
    Tensor w(ElemKind::BFloat16, {dim_t(c.K), dim_t(c.M)}), bias(ElemKind::BFloat16, {dim_t(c.M)});
    w.randomize(-1, 1, rng);
    bias.randomize(-1, 1, rng);
    auto *fc = F->createFullyConnected("fc", x, mod.createConstant("w", std::move(w)),
                                       mod.createConstant("b", std::move(bias)));
    F->createSave("y", fc);
    a = mod.createPlaceholder(ElemKind::BFloat16, {dim_t(mm.N), dim_t(mm.K)}, "a");
    b = mod.createPlaceholder(ElemKind::BFloat16, {dim_t(mm.K), dim_t(mm.M)}, "b");
    F->createSave("z", F->createMatMul("mm", a, b));
  }
  void bind(PlaceholderBindings &pb) {
    PseudoRNG rng(5);
    for (Placeholder *p : {x, a, b}) {
      Tensor t(*p->getType());
      t.randomize(-1, 1, rng);
      pb.insert(p, std::move(t));
    }
    for (SaveNode *s : F->getSaves())
      pb.allocate(s->getPlaceholder());
  }
};

unsigned countConverts(const Function *f) {
  unsigned n = 0;
  for (const auto &up : f->getNodes())
    n += up->getKind() == NodeKind::ConvertTo;
  return n;
}

// The same bf16 FC and MatMul on the CPU with its default ISA and with avx512=0, 1 and 2
// threads, against the Interpreter: within 2^-7 |y| plus twice the accumulation bound.
TEST(Bf16Gemm, BackendAgainstTheInterpreterOnBothIsas) {
  const Case fcCase{3, 37, 21}, mmCase{2, 19, 33};
  Net ref(fcCase, mmCase);
  PlaceholderBindings rb;
  ref.bind(rb);
  {
    auto be = createBackend("Interpreter");
    ASSERT_TRUE(bool(be));
    auto cf = (*be)->compile(ref.F, CompileOptions());
    ASSERT_TRUE(bool(cf)) << cf.getError().message();
    ExecutionContext ctx(&rb);
    ASSERT_FALSE(bool((*cf)->execute(ctx)));
  }
  cpu::CPUBackend probe;
  for (bool avx512 : {true, false})
    for (unsigned threads : {1u, 2u}) {
      SCOPED_TRACE(std::string(avx512 ? "default ISA" : "avx512=0") + ", threads " +
                   std::to_string(threads));
      Net net(fcCase, mmCase);
      EXPECT_TRUE(probe.isOpSupported(*net.F->getNodeByName("fc")));
      EXPECT_TRUE(probe.isOpSupported(*net.F->getNodeByName("mm")));
      PlaceholderBindings pb;
      net.bind(pb);
      cpu::CPUBackend cpu;
      CompileOptions co;
      co.threads = threads;
      if (!avx512)
        co.backendOptions["avx512"] = "0";
      auto cf = cpu.compile(net.F, co);
      ASSERT_TRUE(bool(cf)) << cf.getError().message();
      // Natively: no conversion at all; widened: ConvertTo around each of the two nodes.
      const bool native = avx512 && cpu::hostHasAvx512Bf16();
      EXPECT_EQ(countConverts(net.F) == 0, native);
      ExecutionContext ctx(&pb);
      ASSERT_FALSE(bool((*cf)->execute(ctx)));
      for (unsigned s = 0; s < 2; s++) {
        const Case &c = s == 0 ? fcCase : mmCase;
        const Tensor &want = *rb.get(ref.F->getSaves()[s]->getPlaceholder());
        const Tensor &got = *pb.get(net.F->getSaves()[s]->getPlaceholder());
        // S = sum |x w| <= K (operands in [-1, 1]); |b| <= 1.
        const double accumulation = 2.0 * double(c.K + 1) * std::ldexp(double(c.K) + 1, -24);
        for (size_t i = 0; i < want.size(); i++) {
          double w = want.getAsDouble(i), g = got.getAsDouble(i);
          EXPECT_LE(std::fabs(g - w), std::ldexp(std::fabs(w), -7) * 1.01 + accumulation)
              << net.F->getSaves()[s]->getName() << "[" << i << "]";
        }
      }
    }
}

} // namespace
} // namespace kiln
