// Shared kernels: the large, shape-generic kernels (GEMM-based convolutions, pooling...)
// compiled once per process and host, each in a module of its own, kept on disk as object
// code, and called by every compiled program. The shared helpers they call (the GEMM
// micro-kernels, isSharedHelper) are units of their own too: compiled once and linked into
// each kernel by address, where every kernel module used to compile its own copy.
#include "Jit.h"
#include "JitInternal.h"
#include "Prebuilt.h"
#include "backends/CPU/libjit/libjit_ewloops.h"

#include "llvm/IR/LLVMContext.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <utime.h>

namespace kiln::cpu {

namespace {

/// Bumped when the object code of a unit may change with the bitcode unchanged (how the
/// JIT builds or links it), so that stale objects on disk are not loaded.
constexpr const char *kObjectFormat = "2";

/// FNV-1a over 8-byte words (then the tail bytes): the kernel library's bitcode is hashed
/// in every process, and the byte-wise form's chain of dependent multiplies is several
/// times slower.
uint64_t fnv1a(const void *data, size_t n, uint64_t h = 1469598103934665603ull) {
  const unsigned char *p = static_cast<const unsigned char *>(data);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 1099511628211ull;
  }
  for (; i < n; i++)
    h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

/// What the on-disk key of every unit compiled for \p host with \p opts starts with (the
/// unit's name follows).
std::string unitKeyPrefix(const HostInfo &host, const JitOptions &opts) {
  return host.cpu + "|" + host.features + "|" + std::to_string(opts.preferVectorWidth) + "|";
}

/// A unit (kernel or shared helper) of the library as its bitcode shows it.
struct UnitInfo {
  /// The shared helpers it calls, directly or through its own internal functions.
  std::vector<std::string> helpers;
  /// IR instructions of its own (not counting the helpers): about what it costs to compile.
  size_t size = 0;
};

/// Fills \p helpers with the UnitInfo of \p units and of the helpers they call. Read once
/// per process, from the bodies those units reach.
Error findHelpers(const std::vector<std::string> &units, std::map<std::string, UnitInfo> &helpers,
                  bool times) {
  std::vector<std::string> unknown;
  for (const std::string &u : units)
    if (!helpers.count(u))
      unknown.push_back(u);
  if (unknown.empty())
    return Error::success();
  PhaseTimer pt("find the shared helpers", times);
  llvm::LLVMContext ctx;
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<llvm::Module> m, loadLibjitModule(ctx));
  for (size_t i = 0; i < unknown.size(); i++) {
    const std::string u = unknown[i];
    llvm::Function *f = m->getFunction(u);
    if (!f || (f->isDeclaration() && !f->isMaterializable()))
      return makeError(ErrorCode::Internal, "CPU backend: kernel '", u,
                       "' is not in the kernel library");
    std::set<std::string> called;
    size_t size = 0;
    auto stop = [&](const llvm::Function &g) { return isSharedHelper(g) && g.getName() != u; };
    auto visit = [&](const llvm::Function &g) { size += g.getInstructionCount(); };
    if (llvm::Error e = materializeReachable(*m, {u}, stop, &called, visit))
      return makeError(ErrorCode::Internal,
                       "CPU backend: cannot read the kernel bitcode: ", errString(std::move(e)));
    helpers[u].helpers.assign(called.begin(), called.end());
    helpers[u].size = size;
    for (const std::string &h : called)
      if (!helpers.count(h) && std::find(unknown.begin(), unknown.end(), h) == unknown.end())
        unknown.push_back(h);
  }
  return Error::success();
}

/// Fills \p info with what the prebuilt objects of \p level record of \p units and,
/// transitively, of the helpers they call; units without a prebuilt object are left for
/// findHelpers.
void helpersFromPrebuilt(const std::string &level, const std::vector<std::string> &units,
                         std::map<std::string, UnitInfo> &info) {
  if (level.empty())
    return;
  std::vector<std::string> work = units;
  for (size_t i = 0; i < work.size(); i++) {
    if (info.count(work[i]))
      continue;
    const PrebuiltUnit *u = findPrebuiltUnit(level, work[i]);
    if (!u || !u->helpers)
      continue;
    UnitInfo &ui = info[work[i]];
    ui.size = u->instrs;
    for (const char *p = u->helpers; *p;) {
      const char *e = p;
      while (*e && *e != ',')
        e++;
      ui.helpers.emplace_back(p, e);
      work.push_back(ui.helpers.back());
      p = *e ? e + 1 : e;
    }
  }
}

/// \p units loaded together from their prebuilt objects for \p level, the helpers they
/// call that are not among them from \p built; null when one has no prebuilt object or
/// the objects do not link (the caller then builds each unit alone).
std::shared_ptr<JitModule> loadPrebuiltBatch(const std::string &level,
                                             const std::vector<std::string> &units,
                                             const std::map<std::string, UnitInfo> &info,
                                             const std::map<std::string, void *> &built,
                                             const JitOptions &o) {
  if (level.empty() || units.empty())
    return nullptr;
  std::vector<JitModule::ObjectBytes> objects;
  std::map<std::string, void *> externals;
  for (const std::string &n : units) {
    const PrebuiltUnit *u = findPrebuiltUnit(level, n);
    if (!u)
      return nullptr;
    objects.push_back({u->data, u->size, level + " " + n});
    for (const std::string &h : info.at(n).helpers)
      if (built.count(h))
        externals[h] = built.at(h);
  }
  return std::shared_ptr<JitModule>(JitModule::loadObjects(objects, units, o, externals));
}

/// One unit compiled alone (everything it does not reach dropped, the helpers it calls
/// linked by address), or loaded from its object file on disk.
Expected<std::unique_ptr<JitModule>> buildUnit(const std::string &name, const std::string &key,
                                               const std::string &level, const JitOptions &o,
                                               const std::map<std::string, void *> &helpers) {
  if (!level.empty())
    if (const PrebuiltUnit *u = findPrebuiltUnit(level, name))
      if (std::unique_ptr<JitModule> jm =
              JitModule::loadObject(u->data, u->size, level + " " + name, {name}, o, helpers))
        return std::move(jm);
  std::string cachePath = cachedObjectPath(o.cacheDir, key);
  if (!cachePath.empty())
    if (std::unique_ptr<JitModule> jm = JitModule::loadObject(cachePath, {name}, o, helpers)) {
      touchCachedObject(cachePath);
      return std::move(jm);
    }
  auto ctx = std::make_unique<llvm::LLVMContext>();
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<llvm::Module> mod, loadLibjitModule(*ctx));
  mod->setModuleIdentifier("shared");
  return JitModule::compile(std::move(ctx), std::move(mod), {name}, o, helpers, cachePath);
}

