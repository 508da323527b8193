// Ahead-of-time bundles end to end: the digits model compiled by kiln-compile (through the
// kiln_bundle rule) for AVX-512, AVX2, SSE2, two threads and with embedded weights, run by
// plain C programs, against the CPU backend's JIT on the same target and thread count (bit
// for bit) and the Interpreter (BENCH.md's tolerance); what the objects need from outside
// (nm, ldd); kiln-compile's errors leave no files behind.
#include "backends/CPU/bundle/Bundle.h"
#include "kiln/Importer/ONNX.h"
#include "kiln/kiln.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <vector>

namespace {

using namespace kiln;

const char *kModel = "examples/digits/digits.onnx";

std::string tmpPath(const std::string &name) {
  const char *t = std::getenv("TEST_TMPDIR");
  return std::string(t ? t : "/tmp") + "/" + name;
}

struct Result {
  int exitCode = -1;
  std::string out, err;
};

Result sh(const std::string &cmd) {
  std::string errPath = tmpPath("stderr.txt");
  Result r;
  FILE *p = popen((cmd + " 2>" + errPath).c_str(), "r");
  if (!p)
    return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0)
    r.out.append(buf, n);
  int st = pclose(p);
  r.exitCode = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  std::ifstream e(errPath);
  std::stringstream ss;
  ss << e.rdbuf();
  r.err = ss.str();
  return r;
}

std::vector<float> parseHexFloats(const std::string &line) {
  std::vector<float> v;
  std::istringstream is(line);
  std::string w;
  is >> w; // the label
  while (is >> w)
    v.push_back(std::strtof(w.c_str(), nullptr));
  return v;
}

/// The digits model compiled once per (backend, options) and run on one 1x1x8x8 input.
class Digits {
public:
  Digits(const std::string &backend, CompileOptions opts) : ee_(backend) {
    Function *f = ee_.getModule().createFunction("main");
    ONNXLoadOptions lo;
    lo.inputShapes["image"] = {1, 1, 8, 8};
    Expected<ONNXModel> m = loadONNX(kModel, f, lo);
    if (!m) {
      error_ = m.takeError().toString();
      return;
    }
    in_ = m->getInput("image");
    out_ = m->getOutputPlaceholder("logits");
    if (Error e = ee_.compile(opts))
      error_ = e.toString();
    b_.allocate(ee_.getModule().getPlaceholders());
  }
  const std::string &error() const { return error_; }
  std::vector<float> run(const std::vector<float> &x) {
    Tensor *t = b_.get(in_);
    std::memcpy(t->getUnsafePtr(), x.data(), x.size() * 4);
    if (Error e = ee_.run(b_))
      return {};
    const Tensor *y = b_.get(out_);
    std::vector<float> v(y->getType().numElements());
    std::memcpy(v.data(), y->getUnsafePtr(), v.size() * 4);
    return v;
  }

private:
  ExecutionEngine ee_;
  PlaceholderBindings b_;
  Placeholder *in_ = nullptr, *out_ = nullptr;
  std::string error_;
};

CompileOptions cpuOptions(bool avx512, unsigned threads) {
  CompileOptions o;
  o.threads = threads;
  o.backendOptions["avx512"] = avx512 ? "1" : "0";
  return o;
}

