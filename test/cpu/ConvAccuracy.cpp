#include "ConvAccuracy.h"

#include "backends/CPU/CPUBackend.h"
#include "backends/CPU/ThreadPool.h"
#include "backends/CPU/codegen/Codegen.h"
#include "kiln/Backend/Compiler.h"
#include "kiln/kiln.h"
#include "test/cpu/ConvBenchBuild.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace kiln::cpu::accuracy {

Data makeData(const Layer &l, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> z(0.0, 1.0);
  Data d;
  d.x.resize(l.C * l.H * l.H);
  for (float &v : d.x)
    v = float(std::max(0.0, z(rng)));
  d.w.resize(l.O * l.C * 9);
  double sd = std::sqrt(2.0 / double(9 * l.C));
  for (float &v : d.w)
    v = float(sd * z(rng));
  // The reference: every product and sum in double, from the float inputs.
  const int64_t H = l.H, C = l.C;
  d.ref.assign(l.O * H * H, 0.0);
  std::vector<double> xd(d.x.begin(), d.x.end());
  for (int64_t o = 0; o < l.O; o++) {
    double *out = d.ref.data() + o * H * H;
    for (int64_t c = 0; c < C; c++) {
      const double *plane = xd.data() + c * H * H;
      for (int64_t kh = 0; kh < 3; kh++)
        for (int64_t kw = 0; kw < 3; kw++) {
          double wv = d.w[(o * C + c) * 9 + kh * 3 + kw];
          for (int64_t y = 0; y < H; y++) {
            int64_t iy = y + kh - 1;
            if (iy < 0 || iy >= H)
              continue;
            for (int64_t x = 0; x < H; x++) {
              int64_t ix = x + kw - 1;
              if (ix >= 0 && ix < H)
                out[y * H + x] += wv * plane[iy * H + ix];
            }
          }
        }
    }
  }
  return d;
}

ErrorStats measure(const std::vector<float> &y, const std::vector<double> &ref) {
  double maxRef = 0, maxErr = 0, sumRef = 0, sumErr = 0;
  for (size_t i = 0; i < ref.size(); i++) {
    double e = double(y[i]) - ref[i];
    maxRef = std::max(maxRef, std::fabs(ref[i]));
    maxErr = std::max(maxErr, std::fabs(e));
    sumRef += ref[i] * ref[i];
    sumErr += e * e;
  }
  ErrorStats s;
  s.maxRel = maxRef > 0 ? maxErr / maxRef : maxErr;
  s.rmsRel = sumRef > 0 ? std::sqrt(sumErr / sumRef) : std::sqrt(sumErr);
  return s;
}

std::vector<float> naiveFloat(const Layer &l, const Data &d) {
  const int64_t H = l.H, C = l.C;
  std::vector<float> y(l.O * H * H);
  for (int64_t o = 0; o < l.O; o++)
    for (int64_t oy = 0; oy < H; oy++)
      for (int64_t ox = 0; ox < H; ox++) {
        float s = 0;
        for (int64_t c = 0; c < C; c++)
          for (int64_t kh = 0; kh < 3; kh++)
            for (int64_t kw = 0; kw < 3; kw++) {
              int64_t iy = oy + kh - 1, ix = ox + kw - 1;
              if (iy >= 0 && iy < H && ix >= 0 && ix < H)
                s += d.w[(o * C + c) * 9 + kh * 3 + kw] * d.x[(c * H + iy) * H + ix];
            }
        y[(o * H + oy) * H + ox] = s;
      }
  return y;
}

std::vector<float> runCPU(const Layer &l, const Data &d, std::optional<ConvAlgorithm> a,
                          unsigned threads, bool noAvx512, std::string *chosen) {
  const dim_t C = dim_t(l.C), O = dim_t(l.O), H = dim_t(l.H);
  Module m;
  Function *F = m.createFunction("main");
  auto *x = m.createPlaceholder(ElemKind::Float, {1, C, H, H}, "x");
  Tensor wt(ElemKind::Float, {O, C, 3, 3}), bt(ElemKind::Float, {O});
  std::copy(d.w.begin(), d.w.end(), wt.getHandle<float>().begin());
  bt.getHandle<float>().fill(0.0f);
  auto *w = m.createConstant("w", std::move(wt));
  auto *b = m.createConstant("b", std::move(bt));
  auto *conv = F->createConvolution("c", x, w, b, {3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, 1);
  auto *save = F->createSave("y", conv);
  CodegenOptions co;
  co.threads = threads;
  co.forceConv = a;
  co.jit.disableAvx512 = noAvx512;
  bench::BuiltConv built = bench::buildConv(F, co);
  if (chosen)
    *chosen = built.kernel;
  PlaceholderBindings bind;
  bind.allocate(m.getPlaceholders());
  std::copy(d.x.begin(), d.x.end(), bind.get(x)->getHandle<float>().begin());
  ExecutionContext ctx(&bind);
  exitOnError(built.fn->execute(ctx), "run");
  auto h = bind.get(save->getPlaceholder())->getHandle<float>();
  return std::vector<float>(h.begin(), h.end());
}

} // namespace kiln::cpu::accuracy