/// Builds the units of \p order (helpers before the kernels that call them), each on its
/// own thread (its own LLVMContext), as many at once as there are cores, a unit starting
/// once the helpers it calls are in \p addrs. Each unit built adds its address to \p addrs
/// and its module to \p built, also when another one fails.
Error buildUnitsInParallel(const std::vector<std::string> &order,
                           const std::map<std::string, UnitInfo> &info, const std::string &prefix,
                           const std::string &level, const JitOptions &o,
                           std::map<std::string, void *> &addrs,
                           std::map<std::string, std::unique_ptr<JitModule>> &built) {
  std::mutex bm;
  std::condition_variable cv;
  std::vector<bool> started(order.size(), false);
  size_t inFlight = 0;
  Error failure = Error::success();
  auto ready = [&](const std::string &n) {
    for (const std::string &h : info.at(n).helpers)
      if (!addrs.count(h))
        return false;
    return true;
  };
  auto worker = [&] {
    std::unique_lock<std::mutex> bl(bm);
    for (;;) {
      if (failure)
        return;
      size_t next = order.size();
      bool left = false;
      for (size_t i = 0; i < order.size() && next == order.size(); i++)
        if (!started[i]) {
          left = true;
          if (ready(order[i]))
            next = i;
        }
      if (!left)
        return;
      if (next == order.size()) {
        if (inFlight == 0) { // nothing will make one ready
          failure = makeError(ErrorCode::Internal, "CPU backend: shared helpers call each other");
          cv.notify_all();
          return;
        }
        cv.wait(bl);
        continue;
      }
      started[next] = true;
      inFlight++;
      const std::string &n = order[next];
      std::map<std::string, void *> helpers;
      for (const std::string &h : info.at(n).helpers)
        helpers[h] = addrs[h];
      bl.unlock();
      // A worker thread must not let an exception out (that ends the process): running
      // out of host memory while building a unit is this compile's error.
      std::unique_ptr<JitModule> module;
      Expected<void *> addr = guardHostMemory("building kernel unit '" + n + "'",
                                              [&]() -> Expected<void *> {
        KILN_ASSIGN_OR_RETURN(module, buildUnit(n, prefix + n, level, o, helpers));
        return module->lookup(n);
      });
      bl.lock();
      inFlight--;
      if (!addr) {
        if (!failure)
          failure = addr.takeError();
      } else {
        addrs[n] = *addr;
        built.emplace(n, std::move(module));
      }
      cv.notify_all();
    }
  };
  size_t workers =
      std::min<size_t>(order.size(), std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> threads;
  for (size_t t = 1; t < workers; t++)
    threads.emplace_back(worker);
  worker();
  for (auto &t : threads)
    t.join();
  return failure;
}

} // namespace

