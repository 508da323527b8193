#include "Jit.h"
#include "JitInternal.h"

#include "llvm/Analysis/TargetTransformInfo.h"
#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/ExecutionEngine/ObjectCache.h"
#include "llvm/ExecutionEngine/Orc/CompileUtils.h"
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/ExecutionEngine/Orc/ThreadSafeModule.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/MC/SubtargetFeature.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Host.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Transforms/IPO/DeadArgumentElimination.h"
#include "llvm/Transforms/IPO/GlobalDCE.h"
#include "llvm/Transforms/IPO/SCCP.h"
#include "llvm/Transforms/Utils/Cloning.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <set>
#include <unistd.h>

namespace kiln::cpu {

namespace {

/// The process's own symbols (memset, memcpy, libm) as a generator for a JIT's main library.
/// LLVM guards its list of loaded libraries with a lock of its own, which ThreadSanitizer
/// cannot see (libLLVM is not instrumented), and JITs are created on several threads at once
/// (the shared kernels' units): ours, around it, makes that visible.
llvm::Expected<std::unique_ptr<llvm::orc::DynamicLibrarySearchGenerator>>
processSymbols(char globalPrefix) {
  static std::mutex m;
  std::lock_guard<std::mutex> lock(m);
  return llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(globalPrefix);
}

void initLLVM() {
  static std::once_flag once;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
  });
}

/// Host features as a string, with AVX-512 removed when asked.
void hostFeatures(const JitOptions &opts, std::string &cpu, std::string &features, bool &avx512,
                  bool &avx2) {
  // The host's own name and features, read once per process (every compile and every
  // kernel object loaded asks, and each reading costs tens of microseconds of CPUID).
  struct Host {
    std::string cpu;
    llvm::StringMap<bool> features;
  };
  static const Host host = [] {
    Host h;
    h.cpu = llvm::sys::getHostCPUName().str();
    llvm::sys::getHostCPUFeatures(h.features);
    return h;
  }();
  cpu = host.cpu;
  llvm::StringMap<bool> map = host.features;
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

/// A builder of target machines for \p host's CPU and features on this process's triple
/// (JITTargetMachineBuilder::detectHost would read the host's features again).
llvm::orc::JITTargetMachineBuilder targetMachineBuilder(const HostInfo &host) {
  llvm::orc::JITTargetMachineBuilder b{llvm::Triple(llvm::sys::getProcessTriple())};
  b.setCPU(host.cpu);
  b.getFeatures() = llvm::SubtargetFeatures(host.features);
  return b;
}

/// Writes the object code of a compiled module to a file (writeFileAtomically).
class ObjectFileWriter : public llvm::ObjectCache {
public:
  explicit ObjectFileWriter(std::string path) : path_(std::move(path)) {}
  void notifyObjectCompiled(const llvm::Module *, llvm::MemoryBufferRef obj) override {
    writeFileAtomically(path_, obj.getBuffer());
  }
  std::unique_ptr<llvm::MemoryBuffer> getObject(const llvm::Module *) override { return nullptr; }

private:
  std::string path_;
};

/// Calls to the functions named in \p externals go to the given addresses.
llvm::Error defineExternals(llvm::orc::LLJIT &jit, const std::map<std::string, void *> &externals) {
  if (externals.empty())
    return llvm::Error::success();
  llvm::orc::SymbolMap syms;
  for (const auto &e : externals)
    syms[jit.mangleAndIntern(e.first)] = llvm::JITEvaluatedSymbol(
        llvm::pointerToJITTargetAddress(e.second), llvm::JITSymbolFlags::Exported);
  return jit.getMainJITDylib().define(llvm::orc::absoluteSymbols(std::move(syms)));
}

/// Adds the functions \p v refers to (itself, or through constant expressions) to \p out.
void collectFunctions(const llvm::Value *v, std::vector<llvm::Function *> &out,
                      std::set<const llvm::Value *> &seen) {
  if (!llvm::isa<llvm::Constant>(v) || !seen.insert(v).second)
    return;
  if (auto *f = llvm::dyn_cast<llvm::Function>(v)) {
    out.push_back(const_cast<llvm::Function *>(f));
    return;
  }
  if (llvm::isa<llvm::GlobalVariable>(v)) {
    auto *g = llvm::cast<llvm::GlobalVariable>(v);
    if (g->hasInitializer())
      collectFunctions(g->getInitializer(), out, seen);
    return;
  }
  for (const llvm::Value *op : llvm::cast<llvm::User>(v)->operands())
    collectFunctions(op, out, seen);
}

/// True when \p M defines functions and every one of them is marked optnone.
bool onlyOptnoneDefinitions(const llvm::Module &M) {
  bool any = false;
  for (const llvm::Function &f : M) {
    if (f.isDeclaration())
      continue;
    if (!f.hasFnAttribute(llvm::Attribute::OptimizeNone))
      return false;
    any = true;
  }
  return any;
}

} // namespace

