// Shared kernels: the large, shape-generic kernels (GEMM-based convolutions, pooling...)
// compiled once per process and host, each in a module of its own, kept on disk as object
// code, and called by every compiled program. The shared helpers they call (the GEMM
// micro-kernels, isSharedHelper) are units of their own too: compiled once and linked into
// each kernel by address, where every kernel module used to compile its own copy.
#include "Jit.h"
#include "JitInternal.h"

#include "llvm/IR/LLVMContext.h"
#include "llvm/Support/FileSystem.h"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace kiln::cpu {

namespace {

/// Bumped when the object code of a unit may change with the bitcode unchanged (how the
/// JIT builds or links it), so that stale objects on disk are not loaded.
constexpr const char *kObjectFormat = "2";

uint64_t fnv1a(const void *data, size_t n, uint64_t h = 1469598103934665603ull) {
  const unsigned char *p = static_cast<const unsigned char *>(data);
  for (size_t i = 0; i < n; i++)
    h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

/// \p dir, created on demand, or "" when it is disabled ("", "off", "0") or cannot be
/// created.
std::string usableCacheDir(const std::string &dir) {
  if (dir.empty() || dir == "off" || dir == "0")
    return "";
  if (llvm::sys::fs::create_directories(dir))
    return "";
  return dir;
}

/// The object file of the unit with reuse key \p key in cache directory \p dir, or ""
/// without one.
std::string objectPath(const std::string &dir, const std::string &key) {
  if (dir.empty())
    return "";
  static const uint64_t bcHash = fnv1a(kObjectFormat, 1, fnv1a(kLibjitBitcode, kLibjitBitcodeSize));
  uint64_t h = fnv1a(key.data(), key.size(), bcHash);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
  return dir + "/kernel-" + hex + ".o";
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

/// One unit compiled alone (everything it does not reach dropped, the helpers it calls
/// linked by address), or loaded from its object file on disk.
Expected<std::unique_ptr<JitModule>> buildUnit(const std::string &name, const std::string &key,
                                               const JitOptions &o,
                                               const std::map<std::string, void *> &helpers) {
  std::string cachePath = objectPath(o.cacheDir, key);
  if (!cachePath.empty())
    if (std::unique_ptr<JitModule> jm = JitModule::loadObject(cachePath, {name}, o, helpers))
      return std::move(jm);
  auto ctx = std::make_unique<llvm::LLVMContext>();
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<llvm::Module> mod, loadLibjitModule(*ctx));
  mod->setModuleIdentifier("shared");
  return JitModule::compile(std::move(ctx), std::move(mod), {name}, o, helpers, cachePath);
}

} // namespace

Expected<std::map<std::string, void *>> getSharedKernels(const std::vector<std::string> &names,
                                                         const JitOptions &opts) {
  static std::mutex m;
  static std::map<std::string, std::unique_ptr<JitModule>> modules; // by unit and host
  static std::map<std::string, UnitInfo> info;                      // by unit
  HostInfo host = detectHost(opts);
  std::string prefix =
      host.cpu + "|" + host.features + "|" + std::to_string(opts.preferVectorWidth) + "|";
  JitOptions o = opts;
  o.keepIR = o.keepAsm = false;
  o.cacheDir = usableCacheDir(opts.cacheDir);
  std::lock_guard<std::mutex> l(m);

  // The units to build: the kernels not compiled yet in this process and the helpers
  // they need that are not either, helpers first (kernels wait for their addresses).
  std::map<std::string, void *> addrs; // of every unit built, by name
  std::vector<std::string> missing;
  for (const std::string &n : names)
    if (!modules.count(prefix + n))
      missing.push_back(n);
  KILN_RETURN_IF_ERR(findHelpers(missing, info, opts.times));
  std::vector<std::string> helpers, kernels;
  std::vector<std::string> work(names.begin(), names.end());
  std::set<std::string> seen;
  for (size_t i = 0; i < work.size(); i++) {
    const std::string n = work[i];
    if (!seen.insert(n).second)
      continue;
    auto it = modules.find(prefix + n);
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

  // Each unit on its own thread (its own LLVMContext), as many at once as there are
  // cores, a unit starting once the helpers it calls are built.
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
      Expected<std::unique_ptr<JitModule>> built = buildUnit(n, prefix + n, o, helpers);
      Expected<void *> addr = built ? (*built)->lookup(n) : Expected<void *>(built.takeError());
      bl.lock();
      inFlight--;
      if (!addr) {
        if (!failure)
          failure = addr.takeError();
      } else {
        addrs[n] = *addr;
        modules.emplace(prefix + n, std::move(*built));
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
  if (failure)
    return std::move(failure);

  std::map<std::string, void *> result;
  for (const std::string &n : names)
    result[n] = addrs.at(n);
  return result;
}

} // namespace kiln::cpu