std::string cachedObjectPath(const std::string &dir, const std::string &key) {
  if (dir.empty() || dir == "off" || dir == "0" || llvm::sys::fs::create_directories(dir))
    return "";
  // The kernel library's bitcode is part of every key: objects of an older build are
  // never loaded.
  static const uint64_t bcHash = fnv1a(kObjectFormat, 1, libjitBitcodeHash());
  uint64_t h = fnv1a(key.data(), key.size(), bcHash);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
  return dir + "/kernel-" + hex + ".o";
}

Expected<std::map<std::string, void *>> getSharedKernels(const std::vector<std::string> &names,
                                                         const JitOptions &opts) {
  static std::mutex m;
  // By unit and host; the units loaded together from prebuilt objects share one module.
  static std::map<std::string, std::shared_ptr<JitModule>> modules;
  static std::map<std::string, UnitInfo> info;                      // by unit
  HostInfo host = detectHost(opts);
  std::string prefix = unitKeyPrefix(host, opts);
  JitOptions o = opts;
  o.keepIR = o.keepAsm = false;
  o.splitCodegen = false; // the units compile in parallel already
  // The level whose prebuilt objects this host runs, "" to compile for the host itself.
  std::string level;
  if (opts.prebuilt && opts.targetCpu.empty() && opts.preferVectorWidth == 0)
    level = host.avx512 ? "x86-64-v4" : host.avx2 ? "x86-64-v3" : "";
  // This process's modules by unit, host and source: prebuilt and host-compiled code are
  // kept apart, so each caller gets what its options ask for.
  const std::string memo = prefix + level + "|";
  std::lock_guard<std::mutex> l(m);

  // The units to build: the kernels not compiled yet in this process and the helpers
  // they need that are not either, helpers first (kernels wait for their addresses).
  std::map<std::string, void *> addrs; // of every unit built, by name
  std::vector<std::string> missing;
  for (const std::string &n : names)
    if (!modules.count(memo + n))
      missing.push_back(n);
  helpersFromPrebuilt(level, missing, info);
  KILN_RETURN_IF_ERR(findHelpers(missing, info, opts.times));
  std::vector<std::string> helpers, kernels;
  std::vector<std::string> work(names.begin(), names.end());
  std::set<std::string> seen;
  for (size_t i = 0; i < work.size(); i++) {
    const std::string n = work[i];
    if (!seen.insert(n).second)
      continue;
    auto it = modules.find(memo + n);
    if (it != modules.end()) {
      KILN_ASSIGN_OR_RETURN(addrs[n], it->second->lookup(n));
      continue;
    }
    (i < names.size() ? kernels : helpers).push_back(n);
    for (const std::string &h : info.at(n).helpers)
      work.push_back(h);
  }
  // Helpers first (they gate the kernels), then the largest kernels first, so that the
  // last to finish are small ones and the threads finish together.
  std::stable_sort(kernels.begin(), kernels.end(), [&](const std::string &a, const std::string &b) {
    return info.at(a).size > info.at(b).size;
  });
  std::vector<std::string> order = helpers;
  order.insert(order.end(), kernels.begin(), kernels.end());

  // Prebuilt objects for every unit: all of them into one JIT, linked among themselves
  // (a JIT per unit has a fixed cost each); helpers built by earlier calls by address.
  if (std::shared_ptr<JitModule> batch = loadPrebuiltBatch(level, order, info, addrs, o)) {
    for (const std::string &n : order) {
      KILN_ASSIGN_OR_RETURN(addrs[n], batch->lookup(n));
      modules.emplace(memo + n, batch);
    }
    order.clear();
  }

  std::map<std::string, std::unique_ptr<JitModule>> built;
  Error failure = buildUnitsInParallel(order, info, prefix, level, o, addrs, built);
  for (auto &kv : built)
    modules.emplace(memo + kv.first, std::move(kv.second));
  if (failure)
    return std::move(failure);

  std::map<std::string, void *> result;
  for (const std::string &n : names)
    result[n] = addrs.at(n);
  return result;
}