bool writeFileAtomically(const std::string &path, llvm::StringRef data) {
  std::string tmp = path + ".tmp" + std::to_string(::getpid());
  std::error_code ec;
  {
    llvm::raw_fd_ostream os(tmp, ec);
    if (ec)
      return false;
    os << data;
    os.close();
    if (os.has_error()) {
      os.clear_error();
      llvm::sys::fs::remove(tmp);
      return false;
    }
  }
  if (llvm::sys::fs::rename(tmp, path)) {
    llvm::sys::fs::remove(tmp);
    return false;
  }
  return true;
}

std::string errString(llvm::Error e) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << e;
  return os.str();
}

PhaseTimer::PhaseTimer(std::string what, bool on)
    : what_(std::move(what)), on_(on), start_(std::chrono::steady_clock::now()) {}

void PhaseTimer::stop() {
  if (!on_)
    return;
  on_ = false;
  std::fprintf(stderr, "[kiln jit] %-60s %8.1f ms\n", what_.c_str(),
               std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                         start_)
                   .count());
}

llvm::Error materializeReachable(llvm::Module &m, const std::vector<std::string> &roots,
                                 const std::function<bool(const llvm::Function &)> &stop,
                                 std::set<std::string> *boundary,
                                 const std::function<void(const llvm::Function &)> &visit) {
  std::vector<llvm::Function *> work;
  std::set<llvm::Function *> done;
  for (const std::string &r : roots)
    if (llvm::Function *f = m.getFunction(r))
      work.push_back(f);
  while (!work.empty()) {
    llvm::Function *f = work.back();
    work.pop_back();
    if (!done.insert(f).second)
      continue;
    if (f->isMaterializable())
      if (llvm::Error e = f->materialize())
        return e;
    if (visit)
      visit(*f);
    std::vector<llvm::Function *> callees;
    std::set<const llvm::Value *> seen;
    for (const llvm::BasicBlock &bb : *f)
      for (const llvm::Instruction &i : bb)
        for (const llvm::Value *op : i.operands())
          collectFunctions(op, callees, seen);
    for (llvm::Function *c : callees) {
      if (done.count(c))
        continue;
      if (stop && stop(*c)) {
        if (boundary)
          boundary->insert(c->getName().str());
        continue;
      }
      work.push_back(c);
    }
  }
  return llvm::Error::success();
}

llvm::Error dropUnmaterialized(llvm::Module &m) {
  for (llvm::Function &f : m)
    if (f.isMaterializable()) {
      f.deleteBody(); // reads nothing: the body was never loaded
      f.setComdat(nullptr);
    }
  return m.materializeAll();
}

bool isKnownTargetCpu(const std::string &cpu) {
  return cpu == "x86-64" || cpu == "x86-64-v3" || cpu == "x86-64-v4";
}

HostInfo detectHost(const JitOptions &opts) {
  HostInfo h;
  if (!opts.targetCpu.empty()) {
    // The named CPU's own features (the subtarget derives them from the name).
    h.cpu = opts.targetCpu;
    h.avx512 = opts.targetCpu == "x86-64-v4";
    h.avx2 = h.avx512 || opts.targetCpu == "x86-64-v3";
    return h;
  }
  hostFeatures(opts, h.cpu, h.features, h.avx512, h.avx2);
  h.avx512bf16 = h.avx512 && h.features.find("+avx512bf16") != std::string::npos;
  return h;
}

bool hostHasAvx512Bf16() {
  static const bool has = detectHost(JitOptions()).avx512bf16;
  return has;
}

Expected<std::unique_ptr<llvm::Module>> loadLibjitModule(llvm::LLVMContext &ctx) {
  // Lazily: the declarations now, a body only when compile() needs it (a module uses a
  // small part of the library, and reading all of it took tens of ms per module).
  llvm::MemoryBufferRef buf(
      llvm::StringRef(reinterpret_cast<const char *>(kLibjitBitcode), kLibjitBitcodeSize),
      "libjit.bc");
  auto m = llvm::getLazyBitcodeModule(buf, ctx);
  if (!m)
    return makeError(ErrorCode::Internal, "CPU backend: cannot parse the kernel bitcode: ",
                     errString(m.takeError()));
  return std::move(*m);
}

