// The CPU backend's kernel library: declarations of every exported kernel, for native
// callers (unit tests, benchmarks, compile-time weight packing). Names follow
// libjit_<op>_<kind>[_<variant>]; GEMM-based kernels come in an _avx512 and an _avx2
// variant (register tiles for 512- and 256-bit vectors, see libjit_gemm_config.h).
// Epilogues: act is an activation code of libjit_act.h with parameters lo, hi: 0 none,
// 1 clamps results to [lo, hi] (Relu: [0, inf], Relu6: [0, 6]), 2-9 LeakyRelu, Sigmoid,
// Tanh, Swish, HardSwish, HardSigmoid, GELU and GELU's tanh form.
// Kernels taking (tid, nthreads) compute the share of thread tid; scratch is
// nthreads * gemmScratchFloats<Cfg>() floats.
#ifndef KILN_BACKENDS_CPU_LIBJIT_LIBJIT_H
#define KILN_BACKENDS_CPU_LIBJIT_LIBJIT_H

#include "libjit_defs.h"
#include "libjit_ewloops.h"

#define LIBJIT_DECLARE_GEMM(SUFFIX)                                                         \
  LIBJIT_EXPORT void libjit_sgemm_f32_##SUFFIX(int64_t M, int64_t N, int64_t K,             \
                                               const float *A, int64_t lda, const float *B,  \
                                               int64_t ldb, float *C, int64_t ldc,           \
                                               float *scratch, int64_t tid,                  \
                                               int64_t nthreads);                            \
  LIBJIT_EXPORT void libjit_fc_f32_##SUFFIX(float *out, const float *in,                    \
                                            const float *packedW, const float *bias,         \
                                            const float *add, int64_t N, int64_t K,          \
                                            int64_t M, int64_t act, float lo, float hi,      \
                                            float *scratch, int64_t tid, int64_t nthreads);  \
  LIBJIT_EXPORT void libjit_batchmatmul_f32_##SUFFIX(                                       \
      float *out, const float *lhs, const float *rhs, int64_t B, int64_t N, int64_t K,       \
      int64_t M, float *scratch, int64_t tid, int64_t nthreads);                             \
  LIBJIT_EXPORT void libjit_conv2d_f32_##SUFFIX(                                            \
      float *out, const float *in, const float *packedW, const float *bias,                  \
      const float *add, int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t OH,   \
      int64_t OW, int64_t KH, int64_t KW, int64_t SH, int64_t SW, int64_t PT, int64_t PL,    \
      int64_t DH, int64_t DW, int64_t G, int64_t act, float lo, float hi, float *scratch,    \
      int64_t tid, int64_t nthreads);                                                        \
  LIBJIT_EXPORT void libjit_conv2d_t_f32_##SUFFIX(                                          \
      float *out, const float *in, const float *packedWT, const float *bias,                 \
      const float *add, int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t OH,   \
      int64_t OW, int64_t KH, int64_t KW, int64_t SH, int64_t SW, int64_t PT, int64_t PL,    \
      int64_t DH, int64_t DW, int64_t act, float lo, float hi, float *t, float *scratch,     \
      int64_t tid, int64_t nthreads);                                                        \
  /* float16 weights (a network run in fp16): packedW as libjit_pack_a/b_f32 packs them, */ \
  /* each element a float16; widened per cache block, results as the _f32 kernels' */      \
  LIBJIT_EXPORT void libjit_conv2d_f16w_##SUFFIX(                                           \
      float *out, const float *in, const uint16_t *packedW, const float *bias,               \
      const float *add, int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t OH,   \
      int64_t OW, int64_t KH, int64_t KW, int64_t SH, int64_t SW, int64_t PT, int64_t PL,    \
      int64_t DH, int64_t DW, int64_t G, int64_t act, float lo, float hi, float *scratch,    \
      int64_t tid, int64_t nthreads);                                                        \
  LIBJIT_EXPORT void libjit_conv2d_t_f16w_##SUFFIX(                                         \
      float *out, const float *in, const uint16_t *packedWT, const float *bias,              \
      const float *add, int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t OH,   \
      int64_t OW, int64_t KH, int64_t KW, int64_t SH, int64_t SW, int64_t PT, int64_t PL,    \
      int64_t DH, int64_t DW, int64_t act, float lo, float hi, float *t, float *scratch,     \
      int64_t tid, int64_t nthreads);                                                        \
  LIBJIT_EXPORT void libjit_fc_f16w_##SUFFIX(float *out, const float *in,                   \
                                             const uint16_t *packedW, const float *bias,     \
                                             const float *add, int64_t N, int64_t K,         \
                                             int64_t M, int64_t act, float lo, float hi,     \
                                             float *scratch, int64_t tid, int64_t nthreads); \
  LIBJIT_EXPORT void libjit_fc_row_f16w_##SUFFIX(                                           \
      float *out, const float *in, const uint16_t *W, const float *bias, const float *add,   \
      int64_t K, int64_t M, int64_t act, float lo, float hi, float *partials, int64_t parts,  \
      int64_t tid, int64_t nthreads);                                                        \
  LIBJIT_EXPORT void libjit_pack_bt_f32_##SUFFIX(float *dst, const float *Wt, int64_t K,    \
                                                 int64_t O);                                 \
  LIBJIT_EXPORT void libjit_pack_a_f32_##SUFFIX(float *dst, const float *A, int64_t M,      \
                                                int64_t K, int64_t lda);                     \
  LIBJIT_EXPORT void libjit_pack_b_f32_##SUFFIX(float *dst, const float *B, int64_t K,      \
                                                int64_t N, int64_t ldb);

