#include "Jit.h"

#include "llvm/Analysis/TargetTransformInfo.h"
#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/ExecutionEngine/ObjectCache.h"
#include "llvm/ExecutionEngine/Orc/CompileUtils.h"
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/ExecutionEngine/Orc/ThreadSafeModule.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/MC/SubtargetFeature.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Host.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Transforms/IPO/GlobalDCE.h"
#include "llvm/Transforms/Utils/Cloning.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <set>
#include <thread>
#include <unistd.h>

namespace kiln::cpu {

extern const unsigned char kLibjitBitcode[];
extern const size_t kLibjitBitcodeSize;

namespace {

void initLLVM() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
}

std::string errString(llvm::Error e) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << e;
  return os.str();
}

/// Host features as a string, with AVX-512 removed when asked.
void hostFeatures(const JitOptions &opts, std::string &cpu, std::string &features, bool &avx512,
                  bool &avx2) {
  cpu = llvm::sys::getHostCPUName().str();
  llvm::StringMap<bool> map;
  llvm::sys::getHostCPUFeatures(map);
  if (opts.disableAvx512) {
    for (auto &kv : map)
      if (kv.getKey().startswith("avx512") || kv.getKey() == "amx-tile" ||
          kv.getKey() == "amx-int8" || kv.getKey() == "amx-bf16")
        kv.setValue(false);
    cpu = map.lookup("avx2") ? "haswell" : "x86-64";
  }
  llvm::SubtargetFeatures f;
  for (auto &kv : map)
    f.AddFeature(kv.getKey(), kv.getValue());
  features = f.getString();
  avx512 = map.lookup("avx512f") && map.lookup("avx512bw") && map.lookup("avx512vl") &&
           map.lookup("avx512dq");
  avx2 = map.lookup("avx2") && map.lookup("fma");
}

/// Writes the object code of a compiled module to a file (atomically: a temporary file
/// renamed into place, so concurrent processes never read half an object).
class ObjectFileWriter : public llvm::ObjectCache {
public:
  explicit ObjectFileWriter(std::string path) : path_(std::move(path)) {}
  void notifyObjectCompiled(const llvm::Module *, llvm::MemoryBufferRef obj) override {
    std::string tmp = path_ + ".tmp" + std::to_string(::getpid());
    std::error_code ec;
    {
      llvm::raw_fd_ostream os(tmp, ec);
      if (ec)
        return;
      os << obj.getBuffer();
      os.close();
      if (os.has_error()) {
        os.clear_error();
        llvm::sys::fs::remove(tmp);
        return;
      }
    }
    if (llvm::sys::fs::rename(tmp, path_))
      llvm::sys::fs::remove(tmp);
  }
  std::unique_ptr<llvm::MemoryBuffer> getObject(const llvm::Module *) override { return nullptr; }

private:
  std::string path_;
};

uint64_t fnv1a(const void *data, size_t n, uint64_t h = 1469598103934665603ull) {
  const unsigned char *p = static_cast<const unsigned char *>(data);
  for (size_t i = 0; i < n; i++)
    h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

/// The directory of the on-disk cache of precompiled kernels, created on demand, or ""
/// when disabled (KILN_CPU_CACHE_DIR=off) or not writable. KILN_CPU_CACHE_DIR, else
/// $XDG_CACHE_HOME/kiln-cpu, else $HOME/.cache/kiln-cpu.
std::string kernelCacheDir() {
  std::string dir;
  if (const char *d = std::getenv("KILN_CPU_CACHE_DIR"))
    dir = d;
  else if (const char *x = std::getenv("XDG_CACHE_HOME"))
    dir = std::string(x) + "/kiln-cpu";
  else if (const char *h = std::getenv("HOME"))
    dir = std::string(h) + "/.cache/kiln-cpu";
  if (dir.empty() || dir == "off" || dir == "0")
    return "";
  if (llvm::sys::fs::create_directories(dir))
    return "";
  return dir;
}

} // namespace