/// What JitModule::compile and compileToObject do to a module before code generation:
/// the target's data layout and per-function attributes, the bodies of \p externals
/// dropped (called by address), only what \p entries reach read, everything else
/// internalised, \p outOfLine kept from being inlined, then LLVM's O3 pipeline.
/// Reads only the bodies the entry points reach (the rest of a lazily loaded library stays
/// unread), with the functions \p externals provides left as declarations.
static Error loadReachableBodies(llvm::Module &M, const std::vector<std::string> &entries,
                                 const std::map<std::string, void *> &externals) {
  for (const auto &e : externals)
    if (llvm::Function *f = M.getFunction(e.first)) {
      f->deleteBody();
      f->setComdat(nullptr);
      f->setLinkage(llvm::GlobalValue::ExternalLinkage);
    }
  llvm::Error err = materializeReachable(M, entries, nullptr, nullptr);
  if (!err)
    err = dropUnmaterialized(M);
  if (err)
    return makeError(ErrorCode::Internal, "CPU backend: cannot read the kernel bitcode: ",
                     errString(std::move(err)));
  return Error::success();
}

/// The bitcode was compiled for generic x86-64; per-function attributes beat the
/// TargetMachine, so \p f gets the host's instead (vector width \p width).
static void setHostAttributes(llvm::Function &f, const HostInfo &host, unsigned width) {
  // A kernel written for an extension beyond the target's level (the VNNI int8 and BF16
  // kernels carry target("...,avx512vnni") in the bitcode) keeps that extension, so the
  // prebuilt objects of a level can hold it; the emitters call it only where the host has it.
  std::string features = host.features;
  llvm::StringRef own = f.getFnAttribute("target-features").getValueAsString();
  for (const char *ext : {"+avx512vnni", "+avx512bf16"})
    if (own.contains(ext) && features.find(ext) == std::string::npos)
      features += (features.empty() ? "" : ",") + std::string(ext);
  f.removeFnAttr("target-cpu");
  f.removeFnAttr("target-features");
  f.removeFnAttr("tune-cpu");
  f.addFnAttr("target-cpu", host.cpu);
  f.addFnAttr("target-features", features);
  f.addFnAttr("prefer-vector-width", std::to_string(width));
}

/// Every definition but the entry points (\p keep) becomes internal.
static void internalizeAllBut(llvm::Module &M, const std::set<std::string> &keep) {
  for (llvm::Function &f : M) {
    if (f.isDeclaration())
      continue;
    if (!keep.count(f.getName().str())) {
      f.setLinkage(llvm::GlobalValue::InternalLinkage);
      // A local symbol in a COMDAT group named like another object's (two bundles with
      // the same GEMM helpers) would be discarded with that group at link time.
      f.setComdat(nullptr);
    } else if (f.hasLinkOnceLinkage() || f.hasWeakLinkage()) {
      // A shared helper compiled on its own (an entry point like any kernel).
      f.setLinkage(llvm::GlobalValue::ExternalLinkage);
      f.setComdat(nullptr);
    }
  }
  for (llvm::GlobalVariable &g : M.globals())
    if (!g.isDeclaration() && !keep.count(g.getName().str())) {
      g.setLinkage(llvm::GlobalValue::InternalLinkage);
      g.setComdat(nullptr);
    }
}

/// Runs the module passes \p addPasses adds with \p tm's analyses (vectorisers on).
static void runModulePasses(llvm::Module &M, llvm::TargetMachine &tm,
                            const std::function<void(llvm::PassBuilder &,
                                                     llvm::ModulePassManager &)> &addPasses) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions pto;
  pto.LoopVectorization = true;
  pto.SLPVectorization = true;
  llvm::PassBuilder pb(&tm, pto);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm;
  addPasses(pb, mpm);
  mpm.run(M, mam);
}

void optimiseModule(llvm::Module &M, llvm::TargetMachine &tm) {
  runModulePasses(M, tm, [](llvm::PassBuilder &pb, llvm::ModulePassManager &mpm) {
    mpm.addPass(llvm::GlobalDCEPass());
    mpm.addPass(pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3));
  });
}