bool hostHasAvx512() { return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                              __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"); }

/// BENCH.md's tolerance against the reference.
void expectClose(const std::vector<float> &got, const std::vector<float> &ref, const std::string &what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  float maxRef = 0;
  for (float r : ref)
    maxRef = std::max(maxRef, std::fabs(r));
  for (size_t i = 0; i < got.size(); i++)
    EXPECT_LE(std::fabs(got[i] - ref[i]), 1e-4f * maxRef + 1e-3f * std::fabs(ref[i]))
        << what << " logit " << i << ": " << got[i] << " vs " << ref[i];
}

void expectBitEqual(const std::vector<float> &got, const std::vector<float> &ref,
                    const std::string &what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  for (size_t i = 0; i < got.size(); i++) {
    uint32_t a, b;
    std::memcpy(&a, &got[i], 4);
    std::memcpy(&b, &ref[i], 4);
    EXPECT_EQ(a, b) << what << " logit " << i << ": " << got[i] << " vs " << ref[i];
  }
}

/// The example program on the ten shipped digits: its classes and its exact inputs and
/// logits (hex floats).
struct ExampleRun {
  std::vector<int> digits;
  std::vector<std::vector<float>> inputs, logits;
  std::string error;
};

const ExampleRun &exampleRun() {
  static const ExampleRun run = [] {
    ExampleRun r;
    std::string cmd = "examples/bundle/classify_digit --weights examples/bundle/digits.weights --logits";
    for (int d = 0; d < 10; d++)
      cmd += " examples/digits/images/digit_" + std::to_string(d) + "_0.png";
    Result res = sh(cmd);
    if (res.exitCode != 0) {
      r.error = "classify_digit failed: " + res.err;
      return r;
    }
    std::istringstream is(res.out);
    std::string line;
    while (std::getline(is, line)) {
      if (line.rfind("input ", 0) == 0)
        r.inputs.push_back(parseHexFloats(line));
      else if (line.rfind("logits ", 0) == 0)
        r.logits.push_back(parseHexFloats(line));
      else if (size_t c = line.rfind(": "); c != std::string::npos)
        r.digits.push_back(std::atoi(line.c_str() + c + 2));
    }
    return r;
  }();
  return run;
}

/// Inputs for the bundles: the ten digits and random images in [-1, 1].
std::vector<std::vector<float>> testInputs() {
  std::vector<std::vector<float>> xs = exampleRun().inputs;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int k = 0; k < 6; k++) {
    std::vector<float> x(64);
    for (float &v : x)
      v = u(rng);
    xs.push_back(x);
  }
  return xs;
}

/// Runs runner \p prog (run_bundle.c linked with a bundle) with weights \p weights on \p x.
std::vector<float> runBundle(const std::string &prog, const std::string &weights,
                             const std::vector<float> &x, std::string *err) {
  std::string in = tmpPath("in.bin"), out = tmpPath("out.bin");
  {
    std::ofstream f(in, std::ios::binary);
    f.write(reinterpret_cast<const char *>(x.data()), std::streamsize(x.size() * 4));
  }
  std::remove(out.c_str());
  Result r = sh(prog + " " + weights + " " + in + " -o " + out);
  if (r.exitCode != 0) {
    *err = prog + " failed (" + std::to_string(r.exitCode) + "): " + r.err;
    return {};
  }
  std::ifstream f(out, std::ios::binary);
  std::vector<float> y(10);
  f.read(reinterpret_cast<char *>(y.data()), 40);
  if (f.gcount() != 40)
    *err = prog + " wrote no logits";
  return y;
}

TEST(BundleTest, ExampleClassifiesEveryDigitAsTheJitAndInterpreterDo) {
  const ExampleRun &r = exampleRun();
  ASSERT_TRUE(r.error.empty()) << r.error;
  ASSERT_EQ(r.digits.size(), 10u);
  ASSERT_EQ(r.inputs.size(), 10u);
  ASSERT_EQ(r.logits.size(), 10u);
  // examples/bundle's bundle is x86-64-v3: the JIT's AVX2 kernels, one thread.
  Digits jit("CPU", cpuOptions(false, 1));
  ASSERT_TRUE(jit.error().empty()) << jit.error();
  Digits ref("Interpreter", {});
  ASSERT_TRUE(ref.error().empty()) << ref.error();
  for (int d = 0; d < 10; d++) {
    EXPECT_EQ(r.digits[d], d);
    ASSERT_EQ(r.inputs[d].size(), 64u);
    expectBitEqual(r.logits[d], jit.run(r.inputs[d]), "digit " + std::to_string(d) + " vs JIT");
    expectClose(r.logits[d], ref.run(r.inputs[d]), "digit " + std::to_string(d) + " vs Interpreter");
  }
}

struct Variant {
  const char *name;
  bool avx512;     ///< the kernels' ISA (and the JIT's to compare with)
  unsigned threads;
  bool embedded;
  /// False for x86-64 (SSE2): it has no FMA, so its products and sums round separately
  /// where the AVX2 JIT fuses them; it is held to the Interpreter's tolerance only.
  bool bitExact = true;
};

const Variant kVariants[] = {
    {"digits_v4", true, 1, false},  {"digits_v3", false, 1, false},
    {"digits_sse", false, 1, false, false}, {"digits_t2", true, 2, false},
    {"digits_emb", false, 1, true},
};

