#include "Jit.h"

#include "llvm/Analysis/TargetTransformInfo.h"
#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/ExecutionEngine/Orc/ExecutionUtils.h"
#include "llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/ExecutionEngine/Orc/ThreadSafeModule.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/MC/SubtargetFeature.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/Host.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Transforms/IPO/GlobalDCE.h"
#include "llvm/Transforms/Utils/Cloning.h"

#include <mutex>
#include <set>

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
                   const std::map<std::string, void *> &externals) {
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

  auto jit = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(*jtmb).create();
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

Expected<std::map<std::string, void *>> getSharedKernels(const std::vector<std::string> &names,
                                                         const JitOptions &opts) {
  static std::mutex m;
  static std::map<std::string, std::unique_ptr<JitModule>> modules; // by configuration
  HostInfo host = detectHost(opts);
  std::string key = host.cpu + "|" + host.features + "|" + std::to_string(opts.preferVectorWidth);
  for (const auto &n : names)
    key += "|" + n;
  std::lock_guard<std::mutex> l(m);
  auto it = modules.find(key);
  if (it == modules.end()) {
    auto ctx = std::make_unique<llvm::LLVMContext>();
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<llvm::Module> mod, loadLibjitModule(*ctx));
    JitOptions o = opts;
    o.keepIR = o.keepAsm = false;
    KILN_ASSIGN_OR_RETURN(std::unique_ptr<JitModule> jm,
                          JitModule::compile(std::move(ctx), std::move(mod), names, o));
    it = modules.emplace(key, std::move(jm)).first;
  }
  std::map<std::string, void *> addrs;
  for (const auto &n : names) {
    KILN_ASSIGN_OR_RETURN(void *a, it->second->lookup(n));
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