LIBJIT_DECLARE_GEMM(avx512)
LIBJIT_DECLARE_GEMM(avx2)

// bfloat16 FullyConnected / MatMul (libjit_bf16.cpp): out[N x M] = in[N x K] x B + bias,
// all bf16, float32 accumulation, rounded once. B packed by libjit_pack_b_bf16 in bf16
// pairs (libjit_packed_b_bf16_elems(K, M) elements); bias may be null. _avx512bf16 needs
/// A fully-connected layer of one row with W [K x M] row-major, unpacked; with several
/// threads, row ranges into partials [nthreads x M], then libjit_fc_row_sum_f32
/// (libjit_gemm.cpp). rowGroups: nonzero on AVX-512 hosts (weight rows summed in groups).
LIBJIT_EXPORT void libjit_fc_row_f32(float *out, const float *in, const float *W,
                                     const float *bias, const float *add, int64_t K, int64_t M,
                                     int64_t act, float lo, float hi, float *partials,
                                     int64_t parts, int64_t tid, int64_t nthreads,
                                     int64_t rowGroups);
LIBJIT_EXPORT void libjit_fc_row_sum_f32(float *out, const float *partials, const float *bias,
                                         const float *add, int64_t M, int64_t parts,
                                         int64_t act, float lo, float hi, int64_t tid,
                                         int64_t nthreads);
// AVX512_BF16 (vdpbf16ps); _generic runs anywhere.
LIBJIT_EXPORT int64_t libjit_packed_b_bf16_elems(int64_t K, int64_t M);
LIBJIT_EXPORT void libjit_pack_b_bf16(uint16_t *dst, const uint16_t *B, int64_t K, int64_t M,
                                      int64_t ldb);
LIBJIT_EXPORT void libjit_fc_bf16_generic(uint16_t *out, const uint16_t *in,
                                          const uint16_t *packedW, const uint16_t *bias,
                                          int64_t N, int64_t K, int64_t M, int64_t tid,
                                          int64_t nthreads);
LIBJIT_EXPORT void libjit_fc_bf16_avx512bf16(uint16_t *out, const uint16_t *in,
                                             const uint16_t *packedW, const uint16_t *bias,
                                             int64_t N, int64_t K, int64_t M, int64_t tid,
                                             int64_t nthreads);
// bfloat16 Convolution, NCHW, group 1 (libjit_bf16.cpp): all bf16, float32 accumulation;
// the filter [O][C][KH][KW] packed by libjit_pack_conv_w_bf16 (libjit_conv_w_bf16_elems(O,
// C, KH KW) elements) in blocks of 4 output channels of channel pairs per tap; res (a
// residual of the output's shape) and bias may be null; act 0 (none) or 1 (clamp to [lo,
// hi]): t = bf16(acc + bias), then with res or act bf16(clamp(t + res)). scratch: nthreads
// x scratchStride bytes, scratchStride >= libjit_conv_bf16_scratch_bytes(C, OH, OW, KH, KW,
// SH, SW, DH, DW). _avx512bf16 needs AVX512_BF16.
LIBJIT_EXPORT int64_t libjit_conv_w_bf16_elems(int64_t O, int64_t C, int64_t taps);
LIBJIT_EXPORT void libjit_pack_conv_w_bf16(uint16_t *dst, const uint16_t *w, int64_t O,
                                           int64_t C, int64_t taps);
LIBJIT_EXPORT int64_t libjit_conv_bf16_scratch_bytes(int64_t C, int64_t OH, int64_t OW,
                                                     int64_t KH, int64_t KW, int64_t SH,
                                                     int64_t SW, int64_t DH, int64_t DW);
#define LIBJIT_DECLARE_CONV_BF16(SUFFIX)                                                     \
  LIBJIT_EXPORT void libjit_conv_bf16_##SUFFIX(                                             \
      uint16_t *out, const uint16_t *in, const uint32_t *packedW, const uint16_t *bias,      \
      const uint16_t *res, int64_t N, int64_t C, int64_t H, int64_t W, int64_t O,            \
      int64_t OH, int64_t OW, int64_t KH, int64_t KW, int64_t SH, int64_t SW, int64_t PT,    \
      int64_t PL, int64_t DH, int64_t DW, int64_t act, float lo, float hi, char *scratch,    \
      int64_t scratchStride, int64_t tid, int64_t nthreads);
LIBJIT_DECLARE_CONV_BF16(generic)
LIBJIT_DECLARE_CONV_BF16(avx512bf16)
// The same convolution with 16 output channels per vector instead of 16 pixels, for layers
// where libjit_conv_bf16_channel_lanes(C, KH KW, OH, OW) (fewer than 64 output pixels, not
// a multiple of 16, at least 512 channel pairs x taps); the filter packed by libjit_pack_conv_wt_bf16 (libjit_conv_wt_bf16_elems
// elements) in panels of 16 channels; the same scratch. Bit for bit libjit_conv_bf16_avx512bf16's
// results. Needs AVX512_BF16.
LIBJIT_EXPORT int64_t libjit_conv_bf16_channel_lanes(int64_t C, int64_t taps, int64_t OH,
                                                     int64_t OW);