void touchCachedObject(const std::string &path) {
  ::utime(path.c_str(), nullptr); // best effort: an untouched file is only evicted sooner
}

void trimObjectCache(const std::string &dir, uint64_t maxBytes) {
  if (dir.empty())
    return;
  struct Entry {
    std::string path;
    uint64_t size;
    llvm::sys::TimePoint<> time;
  };
  std::vector<Entry> files;
  uint64_t total = 0;
  std::error_code ec;
  for (llvm::sys::fs::directory_iterator it(dir, ec), end; it != end && !ec; it.increment(ec)) {
    llvm::StringRef name = llvm::sys::path::filename(it->path());
    if (!name.startswith("kernel-") || !name.endswith(".o"))
      continue;
    llvm::sys::fs::file_status st;
    if (llvm::sys::fs::status(it->path(), st))
      continue;
    files.push_back({it->path(), st.getSize(), st.getLastModificationTime()});
    total += st.getSize();
  }
  if (total <= maxBytes)
    return;
  std::sort(files.begin(), files.end(),
            [](const Entry &a, const Entry &b) { return a.time < b.time; });
  for (const Entry &f : files) {
    if (total <= maxBytes)
      break;
    if (!llvm::sys::fs::remove(f.path))
      total -= f.size;
  }
}

std::vector<std::string> sharedKernelNames(bool avx512) {
  std::string isa = avx512 ? "avx512" : "avx2";
  std::vector<std::string> names = {
      "libjit_conv2d_f32_" + isa, "libjit_fc_f32_" + isa, "libjit_batchmatmul_f32_" + isa,
      "libjit_conv2d_t_f32_" + isa, "libjit_conv2d_strip_f32_" + isa,
      "libjit_conv2d_f16w_" + isa, "libjit_conv2d_t_f16w_" + isa, "libjit_fc_f16w_" + isa,
      "libjit_fc_row_f16w_" + isa,
      "libjit_conv2d_wino_f32_" + isa, "libjit_conv2d_wino_rows2_f32_" + isa,
      "libjit_conv2d_wino_rows4_f32_" + isa, "libjit_conv2d_grouped_f32_" + isa,
      // Loop nests that gain little from constant shapes and cost much to compile
      // once per call.
      "libjit_conv2d_dw_f32", "libjit_maxpool_f32", "libjit_avgpool_f32",
      "libjit_conv_phase_split_f32", "libjit_conv_phase_merge_f32",
      "libjit_adaptive_avgpool_f32", "libjit_fc_row_f32", "libjit_fc_row_sum_f32",
      // Data movement and normalisations: memory-bound loop nests over shapes passed as
      // arguments (the strided copies' dims and strides are tables in memory anyway).
      // Compiled into each program they were inlined at some calls and unrolled over
      // constant dimensions (text_encoder's strided copies: ~7000 IR lines; swin_t's
      // ~12000), code generation the program paid at every cold compile.
      "libjit_softmax_f32", "libjit_batchnorm_f32", "libjit_layernorm_f32",
      // Reductions over dims tables, the mean's scaling and fills: the rest of what a
      // float network compiled into its own module besides its element-wise loops (the
      // global mean of mnasnet1_0, shufflenet_v2_x1_0 and r3d_18: about two thirds of
      // their program modules' IR, their only O3 work outside the loops).
      "libjit_reduce_sum_f32", "libjit_reduce_max_f32", "libjit_reduce_min_f32",
      "libjit_reduce_prod_f32", "libjit_scale_f32"};
  // The element-wise loops of the most common chains (a lone activation or binary
  // operation, a row scaled or shifted by a value or vector per row): the same in every
  // network, where each program used to compile its own loop function for them.
#define KILN_EW_LOOP_NAME(OP) names.push_back("libjit_ew_" #OP "_f32");
#define KILN_EW_ROWS_NAME(OP) names.push_back("libjit_ew_rows_" #OP "_f32");
  LIBJIT_EW_UNARY_LOOPS(KILN_EW_LOOP_NAME)
  LIBJIT_EW_BINARY_LOOPS(KILN_EW_LOOP_NAME)
  LIBJIT_EW_ROW_LOOPS(KILN_EW_ROWS_NAME)
#undef KILN_EW_LOOP_NAME
#undef KILN_EW_ROWS_NAME
  // The int8 convolution and fully-connected kernels (VNNI ones on AVX-512 hosts that have
  // it, the AVX2 ones elsewhere): compiled into each program they cost an int8 network
  // seconds of LLVM at every cold compile (figures in commit 58a935a's message).
  // The same for the bf16 ones (AVX512_BF16). Both keep their extension in the prebuilt
  // x86-64-v4 objects (compile() keeps a kernel's own target features).
  // (Not the int8 depthwise kernel: specialised to its constant shapes it runs faster, so
  // each program keeps its own and pays its compile.)
  for (const char *q : {"libjit_qconv_i8_", "libjit_qfc_i8_", "libjit_qbmm_i8_"}) {
    if (avx512)
      names.push_back(std::string(q) + "vnni");
    names.push_back(std::string(q) + "avx2");
  }
  if (avx512)
    for (const char *k : {"libjit_conv_bf16_avx512bf16", "libjit_conv_bf16_cl_avx512bf16",
                          "libjit_fc_bf16_avx512bf16"})
      names.push_back(k);
  for (const char *size : {"u8", "u16", "u32", "u64"}) {
    names.push_back(std::string("libjit_splat_") + size);
    names.push_back(std::string("libjit_strided_copy_") + size);
    names.push_back(std::string("libjit_strided_copy_part_") + size);
    for (const char *index : {"i32", "i64"})
      names.push_back(std::string("libjit_gather_part_") + size + "_" + index);
  }
  return names;
}