void interproceduralPasses(llvm::Module &M, llvm::TargetMachine &tm) {
  runModulePasses(M, tm, [](llvm::PassBuilder &, llvm::ModulePassManager &mpm) {
    mpm.addPass(llvm::GlobalDCEPass());
    mpm.addPass(llvm::IPSCCPPass());
    mpm.addPass(llvm::DeadArgumentEliminationPass());
  });
}

/// \p optimise: ends with optimiseModule (else the caller optimises).
static Error prepareModule(llvm::Module &M, llvm::TargetMachine &tm, const HostInfo &host,
                           const std::vector<std::string> &entries, const JitOptions &opts,
                           const std::map<std::string, void *> &externals,
                           const std::set<std::string> &outOfLine, bool optimise = true) {
  M.setDataLayout(tm.createDataLayout());
  M.setTargetTriple(tm.getTargetTriple().str());
  {
    PhaseTimer pt(M.getModuleIdentifier() + " " + entries.front() + ": load", opts.times);
    KILN_RETURN_IF_ERR(loadReachableBodies(M, entries, externals));
  }
  unsigned width = opts.preferVectorWidth ? opts.preferVectorWidth : (host.avx512 ? 512 : 256);
  for (llvm::Function &f : M) {
    if (f.isDeclaration())
      continue;
    setHostAttributes(f, host, width);
    if (outOfLine.count(f.getName().str()))
      f.addFnAttr(llvm::Attribute::NoInline);
  }
  internalizeAllBut(M, std::set<std::string>(entries.begin(), entries.end()));
  if (llvm::verifyModule(M, &llvm::errs()))
    return makeError(ErrorCode::Internal, "CPU backend: generated LLVM IR does not verify");
  if (optimise) {
    PhaseTimer pt(M.getModuleIdentifier() + " " + entries.front() + ": optimise", opts.times);
    optimiseModule(M, tm);
  }
  return Error::success();
}