LIBJIT_EXPORT int64_t libjit_conv_wt_bf16_elems(int64_t O, int64_t C, int64_t taps);
LIBJIT_EXPORT void libjit_pack_conv_wt_bf16(uint16_t *dst, const uint16_t *w, int64_t O,
                                            int64_t C, int64_t taps);
LIBJIT_DECLARE_CONV_BF16(cl_avx512bf16)

// Convolution with the activations read in column strips (libjit_conv.cpp, strip): w is
// the row-major filter [O][C*KH*KW] itself (no packing), group 1. Needs C*KH*KW * 48
// floats <= gemmScratchFloats<Cfg>() (C*KH*KW <= 9900). A strip is kStripVectors vectors
// (16 floats on avx512, 8 on avx2); a partial last strip is computed in whole vectors.
namespace libjit {
constexpr int kStripVectors = 3;
} // namespace libjit
#define LIBJIT_DECLARE_CONV_STRIP(SUFFIX)                                                   \
  LIBJIT_EXPORT void libjit_conv2d_strip_f32_##SUFFIX(                                      \
      float *out, const float *in, const float *w, const float *bias, const float *add,      \
      int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t OH, int64_t OW,         \
      int64_t KH, int64_t KW, int64_t SH, int64_t SW, int64_t PT, int64_t PL, int64_t DH,    \
      int64_t DW, int64_t act, float lo, float hi, float *scratch, int64_t tid,              \
      int64_t nthreads);
LIBJIT_DECLARE_CONV_STRIP(avx512)
LIBJIT_DECLARE_CONV_STRIP(avx2)
#undef LIBJIT_DECLARE_CONV_STRIP
// Winograd F(4x4, 3x3) convolution (libjit_wino.cpp): float32 NCHW, 3x3 kernel,
// stride 1, dilation 1, group 1, any pads. Weights are transformed at compile time by
// libjit_pack_wino_f32_* (libjit_pack_wino_floats_* floats, from W [O][C][3][3]); scratch
// is nthreads * libjit_conv2d_wino_scratch_floats_*(...) floats. Epilogue: + bias[o]
// (may be null), + add (the output's shape, may be null), then the activation act.
#define LIBJIT_DECLARE_WINO(SUFFIX)                                                         \
  LIBJIT_EXPORT int64_t libjit_conv2d_wino_scratch_floats_##SUFFIX(                         \
      int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t OH, int64_t OW);        \
  LIBJIT_EXPORT int64_t libjit_pack_wino_floats_##SUFFIX(int64_t O, int64_t C);             \
  LIBJIT_EXPORT void libjit_pack_wino_f32_##SUFFIX(float *dst, const float *w, int64_t O,   \
                                                   int64_t C);                               \
  LIBJIT_EXPORT void libjit_conv2d_wino_f32_##SUFFIX(                                       \
      float *out, const float *in, const float *packedW, const float *bias,                  \
      const float *add, int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t OH,   \
      int64_t OW, int64_t PT, int64_t PL, int64_t act, float lo, float hi, float *scratch,   \
      int64_t tid, int64_t nthreads);
LIBJIT_DECLARE_WINO(avx512)
LIBJIT_DECLARE_WINO(avx2)
#undef LIBJIT_DECLARE_WINO
// Winograd with the tiles as GEMM rows, F(m x m, 3x3) for m = 2 (libjit_conv2d_wino_rows2)
// or 4 (..._rows4): the same shapes, arguments and epilogue as the kernel above (weights
// from libjit_pack_wino_rows_f32_*(m, ...), libjit_pack_wino_rows_floats_*(m, ...) floats;
// scratch nthreads * libjit_conv2d_wino_rows_scratch_floats_*(m, ...) floats).
// On AVX-512, F(2x2) layers of at most kWinoShortTiles tiles per image compute their
// GEMMs in register tiles of kWinoShortMR rows (the cost model charges those).
constexpr int64_t kWinoShortTiles = 16;
constexpr int kWinoShortMR = 8;
// Winograd F(4x4)'s GEMMs sum the input channels in blocks of this many, each block's
// float32 sum then added into the output tile (libjit_gemm_impl.h,
// microKernelBlockedSums; the cost model charges the extra load, add and store of the
// accumulators per block).
constexpr int64_t kWinoSumBlock = 32;
#define LIBJIT_DECLARE_WINO_ROWS(SUFFIX)                                                    \
  LIBJIT_EXPORT int64_t libjit_conv2d_wino_rows_scratch_floats_##SUFFIX(                    \
      int64_t m, int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t OH,          \
      int64_t OW);                                                                           \
  LIBJIT_EXPORT int64_t libjit_pack_wino_rows_floats_##SUFFIX(int64_t m, int64_t O,         \
                                                             int64_t C);                     \
  LIBJIT_EXPORT void libjit_pack_wino_rows_f32_##SUFFIX(int64_t m, float *dst, const float *w, \
                                                        int64_t O, int64_t C);               \
  LIBJIT_EXPORT void libjit_conv2d_wino_rows2_f32_##SUFFIX(                                 \
      float *out, const float *in, const float *packedW, const float *bias,                  \
      const float *add, int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t OH,   \
      int64_t OW, int64_t PT, int64_t PL, int64_t act, float lo, float hi, float *scratch,   \
      int64_t tid, int64_t nthreads);                                                        \
  LIBJIT_EXPORT void libjit_conv2d_wino_rows4_f32_##SUFFIX(                                 \
      float *out, const float *in, const float *packedW, const float *bias,                  \
      const float *add, int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t OH,   \
      int64_t OW, int64_t PT, int64_t PL, int64_t act, float lo, float hi, float *scratch,   \
      int64_t tid, int64_t nthreads);