TEST(BundleTest, BundlesMatchTheJitBitForBitOnTheSameTarget) {
  ASSERT_TRUE(exampleRun().error.empty()) << exampleRun().error;
  std::vector<std::vector<float>> xs = testInputs();
  ASSERT_EQ(xs.size(), 16u);
  Digits ref("Interpreter", {});
  for (const Variant &v : kVariants) {
    if (v.avx512 && !hostHasAvx512()) {
      std::printf("skipping %s: no AVX-512 on this host\n", v.name);
      continue;
    }
    SCOPED_TRACE(v.name);
    Digits jit("CPU", cpuOptions(v.avx512, v.threads));
    ASSERT_TRUE(jit.error().empty()) << jit.error();
    std::string prog = std::string("test/bundle/run_") + v.name;
    std::string weights = v.embedded ? "-" : std::string("test/bundle/") + v.name + ".weights";
    for (size_t k = 0; k < xs.size(); k++) {
      std::string err;
      std::vector<float> y = runBundle(prog, weights, xs[k], &err);
      ASSERT_TRUE(err.empty()) << err;
      if (v.bitExact)
        expectBitEqual(y, jit.run(xs[k]), std::string(v.name) + " input " + std::to_string(k));
      expectClose(y, ref.run(xs[k]), std::string(v.name) + " input " + std::to_string(k));
    }
  }
}

/// Symbols of \p obj: nm's undefined ones, or its defined global ones.
std::set<std::string> symbols(const std::string &obj, bool undefined) {
  Result r = sh(std::string("nm ") + (undefined ? "-u " : "-g --defined-only ") + obj);
  std::set<std::string> s;
  std::istringstream is(r.out);
  std::string line;
  while (std::getline(is, line)) {
    std::istringstream ls(line);
    std::string a, b, c;
    ls >> a >> b >> c;
    s.insert(c.empty() ? b : c);
  }
  return s;
}

TEST(BundleTest, ObjectsExportOnlyTheEntryPointAndNeedOnlyLibc) {
  // What generated code may call: memory builtins and libm.
  const std::set<std::string> allowed = {"memcpy", "memset", "memmove", "expf", "logf", "tanhf",
                                      "erff", "powf", "sqrtf", "floorf", "ceilf", "roundf",
                                      "fmodf", "sinf", "cosf", "exp", "log", "pow", "fmaf"};
  for (const Variant &v : kVariants) {
    SCOPED_TRACE(v.name);
    std::string obj = std::string("test/bundle/") + v.name + ".o";
    std::set<std::string> undef = symbols(obj, true);
    for (const std::string &s : undef)
      EXPECT_TRUE(allowed.count(s)) << obj << " needs '" << s << "'";
    std::set<std::string> exported = symbols(obj, false);
    std::set<std::string> expected = {v.name};
    if (v.embedded)
      expected.insert(std::string(v.name) + "_weights");
    EXPECT_EQ(exported, expected);
    // The kernels are inside: the object defines the GEMM and convolution code itself.
    Result all = sh("nm " + obj);
    EXPECT_NE(all.out.find("libjit_"), std::string::npos) << "no kernel in " << obj;
  }
  // The Bazel-built programs need no shared library but libc's (libm's too for plain
  // x86-64, and libpng's for the example): no LLVM, no Kiln, no C++ runtime.
  // Built with a sanitizer (--config=asan or tsan), the programs also load its runtime and
  // what that runtime needs.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  const std::vector<std::string> sanitizerLibs = {"libasan.so", "libubsan.so", "libtsan.so",
                                                  "libm.so",    "libgcc_s.so", "libstdc++.so"};
#else
  const std::vector<std::string> sanitizerLibs;
