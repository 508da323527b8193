// Element-wise float32 operators as scalar functions. The backend fuses chains of
// element-wise instructions into one loop that calls these; after inlining, LLVM
// vectorizes the loop for the host. Semantics follow src/ClassGen/NodeTable.cpp.
#include "libjit.h"

namespace {
inline float sigmoidf(float x) { return 1.0f / (1.0f + __builtin_expf(-x)); }
} // namespace

// NaN propagates through Relu, Max and Min (as in the Interpreter).
LIBJIT_EXPORT float libjit_elem_relu_f32(float x) { return x < 0.0f ? 0.0f : x; }
LIBJIT_EXPORT float libjit_elem_sigmoid_f32(float x) { return sigmoidf(x); }
LIBJIT_EXPORT float libjit_elem_tanh_f32(float x) { return __builtin_tanhf(x); }
LIBJIT_EXPORT float libjit_elem_gelu_f32(float x) {
  return 0.5f * x * (1.0f + __builtin_erff(x * 0.70710678118654752f));
}
LIBJIT_EXPORT float libjit_elem_gelu_tanh_f32(float x) {
  const float k = 0.79788456080286536f; // sqrt(2/pi)
  return 0.5f * x * (1.0f + __builtin_tanhf(k * (x + 0.044715f * x * x * x)));
}
LIBJIT_EXPORT float libjit_elem_hardswish_f32(float x) {
  float t = x + 3.0f;
  t = t < 0.0f ? 0.0f : t;
  t = t > 6.0f ? 6.0f : t;
  return x * t / 6.0f;
}
LIBJIT_EXPORT float libjit_elem_swish_f32(float x) { return x * sigmoidf(x); }
LIBJIT_EXPORT float libjit_elem_clip_f32(float x, float lo, float hi) {
  x = x < lo ? lo : x;
  return x > hi ? hi : x;
}
LIBJIT_EXPORT float libjit_elem_leakyrelu_f32(float x, float alpha) {
  return x >= 0.0f ? x : alpha * x;
}
LIBJIT_EXPORT float libjit_elem_neg_f32(float x) { return -x; }
LIBJIT_EXPORT float libjit_elem_abs_f32(float x) { return __builtin_fabsf(x); }
LIBJIT_EXPORT float libjit_elem_exp_f32(float x) { return __builtin_expf(x); }
LIBJIT_EXPORT float libjit_elem_log_f32(float x) { return __builtin_logf(x); }
LIBJIT_EXPORT float libjit_elem_sqrt_f32(float x) { return __builtin_sqrtf(x); }
LIBJIT_EXPORT float libjit_elem_rsqrt_f32(float x) { return 1.0f / __builtin_sqrtf(x); }
LIBJIT_EXPORT float libjit_elem_reciprocal_f32(float x) { return 1.0f / x; }
LIBJIT_EXPORT float libjit_elem_erf_f32(float x) { return __builtin_erff(x); }
LIBJIT_EXPORT float libjit_elem_floor_f32(float x) { return __builtin_floorf(x); }
LIBJIT_EXPORT float libjit_elem_ceil_f32(float x) { return __builtin_ceilf(x); }
LIBJIT_EXPORT float libjit_elem_round_f32(float x) { return __builtin_rintf(x); }

LIBJIT_EXPORT float libjit_elem_add_f32(float a, float b) { return a + b; }
LIBJIT_EXPORT float libjit_elem_sub_f32(float a, float b) { return a - b; }
LIBJIT_EXPORT float libjit_elem_mul_f32(float a, float b) { return a * b; }
LIBJIT_EXPORT float libjit_elem_div_f32(float a, float b) { return a / b; }
LIBJIT_EXPORT float libjit_elem_max_f32(float a, float b) { return a > b || a != a ? a : b; }
LIBJIT_EXPORT float libjit_elem_min_f32(float a, float b) { return a < b || a != a ? a : b; }
LIBJIT_EXPORT float libjit_elem_pow_f32(float a, float b) { return __builtin_powf(a, b); }
LIBJIT_EXPORT float libjit_elem_prelu_f32(float x, float slope) {
  return x >= 0.0f ? x : slope * x;
}