LIBJIT_DECLARE_WINO_ROWS(avx512)
LIBJIT_DECLARE_WINO_ROWS(avx2)
#undef LIBJIT_DECLARE_WINO_ROWS

// Element-wise (libjit_elementwise.cpp).
#define LIBJIT_DECLARE_UNARY(NAME) LIBJIT_EXPORT float libjit_elem_##NAME##_f32(float x);
#define LIBJIT_DECLARE_BINARY(NAME) LIBJIT_EXPORT float libjit_elem_##NAME##_f32(float a, float b);
LIBJIT_DECLARE_UNARY(relu)
LIBJIT_DECLARE_UNARY(sigmoid)
LIBJIT_DECLARE_UNARY(tanh)
LIBJIT_DECLARE_UNARY(hardswish)
LIBJIT_DECLARE_UNARY(swish)
LIBJIT_DECLARE_UNARY(neg)
LIBJIT_DECLARE_UNARY(abs)
LIBJIT_DECLARE_UNARY(exp)
LIBJIT_DECLARE_UNARY(log)
LIBJIT_DECLARE_UNARY(sqrt)
LIBJIT_DECLARE_UNARY(rsqrt)
LIBJIT_DECLARE_UNARY(reciprocal)
LIBJIT_DECLARE_UNARY(erf)
LIBJIT_DECLARE_UNARY(floor)
LIBJIT_DECLARE_UNARY(ceil)
LIBJIT_DECLARE_UNARY(round)
LIBJIT_DECLARE_BINARY(add)
LIBJIT_DECLARE_BINARY(sub)
LIBJIT_DECLARE_BINARY(mul)
LIBJIT_DECLARE_BINARY(div)
LIBJIT_DECLARE_BINARY(max)
LIBJIT_DECLARE_BINARY(min)
LIBJIT_DECLARE_BINARY(pow)
LIBJIT_DECLARE_BINARY(prelu)
LIBJIT_EXPORT float libjit_elem_clip_f32(float x, float lo, float hi);
LIBJIT_EXPORT float libjit_elem_leakyrelu_f32(float x, float alpha);
#undef LIBJIT_DECLARE_UNARY
/// GELU; \p approximate (the operator's Approximate) selects the tanh form.
LIBJIT_EXPORT float libjit_elem_gelu_f32(float x, bool approximate);
#undef LIBJIT_DECLARE_BINARY

// Shared element-wise loops (libjit_elementwise.cpp; the lists in libjit_ewloops.h).
#define LIBJIT_DECLARE_EW_UNARY(OP)                                                         \
  LIBJIT_EXPORT void libjit_ew_##OP##_f32(const float *in, float *out, int64_t begin,        \
                                          int64_t end);
#define LIBJIT_DECLARE_EW_BINARY(OP)                                                        \
  LIBJIT_EXPORT void libjit_ew_##OP##_f32(const float *a, const float *b, float *out,        \
                                          int64_t begin, int64_t end);
#define LIBJIT_DECLARE_EW_ROWS(OP)                                                          \
  LIBJIT_EXPORT void libjit_ew_rows_##OP##_f32(const float *x, const float *src, float *out, \
                                               int64_t len, int64_t srcRowStride,            \
                                               int64_t srcStep, int64_t begin, int64_t end);
LIBJIT_EW_UNARY_LOOPS(LIBJIT_DECLARE_EW_UNARY)
LIBJIT_EW_BINARY_LOOPS(LIBJIT_DECLARE_EW_BINARY)
LIBJIT_EW_ROW_LOOPS(LIBJIT_DECLARE_EW_ROWS)
#undef LIBJIT_DECLARE_EW_UNARY
#undef LIBJIT_DECLARE_EW_BINARY
#undef LIBJIT_DECLARE_EW_ROWS

// Data movement (libjit_tensor.cpp).
#define LIBJIT_DECLARE_COPY(SUFFIX, T)                                                      \
  LIBJIT_EXPORT void libjit_strided_copy_##SUFFIX(T *dst, const T *src,                     \
                                                  const int64_t *dims,                       \
                                                  const int64_t *dstStrides,                 \
                                                  const int64_t *srcStrides, int64_t rank);  \
  /* Thread tid's share of the copy (the outermost dimension split between nthreads). */ \
  LIBJIT_EXPORT void libjit_strided_copy_part_##SUFFIX(                                      \
      T *dst, const T *src, const int64_t *dims, const int64_t *dstStrides,                  \
      const int64_t *srcStrides, int64_t rank, int64_t tid, int64_t nthreads);              \
  LIBJIT_EXPORT void libjit_splat_##SUFFIX(T *dst, T v, int64_t n);