#endif
  auto onlyLibs = [&](const std::string &exe, const std::vector<std::string> &allowed) {
    Result ldd = sh("ldd " + exe);
    ASSERT_EQ(ldd.exitCode, 0) << ldd.err;
    std::istringstream is(ldd.out);
    std::string line;
    while (std::getline(is, line)) {
      bool ok = false;
      for (const std::string &a : allowed)
        ok = ok || line.find(a) != std::string::npos;
      for (const std::string &a : sanitizerLibs)
        ok = ok || line.find(a) != std::string::npos;
      EXPECT_TRUE(ok) << exe << " needs " << line;
    }
  };
  const std::vector<std::string> libc = {"libc.so", "ld-linux", "vdso"};
  // Plain x86-64 has no FMA instruction: the kernels' fused multiply-adds (the polynomial
  // functions of the fused activations) are calls to libm's fmaf there.
  const std::vector<std::string> libcAndLibm = {"libc.so", "ld-linux", "vdso", "libm.so"};
  for (const Variant &v : kVariants)
    onlyLibs(std::string("test/bundle/run_") + v.name, v.bitExact ? libc : libcAndLibm);
  onlyLibs("examples/bundle/classify_digit",
           {"libc.so", "ld-linux", "vdso", "libpng16.so", "libz.so", "libm.so"});

  // A plain C compile and link with nothing but the object file and libc: it runs, and
  // needs no shared library but libc's.
  std::string exe = tmpPath("run_plain");
  Result cc = sh("cc -std=c11 -O2 -DBUNDLE=digits_v3 -DBUNDLE_UPPER=DIGITS_V3 "
                 "'-DBUNDLE_HEADER=\"digits_v3.h\"' -Itest/bundle test/bundle/run_bundle.c "
                 "test/bundle/digits_v3.o -o " + exe);
  if (cc.exitCode == 127) {
    std::printf("no C compiler on PATH: the plain link is not checked\n");
    return;
  }
  ASSERT_EQ(cc.exitCode, 0) << cc.err;
  onlyLibs(exe, libc);
  std::string err;
  std::vector<float> x = testInputs().back();
  std::vector<float> a = runBundle(exe, "test/bundle/digits_v3.weights", x, &err);
  ASSERT_TRUE(err.empty()) << err;
  std::vector<float> b = runBundle("test/bundle/run_digits_v3", "test/bundle/digits_v3.weights", x, &err);
  ASSERT_TRUE(err.empty()) << err;
  expectBitEqual(a, b, "plain link");
}

TEST(BundleTest, TwoBundlesLinkIntoOneCProgram) {
  // digits_v3 and digits_emb (the same code, weights embedded) side by side: only their
  // entry points and the embedded weights are global, and the headers share their types.
  std::string src = tmpPath("two.c"), exe = tmpPath("two");
  std::ofstream(src) << R"(#include "digits_v3.h"
#include "digits_emb.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(void) {
  uint8_t *c = aligned_alloc(64, DIGITS_V3_CONSTANTS_SIZE);
  uint8_t *m1 = aligned_alloc(64, DIGITS_V3_MUTABLES_SIZE), *m2 = aligned_alloc(64, DIGITS_EMB_MUTABLES_SIZE);
  uint8_t *a1 = aligned_alloc(64, DIGITS_V3_ACTIVATIONS_SIZE), *a2 = aligned_alloc(64, DIGITS_EMB_ACTIVATIONS_SIZE);
  FILE *f = fopen("test/bundle/digits_v3.weights", "rb");
  if (!f || fread(c, 1, DIGITS_V3_CONSTANTS_SIZE, f) != DIGITS_V3_CONSTANTS_SIZE) return 3;
  float *x1 = (float *)(m1 + DIGITS_V3_IMAGE_OFFSET), *x2 = (float *)(m2 + DIGITS_EMB_IMAGE_OFFSET);
  for (int i = 0; i < 64; i++) x1[i] = x2[i] = (float)(i % 9) / 4.0f - 1.0f;
  if (digits_v3(c, m1, a1) || digits_emb((uint8_t *)digits_emb_weights, m2, a2)) return 4;
  if (digits_v3(NULL, m1, a1) != -1) return 5;
  return memcmp(m1 + DIGITS_V3_LOGITS_OFFSET, m2 + DIGITS_EMB_LOGITS_OFFSET, DIGITS_V3_LOGITS_SIZE) ? 6 : 0;
}
)";
  Result cc = sh("cc -std=c11 -Wall -Werror -O2 -Itest/bundle " + src +
                 " test/bundle/digits_v3.o test/bundle/digits_emb.o -o " + exe);
  if (cc.exitCode == 127) {
    std::printf("no C compiler on PATH: not checked\n");
    return;
  }
  ASSERT_EQ(cc.exitCode, 0) << cc.err;
  Result run = sh(exe);
  EXPECT_EQ(run.exitCode, 0) << "3: no weights, 4: a run failed, 5: a null region was "
                                "accepted, 6: the two bundles disagree";
}