HostInfo detectHost(const JitOptions &opts) {
  HostInfo h;
  hostFeatures(opts, h.cpu, h.features, h.avx512, h.avx2);
  return h;
}

Expected<std::unique_ptr<llvm::Module>> loadLibjitModule(llvm::LLVMContext &ctx) {
  auto buf = llvm::MemoryBuffer::getMemBuffer(
      llvm::StringRef(reinterpret_cast<const char *>(kLibjitBitcode), kLibjitBitcodeSize),
      "libjit.bc", /*RequiresNullTerminator=*/false);
  auto m = llvm::parseBitcodeFile(buf->getMemBufferRef(), ctx);
  if (!m)
    return makeError(ErrorCode::Internal, "CPU backend: cannot parse the kernel bitcode: ",
                     errString(m.takeError()));
  return std::move(*m);
}

struct JitModule::Impl {
  std::unique_ptr<llvm::orc::LLJIT> jit;
};

JitModule::JitModule() : impl_(new Impl) {}
JitModule::~JitModule() = default;

Expected<std::unique_ptr<JitModule>>
JitModule::compile(std::unique_ptr<llvm::LLVMContext> ctx, std::unique_ptr<llvm::Module> M,
                   const std::vector<std::string> &entries, const JitOptions &opts,
                   const std::map<std::string, void *> &externals,
                   const std::string &objectCachePath) {
  initLLVM();
  std::unique_ptr<JitModule> jm(new JitModule());
  jm->host_ = detectHost(opts);
  const HostInfo &host = jm->host_;

  auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb)
    return makeError(ErrorCode::Internal, "CPU backend: ", errString(jtmb.takeError()));
  jtmb->setCPU(host.cpu);
  jtmb->getFeatures() = llvm::SubtargetFeatures(host.features);
  jtmb->setCodeGenOptLevel(llvm::CodeGenOpt::Aggressive);

  auto tm = jtmb->createTargetMachine();
  if (!tm)
    return makeError(ErrorCode::Internal, "CPU backend: ", errString(tm.takeError()));

  M->setDataLayout((*tm)->createDataLayout());
  M->setTargetTriple((*tm)->getTargetTriple().str());

  // The bitcode was compiled for generic x86-64; per-function attributes beat the
  // TargetMachine, so replace them with the host's.
  unsigned width = opts.preferVectorWidth ? opts.preferVectorWidth : (host.avx512 ? 512 : 256);
  std::set<std::string> keep(entries.begin(), entries.end());
  for (const auto &e : externals)
    if (llvm::Function *f = M->getFunction(e.first)) {
      f->deleteBody();
      f->setLinkage(llvm::GlobalValue::ExternalLinkage);
    }
  for (llvm::Function &f : *M) {
    if (f.isDeclaration())
      continue;
    f.removeFnAttr("target-cpu");
    f.removeFnAttr("target-features");
    f.removeFnAttr("tune-cpu");
    f.addFnAttr("target-cpu", host.cpu);
    f.addFnAttr("target-features", host.features);
    f.addFnAttr("prefer-vector-width", std::to_string(width));
    if (!keep.count(f.getName().str()))
      f.setLinkage(llvm::GlobalValue::InternalLinkage);
  }
  for (llvm::GlobalVariable &g : M->globals())
    if (!g.isDeclaration())
      g.setLinkage(llvm::GlobalValue::InternalLinkage);

  if (llvm::verifyModule(*M, &llvm::errs()))
    return makeError(ErrorCode::Internal, "CPU backend: generated LLVM IR does not verify");

  {
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PipelineTuningOptions pto;
    pto.LoopVectorization = true;
    pto.SLPVectorization = true;
    llvm::PassBuilder pb(tm->get(), pto);
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    llvm::ModulePassManager mpm;
    mpm.addPass(llvm::GlobalDCEPass()); // drop the kernels nobody calls before optimising
    mpm.addPass(pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3));
    mpm.run(*M, mam);
  }

  if (opts.keepIR) {
    llvm::raw_string_ostream os(jm->ir_);
    M->print(os, nullptr);
  }
  if (opts.keepAsm) {
    auto clone = llvm::CloneModule(*M);
    llvm::SmallString<0> buf;
    llvm::raw_svector_ostream os(buf);
    llvm::legacy::PassManager pm;
    if (!(*tm)->addPassesToEmitFile(pm, os, nullptr, llvm::CGFT_AssemblyFile))
      pm.run(*clone);
    jm->asm_ = buf.str().str();
  }

  llvm::orc::LLJITBuilder builder;
  builder.setJITTargetMachineBuilder(*jtmb);
  if (!objectCachePath.empty() && externals.empty()) {
    jm->cacheWriter_ = std::make_shared<ObjectFileWriter>(objectCachePath);
    llvm::ObjectCache *cache = static_cast<ObjectFileWriter *>(jm->cacheWriter_.get());
    builder.setCompileFunctionCreator(
        [cache](llvm::orc::JITTargetMachineBuilder b)
            -> llvm::Expected<std::unique_ptr<llvm::orc::IRCompileLayer::IRCompiler>> {
          auto t = b.createTargetMachine();
          if (!t)
            return t.takeError();
          return std::make_unique<llvm::orc::TMOwningSimpleCompiler>(std::move(*t), cache);
        });
  }
  auto jit = builder.create();
  if (!jit)
    return makeError(ErrorCode::Internal, "CPU backend: ", errString(jit.takeError()));
  // Generated code may call memset/memcpy and libm.
  auto gen = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
      (*jit)->getDataLayout().getGlobalPrefix());
  if (!gen)
    return makeError(ErrorCode::Internal, "CPU backend: ", errString(gen.takeError()));
  (*jit)->getMainJITDylib().addGenerator(std::move(*gen));
  if (!externals.empty()) {
    llvm::orc::SymbolMap syms;
    for (const auto &e : externals)
      syms[(*jit)->mangleAndIntern(e.first)] = llvm::JITEvaluatedSymbol(
          llvm::pointerToJITTargetAddress(e.second), llvm::JITSymbolFlags::Exported);
    if (auto err = (*jit)->getMainJITDylib().define(llvm::orc::absoluteSymbols(std::move(syms))))
      return makeError(ErrorCode::Internal, "CPU backend: ", errString(std::move(err)));
  }
  if (auto e = (*jit)->addIRModule(llvm::orc::ThreadSafeModule(std::move(M), std::move(ctx))))
    return makeError(ErrorCode::Internal, "CPU backend: ", errString(std::move(e)));
  jm->impl_->jit = std::move(*jit);
  return std::move(jm);
}