LIBJIT_DECLARE_COPY(u8, uint8_t)
LIBJIT_DECLARE_COPY(u16, uint16_t)
LIBJIT_DECLARE_COPY(u32, uint32_t)
LIBJIT_DECLARE_COPY(u64, uint64_t)
#undef LIBJIT_DECLARE_COPY
/// Gather (libjit_gather_<element size>_<index kind>): dst[o][k][:] = src[o][idx[k]][:]
/// with Data seen as [outer, size, inner]; negative indices count from the end. On an index
/// outside [-size, size) nothing is written and, unless status[0] is already set, status
/// becomes {id, position, index} (the caller reports it after the stage).
/// libjit_gather_part_*: thread tid's share of the outer x count rows (every thread checks
/// every index, thread 0 reports).
#define LIBJIT_DECLARE_GATHER(SUFFIX, T, ISUFFIX, I)                                        \
  LIBJIT_EXPORT void libjit_gather_##SUFFIX##_##ISUFFIX(                                     \
      T *dst, const T *src, const I *idx, int64_t outer, int64_t size, int64_t count,        \
      int64_t inner, int64_t *status, int64_t id);                                           \
  LIBJIT_EXPORT void libjit_gather_part_##SUFFIX##_##ISUFFIX(                                \
      T *dst, const T *src, const I *idx, int64_t outer, int64_t size, int64_t count,        \
      int64_t inner, int64_t *status, int64_t id, int64_t tid, int64_t nthreads);
#define LIBJIT_DECLARE_GATHERS(SUFFIX, T)                                                   \
  LIBJIT_DECLARE_GATHER(SUFFIX, T, i32, int32_t)                                             \
  LIBJIT_DECLARE_GATHER(SUFFIX, T, i64, int64_t)
LIBJIT_DECLARE_GATHERS(u8, uint8_t)
LIBJIT_DECLARE_GATHERS(u16, uint16_t)
LIBJIT_DECLARE_GATHERS(u32, uint32_t)
LIBJIT_DECLARE_GATHERS(u64, uint64_t)
#undef LIBJIT_DECLARE_GATHERS
#undef LIBJIT_DECLARE_GATHER

// Index-driven movement of the ONNX breadth operators (libjit_index.cpp). An index outside
// [-size, size) stops the kernel and sets status as Gather does (ND: check id + entry).
#define LIBJIT_DECLARE_GATHER_IDX(SUFFIX, T, ISUFFIX, I)                                    \
  LIBJIT_EXPORT void libjit_gather_elements_##SUFFIX##_##ISUFFIX(                            \
      T *dst, const T *src, const I *idx, const int64_t *idxDims, const int64_t *srcStrides, \
      int64_t rank, int64_t axis, int64_t axisSize, int64_t *status, int64_t id);            \
  LIBJIT_EXPORT void libjit_gather_nd_##SUFFIX##_##ISUFFIX(                                  \
      T *dst, const T *src, const I *idx, int64_t tuples, int64_t perBatch,                  \
      int64_t batchStride, int64_t k, const int64_t *dims, const int64_t *strides,           \
      int64_t slice, int64_t *status, int64_t id);
#define LIBJIT_DECLARE_GATHER_IDXS(SUFFIX, T)                                               \
  LIBJIT_DECLARE_GATHER_IDX(SUFFIX, T, i32, int32_t)                                         \
  LIBJIT_DECLARE_GATHER_IDX(SUFFIX, T, i64, int64_t)
LIBJIT_DECLARE_GATHER_IDXS(u8, uint8_t)
LIBJIT_DECLARE_GATHER_IDXS(u16, uint16_t)
LIBJIT_DECLARE_GATHER_IDXS(u32, uint32_t)
LIBJIT_DECLARE_GATHER_IDXS(u64, uint64_t)
#undef LIBJIT_DECLARE_GATHER_IDXS
#undef LIBJIT_DECLARE_GATHER_IDX
/// ScatterElements / ScatterND into dst (already holding Data); red 0 none, 1 add, 2 mul,
/// 3 max, 4 min; bool is Bool (add/max OR, mul/min AND); u16 (16-bit floats) replaces only.
#define LIBJIT_DECLARE_SCATTER(SUFFIX, T, ISUFFIX, I)                                       \
  LIBJIT_EXPORT void libjit_scatter_elements_##SUFFIX##_##ISUFFIX(                           \
      T *dst, const I *idx, const T *upd, const int64_t *idxDims, const int64_t *dstStrides, \
      int64_t rank, int64_t axis, int64_t axisSize, int64_t red, int64_t *status,            \
      int64_t id);                                                                           \
  LIBJIT_EXPORT void libjit_scatter_nd_##SUFFIX##_##ISUFFIX(                                 \
      T *dst, const I *idx, const T *upd, int64_t tuples, int64_t k, const int64_t *dims,    \
      const int64_t *strides, int64_t slice, int64_t red, int64_t *status, int64_t id);
#define LIBJIT_DECLARE_SCATTERS(SUFFIX, T)                                                  \
  LIBJIT_DECLARE_SCATTER(SUFFIX, T, i32, int32_t)                                            \
  LIBJIT_DECLARE_SCATTER(SUFFIX, T, i64, int64_t)
LIBJIT_DECLARE_SCATTERS(f32, float)
LIBJIT_DECLARE_SCATTERS(i32, int32_t)
LIBJIT_DECLARE_SCATTERS(i64, int64_t)
LIBJIT_DECLARE_SCATTERS(bool, uint8_t)
LIBJIT_DECLARE_SCATTERS(u16, uint16_t)
#undef LIBJIT_DECLARE_SCATTERS
#undef LIBJIT_DECLARE_SCATTER
/// CumSum along the middle dim of [outer, size, inner] (dst may be src); integers wrap.
LIBJIT_EXPORT void libjit_cumsum_f32(float *dst, const float *src, int64_t outer, int64_t size,
                                     int64_t inner, int64_t exclusive, int64_t reverse);