TEST(BundleTest, AFailedRunTimeCheckIsTheEntryPointsResult) {
  // Gather checks its indices at run time: the bundle returns 1 + the check's index, and
  // the header lists the check with the Interpreter's message.
  Module m;
  Function *f = m.createFunction("g");
  Placeholder *data = m.createPlaceholder(ElemKind::Float, {3, 2}, "data");
  Placeholder *idx = m.createPlaceholder(ElemKind::Int64I, {2}, "idx");
  SaveNode *s = f->createSave("y", f->createGather("lookup", data, idx, 0));
  std::string dir = tmpPath("gather");
  cpu::BundleOptions o;
  o.name = "gather";
  o.outDir = dir;
  o.target = "x86-64-v3";
  Expected<cpu::BundleResult> r =
      cpu::writeBundle(f, {{"data", data}, {"idx", idx}}, {{"y", s->getPlaceholder()}}, o);
  ASSERT_TRUE(bool(r)) << r.takeError().toString();
  std::ifstream h(dir + "/gather.h");
  std::stringstream hs;
  hs << h.rdbuf();
  EXPECT_NE(hs.str().find("1: Gather 'lookup'"), std::string::npos) << hs.str();
  std::string src = tmpPath("gather.c"), exe = tmpPath("gather_run");
  std::ofstream(src) << R"(#include "gather.h"
#include <stdio.h>
#include <stdlib.h>
int main(void) {
  uint8_t *c = aligned_alloc(64, GATHER_CONSTANTS_SIZE + 64), *m = aligned_alloc(64, GATHER_MUTABLES_SIZE);
  uint8_t *a = aligned_alloc(64, GATHER_ACTIVATIONS_SIZE);
  float *d = (float *)(m + GATHER_DATA_OFFSET), *y = (float *)(m + GATHER_Y_OFFSET);
  int64_t *i = (int64_t *)(m + GATHER_IDX_OFFSET);
  for (int k = 0; k < 6; k++) d[k] = (float)k;
  i[0] = 2; i[1] = 0;
  int ok = gather(c, m, a);
  printf("%d %g %g %g %g\n", ok, y[0], y[1], y[2], y[3]);
  i[1] = 3;
  printf("%d\n", gather(c, m, a));
  return 0;
}
)";
  Result cc = sh("cc -std=c11 -O2 -I" + dir + " " + src + " " + dir + "/gather.o -o " + exe);
  if (cc.exitCode == 127) {
    std::printf("no C compiler on PATH: not checked\n");
    return;
  }
  ASSERT_EQ(cc.exitCode, 0) << cc.err;
  Result run = sh(exe);
  ASSERT_EQ(run.exitCode, 0) << run.err;
  EXPECT_EQ(run.out, "0 4 5 0 1\n1\n");
}

/// How many instructions of \p obj's disassembly match the extended regular expression
/// \p re, or -1 without objdump.
int countInstructions(const std::string &obj, const std::string &re) {
  Result r = sh("objdump -d --no-show-raw-insn " + obj + " | grep -cE '" + re + "'");
  if (r.out.empty())
    return -1;
  return std::atoi(r.out.c_str());
}

TEST(BundleTest, TheKernelsInstructionSetFollowsTheTarget) {
  // AVX-512: zmm registers, mask registers, or the upper 16 vector registers (EVEX only).
  const std::string avx512 = "zmm|%k[0-7]|[xy]mm(1[6-9]|2[0-9]|3[01])";
  int v4 = countInstructions("test/bundle/digits_v4.o", avx512);
  if (v4 < 0) {
    std::printf("no objdump on PATH: the instruction sets are not checked\n");
    return;
  }
  EXPECT_GT(v4, 0) << "the x86-64-v4 bundle has no AVX-512 code";
  EXPECT_EQ(countInstructions("test/bundle/digits_v3.o", avx512), 0);
  EXPECT_EQ(countInstructions("test/bundle/digits_emb.o", avx512), 0);
  EXPECT_GT(countInstructions("test/bundle/digits_v3.o", "ymm"), 0) << "no AVX2 code";
  EXPECT_GT(countInstructions("test/bundle/digits_v3.o", "vfmadd"), 0) << "no FMA";
  // x86-64: SSE2 only.
  EXPECT_EQ(countInstructions("test/bundle/digits_sse.o", "ymm|zmm|vfmadd|^\\s+[0-9a-f]+:\\s+v"), 0);
  EXPECT_GT(countInstructions("test/bundle/digits_sse.o", "xmm"), 0);
}