std::unique_ptr<JitModule> JitModule::loadObject(const std::string &path,
                                                 const std::vector<std::string> &entries,
                                                 const JitOptions &opts) {
  initLLVM();
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                         /*RequiresNullTerminator=*/false);
  if (!buf)
    return nullptr;
  std::unique_ptr<JitModule> jm(new JitModule());
  jm->host_ = detectHost(opts);
  auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb) {
    llvm::consumeError(jtmb.takeError());
    return nullptr;
  }
  jtmb->setCPU(jm->host_.cpu);
  jtmb->getFeatures() = llvm::SubtargetFeatures(jm->host_.features);
  auto jit = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(*jtmb).create();
  if (!jit) {
    llvm::consumeError(jit.takeError());
    return nullptr;
  }
  auto gen = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
      (*jit)->getDataLayout().getGlobalPrefix());
  if (!gen) {
    llvm::consumeError(gen.takeError());
    return nullptr;
  }
  (*jit)->getMainJITDylib().addGenerator(std::move(*gen));
  if (auto e = (*jit)->addObjectFile(std::move(*buf))) {
    llvm::consumeError(std::move(e));
    return nullptr;
  }
  jm->impl_->jit = std::move(*jit);
  for (const auto &e : entries) {
    auto sym = jm->impl_->jit->lookup(e);
    if (!sym) {
      llvm::consumeError(sym.takeError());
      return nullptr;
    }
  }
  return jm;
}