LIBJIT_EXPORT void libjit_cumsum_i32(int32_t *dst, const int32_t *src, int64_t outer,
                                     int64_t size, int64_t inner, int64_t exclusive,
                                     int64_t reverse);
LIBJIT_EXPORT void libjit_cumsum_i64(int64_t *dst, const int64_t *src, int64_t outer,
                                     int64_t size, int64_t inner, int64_t exclusive,
                                     int64_t reverse);

/// GridSample (libjit_sample.cpp): mode 0 bilinear, 1 nearest, 2 bicubic; pad 0 zeros,
/// 1 border, 2 reflection.
LIBJIT_EXPORT void libjit_grid_sample_f32(float *dst, const float *src, const float *grid,
                                          int64_t N, int64_t C, int64_t H, int64_t W,
                                          int64_t oH, int64_t oW, int64_t mode, int64_t pad,
                                          int64_t alignCorners);

/// RoiAlign (libjit_sample.cpp); a batch index outside [0, N) sets status {id, region, index}.
#define LIBJIT_DECLARE_ROIALIGN(ISUFFIX, I)                                                 \
  LIBJIT_EXPORT void libjit_roi_align_f32_##ISUFFIX(                                         \
      float *dst, const float *src, const float *rois, const I *bidx, int64_t R, int64_t N,  \
      int64_t C, int64_t H, int64_t W, int64_t oH, int64_t oW, int64_t ratio, double scale,  \
      int64_t halfPixel, int64_t isMax, int64_t *status, int64_t id);
LIBJIT_DECLARE_ROIALIGN(i32, int32_t)
LIBJIT_DECLARE_ROIALIGN(i64, int64_t)
#undef LIBJIT_DECLARE_ROIALIGN

// Reductions, ArgMax/ArgMin and TopK (libjit_reduce.cpp).
#define LIBJIT_DECLARE_REDUCE(NAME, SUFFIX, T)                                              \
  LIBJIT_EXPORT void libjit_reduce_##NAME##_##SUFFIX(T *dst, const T *src,                  \
                                                     const int64_t *dims,                    \
                                                     const int64_t *dstStrides,              \
                                                     int64_t rank, int64_t dstSize, T init);
#define LIBJIT_DECLARE_REDUCES(SUFFIX, T)                                                   \
  LIBJIT_DECLARE_REDUCE(sum, SUFFIX, T)                                                      \
  LIBJIT_DECLARE_REDUCE(max, SUFFIX, T)                                                      \
  LIBJIT_DECLARE_REDUCE(min, SUFFIX, T)                                                      \
  LIBJIT_DECLARE_REDUCE(prod, SUFFIX, T)
LIBJIT_DECLARE_REDUCES(f32, float)
LIBJIT_DECLARE_REDUCES(i32, int32_t)
LIBJIT_DECLARE_REDUCES(i64, int64_t)
#undef LIBJIT_DECLARE_REDUCES
#undef LIBJIT_DECLARE_REDUCE
LIBJIT_EXPORT void libjit_scale_f32(float *dst, int64_t n, float s);
/// ArgMax/ArgMin along the middle axis of [outer, size, inner] (first index on ties);
/// TopK of each of `rows` rows of n: k values descending, equal values by ascending index.
#define LIBJIT_DECLARE_ORDER(SUFFIX, T)                                                     \
  LIBJIT_EXPORT void libjit_argmax_##SUFFIX(int64_t *dst, const T *src, int64_t outer,      \
                                            int64_t size, int64_t inner);                    \
  LIBJIT_EXPORT void libjit_argmin_##SUFFIX(int64_t *dst, const T *src, int64_t outer,      \
                                            int64_t size, int64_t inner);                    \
  LIBJIT_EXPORT void libjit_topk_##SUFFIX(T *values, int64_t *indices, const T *src,        \
                                          int64_t rows, int64_t n, int64_t k);
LIBJIT_DECLARE_ORDER(f32, float)
LIBJIT_DECLARE_ORDER(i32, int32_t)
LIBJIT_DECLARE_ORDER(i64, int64_t)
LIBJIT_DECLARE_ORDER(i8, int8_t)
#undef LIBJIT_DECLARE_ORDER

// Quantization (libjit_quant.cpp): real = scale * (q - offset), in double, rounding half
// away from zero and saturating; each thread takes a share of the n elements.
#define LIBJIT_DECLARE_QUANT(SUFFIX, T)                                                     \
  LIBJIT_EXPORT void libjit_quantize_f32_##SUFFIX(T *dst, const float *src, int64_t n,      \
                                                  float scale, int32_t offset, int64_t tid,  \
                                                  int64_t nthreads);                         \
  LIBJIT_EXPORT void libjit_dequantize_##SUFFIX##_f32(float *dst, const T *src, int64_t n,  \
                                                      float scale, int32_t offset,           \
                                                      int64_t tid, int64_t nthreads);        \
  LIBJIT_EXPORT void libjit_rescale_##SUFFIX(T *dst, const T *src, int64_t n, float inScale, \
                                             int32_t inOffset, float outScale,               \
                                             int32_t outOffset, int64_t tid,                 \
                                             int64_t nthreads);                              \
  LIBJIT_EXPORT void libjit_strided_rescale_##SUFFIX(                                        \
      T *dst, const T *src, const int64_t *dims, const int64_t *dstStrides,                  \
      const int64_t *srcStrides, int64_t rank, float inScale, int32_t inOffset,              \
      float outScale, int32_t outOffset);