/// Entries of folder \p dir (without . and ..); empty when it does not exist.
std::vector<std::string> listDir(const std::string &dir) {
  std::vector<std::string> names;
  if (DIR *d = opendir(dir.c_str())) {
    while (dirent *e = readdir(d))
      if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, ".."))
        names.push_back(e->d_name);
    closedir(d);
  }
  return names;
}

bool exists(const std::string &p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

TEST(BundleTest, KilnCompileErrorsAreClearAndLeaveNothingBehind) {
  const std::string tool = "src/tools/kiln-compile ";
  std::string base = tmpPath("errors");
  ::mkdir(base.c_str(), 0755);
  std::string empty = base + "/empty";
  ::mkdir(empty.c_str(), 0755);

  Result r = sh(tool + "--model " + kModel + " --out " + empty + " --target x86-64-v9");
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("unknown target 'x86-64-v9'"), std::string::npos) << r.err;

  r = sh(tool + "--model " + kModel + " --out " + empty + " --name 3d-model");
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("not a C identifier"), std::string::npos) << r.err;

  // A folder that cannot be made: under a regular file.
  std::string file = base + "/a_file";
  std::ofstream(file) << "x";
  r = sh(tool + "--model " + kModel + " --out " + file + "/out");
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.err.find("cannot create folder '" + file + "/out'"), std::string::npos) << r.err;
  r = sh(tool + "--model " + kModel + " --out " + file);
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.err.find("is not a folder"), std::string::npos) << r.err;

  // A model that does not parse: an error, and the folder it created is gone again.
  std::string bad = base + "/bad.onnx";
  std::ofstream(bad) << "not a model";
  std::string fresh = base + "/fresh";
  r = sh(tool + "--model " + bad + " --out " + fresh);
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.err.find("kiln-compile: "), std::string::npos) << r.err;
  EXPECT_FALSE(exists(fresh));
  r = sh(tool + "--model " + bad + " --out " + empty);
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_TRUE(listDir(empty).empty());

  // Success writes exactly the three files.
  r = sh(tool + "--model " + kModel + " --out " + empty + " --name d --target x86-64-v3");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  std::vector<std::string> names = listDir(empty);
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()),
            (std::set<std::string>{"d.o", "d.h", "d.weights"}));
}

TEST(BundleTest, AModelTheBackendCannotCompileIsAnErrorNamingTheNode) {
  Module m;
  // An int8 MatMul whose left operand's offset is not an int8 value runs on the
  // Interpreter only (the CPU's condition, docs/Operators.md).
  Function *f = m.createFunction("half");
  TypeRef q = m.uniqueType(ElemKind::Int8Q, {2, 2}, 0.1f, 0);
  Placeholder *a = m.createPlaceholder(m.uniqueType(ElemKind::Int8Q, {2, 2}, 0.1f, 200), "a");
  Placeholder *b = m.createPlaceholder(q, "b");
  SaveNode *s = f->createSave("y", f->createMatMul("sum", q, a, b));
  std::string dir = tmpPath("unsupported");
  cpu::BundleOptions o;
  o.name = "half";
  o.outDir = dir;
  o.target = "x86-64-v3";
  Expected<cpu::BundleResult> r =
      cpu::writeBundle(f, {{"a", a}, {"b", b}}, {{"y", s->getPlaceholder()}}, o);
  ASSERT_FALSE(bool(r));
  std::string msg = r.takeError().toString();
  EXPECT_NE(msg.find("sum"), std::string::npos) << msg;
  EXPECT_NE(msg.find("CPU"), std::string::npos) << msg;
  EXPECT_FALSE(exists(dir)) << "the folder it created is left behind";
}

} // namespace