Expected<std::unique_ptr<JitModule>>
JitModule::compileInParts(std::unique_ptr<JitModule> jm, llvm::Module &M,
                          const std::vector<CodegenPart> &parts,
                          const llvm::orc::JITTargetMachineBuilder &jtmb,
                          const std::vector<std::string> &entries, const JitOptions &opts,
                          const std::map<std::string, void *> &externals,
                          const std::string &objectCachePath, bool optimise) {
  PhaseTimer pt(M.getModuleIdentifier() + " " + entries.front() +
                    (optimise ? ": optimise + codegen (" : ": codegen (") +
                    std::to_string(parts.size()) + " parts)",
                opts.times);
  KILN_ASSIGN_OR_RETURN(
      std::vector<std::string> objects,
      splitCodegen(M, parts, jtmb, optimise, optimise && opts.keepIR ? &jm->ir_ : nullptr,
                   opts.times));
  if (!objectCachePath.empty())
    writeFileAtomically(objectCachePath, packObjectParts(objects));
  std::vector<std::unique_ptr<llvm::MemoryBuffer>> bufs;
  for (size_t i = 0; i < objects.size(); i++)
    bufs.push_back(llvm::MemoryBuffer::getMemBufferCopy(
        objects[i], M.getModuleIdentifier() + ".part" + std::to_string(i)));
  std::unique_ptr<JitModule> loaded = loadObjectBuffers(std::move(bufs), entries, opts, externals);
  if (!loaded)
    return makeError(ErrorCode::Internal, "CPU backend: the ", parts.size(), " objects of ",
                     M.getModuleIdentifier(), " do not link");
  loaded->ir_ = std::move(jm->ir_);
  loaded->asm_ = std::move(jm->asm_);
  return std::move(loaded);
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

  llvm::orc::JITTargetMachineBuilder jtmb = targetMachineBuilder(host);
  jtmb.setCodeGenOptLevel(llvm::CodeGenOpt::Aggressive);

  auto tm = jtmb.createTargetMachine();
  if (!tm)
    return makeError(ErrorCode::Internal, "CPU backend: ", errString(tm.takeError()));

  if (Error e = prepareModule(*M, **tm, host, entries, opts, externals, {}, /*optimise=*/false))
    return e;
  // A program's module is optimised in parts too, each on a thread of its own, after the
  // interprocedural passes that need all of it (not when its assembly is asked for,
  // which is printed from the whole optimised module).
  if (opts.splitCodegen && !opts.keepAsm && !planCodegenParts(*M, true).empty()) {
    {
      PhaseTimer pt(M->getModuleIdentifier() + " " + entries.front() + ": interprocedural",
                    opts.times);
      interproceduralPasses(*M, **tm);
    }
    std::vector<CodegenPart> parts = planCodegenParts(*M, true);
    if (!parts.empty()) {
      auto done = compileInParts(std::move(jm), *M, parts, jtmb, entries, opts, externals,
                                 objectCachePath, /*optimise=*/true);
      M.reset(); // before its context
      return done;
    }
  }
  // A module of stages that only call (every definition optnone: the shared kernels and
  // loop functions are elsewhere or absent) is generated as at -O0, with no IR passes:
  // LLVM 14's pass manager runs them on optnone functions too unless its instrumentation
  // is registered, and -O0 brings the fast register allocator.
  if (onlyOptnoneDefinitions(*M)) {
    jtmb.setCodeGenOptLevel(llvm::CodeGenOpt::None);
  } else {
    PhaseTimer pt(M->getModuleIdentifier() + " " + entries.front() + ": optimise", opts.times);
    optimiseModule(*M, **tm);
  }

  if (opts.keepIR) {
    llvm::raw_string_ostream os(jm->ir_);
    M->print(os, nullptr);
  }
  if (opts.keepAsm) {
    // At the level the code is generated with (-O0 for a module of optnone stages).
    auto asmTm = jtmb.createTargetMachine();
    if (!asmTm)
      return makeError(ErrorCode::Internal, "CPU backend: ", errString(asmTm.takeError()));
    auto clone = llvm::CloneModule(*M);
    llvm::SmallString<0> buf;
    llvm::raw_svector_ostream os(buf);
    llvm::legacy::PassManager pm;
    if (!(*asmTm)->addPassesToEmitFile(pm, os, nullptr, llvm::CGFT_AssemblyFile))
      pm.run(*clone);
    jm->asm_ = buf.str().str();
  }

  if (std::vector<CodegenPart> parts = opts.splitCodegen ? planCodegenParts(*M, false)
                                                          : std::vector<CodegenPart>();
      !parts.empty()) {
    auto done = compileInParts(std::move(jm), *M, parts, jtmb, entries, opts, externals,
                               objectCachePath, /*optimise=*/false);
    M.reset(); // before its context
    return done;
  }

  llvm::orc::LLJITBuilder builder;
  builder.setJITTargetMachineBuilder(jtmb);
  if (!objectCachePath.empty()) {
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
  auto gen = processSymbols((*jit)->getDataLayout().getGlobalPrefix());
  if (!gen)
    return makeError(ErrorCode::Internal, "CPU backend: ", errString(gen.takeError()));
  (*jit)->getMainJITDylib().addGenerator(std::move(*gen));
  if (auto err = defineExternals(**jit, externals))
    return makeError(ErrorCode::Internal, "CPU backend: ", errString(std::move(err)));
  std::string what = M->getModuleIdentifier() + " " + entries.front() + ": codegen";
  if (auto e = (*jit)->addIRModule(llvm::orc::ThreadSafeModule(std::move(M), std::move(ctx))))
    return makeError(ErrorCode::Internal, "CPU backend: ", errString(std::move(e)));
  jm->impl_->jit = std::move(*jit);
  {
    // Code is generated on the first lookup: do it here, where it is timed.
    PhaseTimer pt(what, opts.times);
    KILN_RETURN_IF_ERR(jm->lookup(entries.front()).takeError());
  }
  return std::move(jm);
}

std::unique_ptr<JitModule> JitModule::loadObject(const std::string &path,
                                                 const std::vector<std::string> &entries,
                                                 const JitOptions &opts,
                                                 const std::map<std::string, void *> &externals) {
  auto buf = llvm::MemoryBuffer::getFile(path, /*IsText=*/false,
                                         /*RequiresNullTerminator=*/false);
  if (!buf)
    return nullptr;
  std::vector<std::unique_ptr<llvm::MemoryBuffer>> bufs;
  std::vector<llvm::StringRef> parts;
  if (unpackObjectParts((*buf)->getBuffer(), parts)) {
    // Copies: each object needs its own aligned buffer.
    for (size_t i = 0; i < parts.size(); i++)
      bufs.push_back(
          llvm::MemoryBuffer::getMemBufferCopy(parts[i], path + ".part" + std::to_string(i)));
  } else {
    bufs.push_back(std::move(*buf));
  }
  return loadObjectBuffers(std::move(bufs), entries, opts, externals);
}

std::unique_ptr<JitModule> JitModule::loadObject(const void *data, size_t size,
                                                 const std::string &name,
                                                 const std::vector<std::string> &entries,
                                                 const JitOptions &opts,
                                                 const std::map<std::string, void *> &externals) {
  auto buf = llvm::MemoryBuffer::getMemBuffer(
      llvm::StringRef(static_cast<const char *>(data), size), name,
      /*RequiresNullTerminator=*/false);
  std::vector<std::unique_ptr<llvm::MemoryBuffer>> bufs;
  bufs.push_back(std::move(buf));
  return loadObjectBuffers(std::move(bufs), entries, opts, externals);
}

std::unique_ptr<JitModule> JitModule::loadObjects(const std::vector<ObjectBytes> &objects,
                                                  const std::vector<std::string> &entries,
                                                  const JitOptions &opts,
                                                  const std::map<std::string, void *> &externals) {
  std::vector<std::unique_ptr<llvm::MemoryBuffer>> bufs;
  for (const ObjectBytes &o : objects)
    bufs.push_back(llvm::MemoryBuffer::getMemBuffer(
        llvm::StringRef(static_cast<const char *>(o.data), o.size), o.name,
        /*RequiresNullTerminator=*/false));
  return loadObjectBuffers(std::move(bufs), entries, opts, externals);
}

std::unique_ptr<JitModule>
JitModule::loadObjectBuffers(std::vector<std::unique_ptr<llvm::MemoryBuffer>> bufs,
                             const std::vector<std::string> &entries, const JitOptions &opts,
                             const std::map<std::string, void *> &externals) {
  initLLVM();
  std::unique_ptr<JitModule> jm(new JitModule());
  jm->host_ = detectHost(opts);
  auto jit =
      llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(targetMachineBuilder(jm->host_)).create();
  if (!jit) {
    llvm::consumeError(jit.takeError());
    return nullptr;
  }
  auto gen = processSymbols((*jit)->getDataLayout().getGlobalPrefix());
  if (!gen) {
    llvm::consumeError(gen.takeError());
    return nullptr;
  }
  (*jit)->getMainJITDylib().addGenerator(std::move(*gen));
  if (auto e = defineExternals(**jit, externals)) {
    llvm::consumeError(std::move(e));
    return nullptr;
  }
  jm->objects_ = bufs.size();
  for (auto &buf : bufs)
    if (auto e = (*jit)->addObjectFile(std::move(buf))) {
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

Expected<std::string> compileToObject(std::unique_ptr<llvm::Module> M,
                                      const std::vector<std::string> &entries,
                                      const JitOptions &opts,
                                      const std::vector<std::string> &outOfLine) {
  initLLVM();
  HostInfo host = detectHost(opts);
  std::string triple = llvm::sys::getProcessTriple();
  std::string err;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, err);
  if (!target)
    return makeError(ErrorCode::Internal, "CPU backend: no LLVM target for ", triple, ": ", err);
  // As the JIT's (JITTargetMachineBuilder: default target options), but position-
  // independent, so that the object links into PIE executables and shared libraries.
  llvm::TargetOptions to;
  std::unique_ptr<llvm::TargetMachine> tm(target->createTargetMachine(
      triple, host.cpu, host.features, to, llvm::Reloc::PIC_, llvm::CodeModel::Small,
      llvm::CodeGenOpt::Aggressive));
  if (!tm)
    return makeError(ErrorCode::Internal, "CPU backend: cannot create a target machine for ",
                     host.cpu);
  std::set<std::string> noInline(outOfLine.begin(), outOfLine.end());
  KILN_RETURN_IF_ERR(prepareModule(*M, *tm, host, entries, opts, {}, noInline));
  llvm::SmallString<0> buf;
  {
    PhaseTimer pt(M->getModuleIdentifier() + ": object code", opts.times);
    llvm::raw_svector_ostream os(buf);
    llvm::legacy::PassManager pm;
    if (tm->addPassesToEmitFile(pm, os, nullptr, llvm::CGFT_ObjectFile))
      return makeError(ErrorCode::Internal, "CPU backend: ", host.cpu,
                       " cannot emit object files");
    pm.run(*M);
  }
  return std::string(buf.str());
}

} // namespace kiln::cpu