LIBJIT_DECLARE_QUANT(i8, int8_t)
LIBJIT_DECLARE_QUANT(u8, uint8_t)
LIBJIT_DECLARE_QUANT(i32, int32_t)
#undef LIBJIT_DECLARE_QUANT

// Normalizations (libjit_norm.cpp).
LIBJIT_EXPORT void libjit_softmax_f32(float *dst, const float *src, int64_t outer,
                                      int64_t axis, int64_t inner, int64_t logForm,
                                      int64_t tid, int64_t nthreads);
/// Thread tid of nthreads normalises its share of the outer x channels planes.
LIBJIT_EXPORT void libjit_batchnorm_f32(float *dst, const float *src, const float *scale,
                                        const float *bias, const float *mean, const float *var,
                                        float eps, int64_t outer, int64_t channels,
                                        int64_t inner, int64_t tid, int64_t nthreads);
LIBJIT_EXPORT void libjit_layernorm_f32(float *dst, const float *src, const float *scale,
                                        const float *bias, int64_t outer, int64_t inner,
                                        float eps, int64_t tid, int64_t nthreads);
LIBJIT_EXPORT void libjit_batchedadd_f32(float *dst, const float *batch, const float *slice,
                                         int64_t n, int64_t sliceSize);

// Pooling (libjit_pool.cpp).
/// Floats of scratch per thread of libjit_maxpool_f32 and libjit_avgpool_f32 (a padded row
/// and per-column divisors).
LIBJIT_EXPORT int64_t libjit_pool_scratch_floats(int64_t H, int64_t W, int64_t OH, int64_t OW,
                                                 int64_t KH, int64_t KW, int64_t SH, int64_t SW,
                                                 int64_t DH, int64_t DW);
LIBJIT_EXPORT void libjit_maxpool_f32(float *dst, const float *src, int64_t N, int64_t C,
                                      int64_t H, int64_t W, int64_t OH, int64_t OW, int64_t KH,
                                      int64_t KW, int64_t SH, int64_t SW, int64_t PT,
                                      int64_t PL, float *scratch, int64_t tid,
                                      int64_t nthreads);
LIBJIT_EXPORT void libjit_avgpool_f32(float *dst, const float *src, int64_t N, int64_t C,
                                      int64_t H, int64_t W, int64_t OH, int64_t OW, int64_t KH,
                                      int64_t KW, int64_t SH, int64_t SW, int64_t PT,
                                      int64_t PL, int64_t countIncludePads, float *scratch,
                                      int64_t tid, int64_t nthreads);
/// Integer MaxPool: the largest in-bounds element of each window (the kind's minimum for a
/// window wholly in the padding), planes split between threads.
#define LIBJIT_DECLARE_INT_MAXPOOL(K, T)                                                    \
  LIBJIT_EXPORT void libjit_maxpool_##K(T *dst, const T *src, int64_t N, int64_t C,         \
                                        int64_t H, int64_t W, int64_t OH, int64_t OW,       \
                                        int64_t KH, int64_t KW, int64_t SH, int64_t SW,     \
                                        int64_t PT, int64_t PL, int64_t tid,                \
                                        int64_t nthreads);
LIBJIT_DECLARE_INT_MAXPOOL(i32, int32_t)
LIBJIT_DECLARE_INT_MAXPOOL(i64, int64_t)
#undef LIBJIT_DECLARE_INT_MAXPOOL
LIBJIT_EXPORT void libjit_adaptive_avgpool_f32(float *dst, const float *src, int64_t N,
                                               int64_t C, int64_t H, int64_t W, int64_t OH,
                                               int64_t OW, int64_t tid, int64_t nthreads);

// Depthwise convolution (libjit_conv.cpp).
/// Floats of scratch per thread of libjit_conv2d_dw_f32 (padded rows or a padded plane).
LIBJIT_EXPORT int64_t libjit_conv2d_dw_scratch_floats(int64_t H, int64_t W, int64_t OH,
                                                      int64_t OW, int64_t KH, int64_t KW,
                                                      int64_t SH, int64_t SW, int64_t DH,
                                                      int64_t DW);
LIBJIT_EXPORT void libjit_conv2d_dw_f32(float *out, const float *in, const float *filter,
                                        const float *bias, int64_t N, int64_t C, int64_t H,
                                        int64_t W, int64_t OH, int64_t OW, int64_t KH,
                                        int64_t KW, int64_t SH, int64_t SW, int64_t PT,
                                        int64_t PL, int64_t DH, int64_t DW, int64_t act,
                                        float lo, float hi, float *scratch, int64_t tid,
                                        int64_t nthreads);

// Dilation phases (libjit_conv.cpp): a stride-1 convolution dilated by (DH, DW) computed
// as DH DW undilated ones over the input's phase sub-images (EmitConv.cpp).
/// dst [N][DH][DW][C][Hp][Wp] = the phase planes of src [N][C][H][W]: phase (r, s) row j,
/// column k is src row r - eH + DH j, column s - eW + DW k, zero outside the image. Work
/// split over the N C input planes.
LIBJIT_EXPORT void libjit_conv_phase_split_f32(float *dst, const float *src, int64_t N,
                                               int64_t C, int64_t H, int64_t W, int64_t DH,
                                               int64_t DW, int64_t eH, int64_t eW, int64_t Hp,
                                               int64_t Wp, int64_t tid, int64_t nthreads);