namespace {

/// One shared kernel compiled alone: its module (from the embedded bitcode, everything but
/// the kernel internalised and dropped) is compiled once per process and host
/// configuration, and its object code is kept on disk.
Expected<std::unique_ptr<JitModule>> compileSharedKernel(const std::string &name,
                                                         const std::string &key,
                                                         const JitOptions &o) {
  std::string cachePath;
  static const std::string dir = kernelCacheDir();
  if (!dir.empty()) {
    static const uint64_t bcHash = fnv1a(kLibjitBitcode, kLibjitBitcodeSize);
    uint64_t h = fnv1a(key.data(), key.size(), bcHash);
    char hex[17];
    std::snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
    cachePath = dir + "/kernel-" + hex + ".o";
  }
  if (!cachePath.empty())
    if (std::unique_ptr<JitModule> jm = JitModule::loadObject(cachePath, {name}, o))
      return std::move(jm);
  auto ctx = std::make_unique<llvm::LLVMContext>();
  KILN_ASSIGN_OR_RETURN(std::unique_ptr<llvm::Module> mod, loadLibjitModule(*ctx));
  return JitModule::compile(std::move(ctx), std::move(mod), {name}, o, {}, cachePath);
}

} // namespace

Expected<std::map<std::string, void *>> getSharedKernels(const std::vector<std::string> &names,
                                                         const JitOptions &opts) {
  static std::mutex m;
  static std::map<std::string, std::unique_ptr<JitModule>> modules; // by kernel and host
  HostInfo host = detectHost(opts);
  std::string prefix =
      host.cpu + "|" + host.features + "|" + std::to_string(opts.preferVectorWidth) + "|";
  JitOptions o = opts;
  o.keepIR = o.keepAsm = false;
  std::lock_guard<std::mutex> l(m);
  // The kernels not compiled yet in this process: load or compile each on its own thread
  // (each has its own LLVMContext), as many at once as there are cores.
  std::vector<std::string> missing;
  for (const auto &n : names)
    if (!modules.count(prefix + n) &&
        std::find(missing.begin(), missing.end(), n) == missing.end())
      missing.push_back(n);
  std::vector<Expected<std::unique_ptr<JitModule>>> built;
  for (size_t i = 0; i < missing.size(); i++)
    built.emplace_back(std::unique_ptr<JitModule>());
  size_t workers = std::min<size_t>(missing.size(),
                                    std::max(1u, std::thread::hardware_concurrency()));
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next++) < missing.size();)
      built[i] = compileSharedKernel(missing[i], prefix + missing[i], o);
  };
  std::vector<std::thread> threads;
  for (size_t t = 1; t < workers; t++)
    threads.emplace_back(work);
  work();
  for (auto &t : threads)
    t.join();
  for (size_t i = 0; i < missing.size(); i++) {
    if (!built[i])
      return built[i].takeError();
    modules.emplace(prefix + missing[i], std::move(*built[i]));
  }
  std::map<std::string, void *> addrs;
  for (const auto &n : names) {
    KILN_ASSIGN_OR_RETURN(void *a, modules.at(prefix + n)->lookup(n));
    addrs[n] = a;
  }
  return addrs;
}

Expected<void *> JitModule::lookup(const std::string &name) {
  auto sym = impl_->jit->lookup(name);
  if (!sym)
    return makeError(ErrorCode::Internal, "CPU backend: JIT lookup of '", name,
                     "' failed: ", errString(sym.takeError()));
#if LLVM_VERSION_MAJOR >= 15
  return sym->toPtr<void *>();
#else
  return reinterpret_cast<void *>(sym->getAddress());
#endif
}

} // namespace kiln::cpu