namespace {
struct PrebuiltRegistry {
  std::mutex mu;
  std::map<std::pair<std::string, std::string>, const PrebuiltUnit *> units;
};
PrebuiltRegistry &prebuiltRegistry() {
  static PrebuiltRegistry r;
  return r;
}
} // namespace

Expected<std::vector<std::string>> sharedUnitHelpers(const std::string &unit) {
  std::map<std::string, UnitInfo> info;
  KILN_RETURN_IF_ERR(findHelpers({unit}, info, false));
  return info.at(unit).helpers;
}

uint64_t libjitBitcodeHash() {
  static const uint64_t h = fnv1a(kLibjitBitcode, kLibjitBitcodeSize);
  return h;
}

bool registerPrebuiltUnits(const PrebuiltUnit *units, size_t n, uint64_t bitcodeHash) {
  if (bitcodeHash != libjitBitcodeHash())
    return false;
  PrebuiltRegistry &r = prebuiltRegistry();
  std::lock_guard<std::mutex> l(r.mu);
  for (size_t i = 0; i < n; i++)
    r.units[{units[i].level, units[i].unit}] = &units[i];
  return true;
}

const PrebuiltUnit *findPrebuiltUnit(const std::string &level, const std::string &unit) {
  PrebuiltRegistry &r = prebuiltRegistry();
  std::lock_guard<std::mutex> l(r.mu);
  auto it = r.units.find({level, unit});
  return it == r.units.end() ? nullptr : it->second;
}

Expected<std::vector<CompiledUnit>>
compileSharedUnits(const std::string &level, const std::vector<std::string> &kernels,
                   const std::string &scratchDir) {
  if (level != "x86-64-v4" && level != "x86-64-v3")
    return makeError(ErrorCode::InvalidArgument, "prebuilt kernels: unknown level '", level, "'");
  JitOptions o;
  o.targetCpu = level;
  o.cacheDir = scratchDir;
  o.prebuilt = false;
  KILN_RETURN_IF_ERR(getSharedKernels(kernels, o).takeError());
  // Every unit getSharedKernels built wrote its object under its key: the kernels and,
  // transitively, the helpers they call.
  std::map<std::string, UnitInfo> info;
  KILN_RETURN_IF_ERR(findHelpers(kernels, info, false));
  std::string prefix = unitKeyPrefix(detectHost(o), o);
  std::vector<CompiledUnit> out;
  for (const auto &kv : info) {
    std::string path = cachedObjectPath(scratchDir, prefix + kv.first);
    auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                           /*RequiresNullTerminator=*/false);
    if (!buf)
      return makeError(ErrorCode::Internal, "prebuilt kernels: no object for '", kv.first,
                       "' at ", path);
    out.push_back({kv.first, (*buf)->getBuffer().str(), kv.second.helpers, kv.second.size});
  }
  return out;
}

} // namespace kiln::cpu