/// dst [N][O][OH][OW]: output row r + DH i, column s + DW k is src [N][DH][DW][O][OHp][OWp]
/// phase (r, s) row i, column k (OHp >= ceil(OH / DH), OWp >= ceil(OW / DW)). Work split
/// over the N O output planes.
LIBJIT_EXPORT void libjit_conv_phase_merge_f32(float *dst, const float *src, int64_t N,
                                               int64_t O, int64_t OH, int64_t OW, int64_t DH,
                                               int64_t DW, int64_t OHp, int64_t OWp,
                                               int64_t tid, int64_t nthreads);

// Grouped convolution (libjit_conv.cpp): 1 < G, Cg = C / G, Og = O / G per group.
/// Floats of scratch per thread of libjit_conv2d_grouped_f32_*.
LIBJIT_EXPORT int64_t libjit_conv2d_grouped_scratch_floats(int64_t Cg, int64_t Og, int64_t OH,
                                                           int64_t OW, int64_t KH, int64_t KW,
                                                           int64_t SH, int64_t SW, int64_t DH,
                                                           int64_t DW);
namespace libjit {
/// Whether a grouped layer's shape takes the lanes path on AVX-512 (libjit_conv.cpp; the
/// cost model, ConvCost.cpp, estimates the same path from this): 32 output channels per
/// group, or 16 on rows of at most 16 outputs, at column stride 2, or, for kernel rows of
/// 3 undilated taps (the row-of-3 tiles), on rows of at most 28; column stride 1 or 2 and
/// rows of 7 or more. With 16 per group on wider rows the cell tiles measured faster (each
/// broadcast weight there feeds two vectors of outputs; here each broadcast input value
/// feeds one vector of 16 channels, or three with the row-of-3 tiles, whose [P][16]
/// results and padded planes outgrow L2 at 56x56). At stride 2 the cell tiles read four
/// phase planes per channel once per tile of 8 output channels (twice per group with 16),
/// the lanes path the padded planes once per group.
constexpr bool groupedLanesShape(int64_t Og, int64_t OW, int64_t KW, int64_t SW, int64_t DW) {
  const bool row3 = KW == 3 && DW == 1;
  const bool og16 = Og == 16 && (OW <= 16 || SW == 2 || (row3 && OW <= 28));
  return (Og == 32 || og16) && OW >= 7 && (SW == 1 || SW == 2);
}
/// Whether the lanes path runs a grouped layer: its shape (groupedLanesShape) on AVX-512
/// (vector width 16), with top and left pads not negative.
constexpr bool groupedLanesPath(int64_t VW, int64_t Og, int64_t OW, int64_t KW, int64_t SW,
                                int64_t DW, int64_t PT, int64_t PL) {
  return VW == 16 && groupedLanesShape(Og, OW, KW, SW, DW) && PT >= 0 && PL >= 0;
}
/// The most padded pixels (Hp Wp) of a plane the int8 depthwise kernel runs with channels
/// as lanes (libjit_qconv_impl.h, dwLanesRun): its int32 plane of L lanes per pixel stays
/// within L1.
constexpr int64_t kDwLanesMaxPixels = 324;
/// Whether an int8 depthwise layer of KK taps on padded planes of Hp x Wp takes the lanes
/// path (on ISAs that have it); the emitter reserves its scratch from the same test.
constexpr bool dwLanesShape(int64_t KK, int64_t Hp, int64_t Wp) {
  return KK <= 64 && Hp * Wp <= kDwLanesMaxPixels;
}
/// Bytes of the lanes path's scratch: the padded plane (Hp Wp pixels of L int32), then the
/// output vectors (OH OW pixels rounded up to 4L, of L int32).
constexpr int64_t dwLanesScratch(int64_t Hp, int64_t Wp, int64_t OH, int64_t OW, int64_t L) {
  return (Hp * Wp + (OH * OW + 4 * L - 1) / (4 * L) * 4 * L) * L * 4;
}
} // namespace libjit
/// dst [G][K][Og] = filter [G][Og][K] (K = Cg KH KW): the grouped kernel's weights.
LIBJIT_EXPORT void libjit_pack_grouped_f32(float *dst, const float *filter, int64_t G,
                                           int64_t Og, int64_t K);
#define LIBJIT_DECLARE_GROUPED(SUFFIX)                                                       \
  LIBJIT_EXPORT void libjit_conv2d_grouped_f32_##SUFFIX(                                     \
      float *out, const float *in, const float *packedW, const float *bias, const float *add, \
      int64_t N, int64_t C, int64_t H, int64_t W, int64_t O, int64_t OH, int64_t OW,          \
      int64_t KH, int64_t KW, int64_t SH, int64_t SW, int64_t PT, int64_t PL, int64_t DH,     \
      int64_t DW, int64_t G, int64_t act, float lo, float hi, float *scratch, int64_t tid,    \
      int64_t nthreads);
LIBJIT_DECLARE_GROUPED(avx512)
LIBJIT_DECLARE_GROUPED(avx2)
#undef LIBJIT_DECLARE_GROUPED

#endif // KILN_BACKENDS_CPU_LIBJIT_LIBJIT_H
