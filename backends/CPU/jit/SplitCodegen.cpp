// A module optimised and compiled in parts, one thread per core (see JitInternal.h).

#include "JitInternal.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/Bitcode/BitcodeReader.h"
#include "llvm/Bitcode/BitcodeWriter.h"
#include "llvm/IR/GlobalVariable.h"
#include "llvm/IR/InstrTypes.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/Transforms/Utils/Cloning.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>

namespace kiln::cpu {

namespace {

/// Below this many IR instructions a part is not worth a thread of its own: cloning the
/// module, writing and reading its bitcode and starting the thread would cost more than
/// the code generation they move.
constexpr unsigned kMinPartInstrs = 400;
/// The same for a part still to be optimised, counted before: a loop function is a few
/// calls of kernels still to be inlined, and one of 10-20 instructions costs some 3-4 ms
/// of O3 and code generation once they are (lraspp_mobilenet_v3's six: two parts of three
/// on two cores instead of one part of six).
constexpr unsigned kMinPartInstrsBeforeOptimising = 30;
constexpr unsigned kMaxParts = 8;

/// Header of a file of several objects (see packObjectParts); not an ELF magic, so an
/// older build that finds such a file fails to load it and compiles instead.
constexpr char kPartsMagic[8] = {'K', 'I', 'L', 'N', 'P', 'R', 'T', 'S'};

/// True when every use of \p f is a direct call: only such functions can live in another
/// object than their users, where calls reach them through the linker's stubs (an address
/// taken with a 32-bit relocation could lie out of range).
bool onlyCalled(const llvm::Function &f) {
  for (const llvm::Use &u : f.uses()) {
    auto *cb = llvm::dyn_cast<llvm::CallBase>(u.getUser());
    if (!cb || cb->getCalledOperand() != &f)
      return false;
  }
  return true;
}

/// \p defs spread over \p n parts of about equal instruction counts (largest first,
/// each to the lightest part), appended to \p parts.
void spread(std::vector<llvm::Function *> defs, unsigned n, bool fast,
            std::vector<CodegenPart> &parts) {
  if (defs.empty())
    return;
  std::stable_sort(defs.begin(), defs.end(), [](llvm::Function *a, llvm::Function *b) {
    return a->getInstructionCount() > b->getInstructionCount();
  });
  size_t first = parts.size();
  std::vector<uint64_t> load(n, 0);
  parts.resize(first + n);
  for (llvm::Function *f : defs) {
    unsigned p = unsigned(std::min_element(load.begin(), load.end()) - load.begin());
    parts[first + p].functions.push_back(f);
    parts[first + p].fast = fast;
    load[p] += f->getInstructionCount() + 1;
  }
}

/// Object code of the module in \p bitcode, read into a context of its own (so that
/// several threads generate code at once), or the error as text. \p fast: at -O0;
/// \p optimise: through optimiseModule first (not a fast part), its IR then to \p ir.
/// \p label, when not empty, names the part in the phase times printed to stderr.
std::string emitPart(const std::string &bitcode, llvm::orc::JITTargetMachineBuilder jtmb,
                     bool fast, bool optimise, std::string *ir, std::string &object,
                     const std::string &label) {
  llvm::LLVMContext ctx;
  llvm::MemoryBufferRef ref(bitcode, "part.bc");
  auto m = llvm::parseBitcodeFile(ref, ctx);
  if (!m)
    return errString(m.takeError());
  if (fast)
    jtmb.setCodeGenOptLevel(llvm::CodeGenOpt::None);
  auto tm = jtmb.createTargetMachine();
  if (!tm)
    return errString(tm.takeError());
  if (optimise && !fast) {
    PhaseTimer pt(label + ": optimise", !label.empty());
    optimiseModule(**m, **tm);
  }
  if (ir) {
    llvm::raw_string_ostream os(*ir);
    (*m)->print(os, nullptr);
  }
  PhaseTimer pt(label + (fast ? ": codegen -O0" : ": codegen"), !label.empty());
  llvm::SmallString<0> buf;
  llvm::raw_svector_ostream os(buf);
  llvm::legacy::PassManager pm;
  if ((*tm)->addPassesToEmitFile(pm, os, nullptr, llvm::CGFT_ObjectFile))
    return "the target cannot emit object files";
  pm.run(**m);
  object.assign(buf.begin(), buf.end());
  return "";
}

/// True when a function marked optnone calls \p f.
bool calledFromOptnone(const llvm::Function &f) {
  for (const llvm::User *u : f.users())
    if (auto *cb = llvm::dyn_cast<llvm::CallBase>(u))
      if (cb->getFunction()->hasFnAttribute(llvm::Attribute::OptimizeNone))
        return true;
  return false;
}

} // namespace

std::vector<CodegenPart> planCodegenParts(const llvm::Module &M, bool beforeOptimising) {
  std::vector<CodegenPart> parts;
  if (!M.alias_empty() || !M.ifunc_empty())
    return parts;
  // Data is placed only as copies: constants of the library (unused ones, left by the
  // lazy load, or tables of its helpers) before optimising; none after.
  for (const llvm::GlobalVariable &g : M.globals())
    if (!g.use_empty() && !(beforeOptimising && g.hasLocalLinkage() && g.isConstant()))
      return parts;
  std::vector<llvm::Function *> calls, rest; // optnone (stages of calls) and the others
  uint64_t instrs = 0, restInstrs = 0;
  for (const llvm::Function &cf : M) {
    if (cf.isDeclaration())
      continue;
    if (!onlyCalled(cf))
      return parts;
    auto *f = const_cast<llvm::Function *>(&cf);
    bool optnone = f->hasFnAttribute(llvm::Attribute::OptimizeNone);
    if (beforeOptimising && !optnone) {
      bool fromStage = calledFromOptnone(*f);
      if (fromStage && !f->hasFnAttribute(llvm::Attribute::NoInline))
        return parts; // the optimiser could inline it into the stage
      if (!fromStage && f->hasLocalLinkage())
        continue; // a helper: copied into the parts that call it
    }
    (optnone ? calls : rest).push_back(f);
    instrs += f->getInstructionCount();
    if (!optnone)
      restInstrs += f->getInstructionCount();
  }
  if (instrs < kMinPartInstrs)
    return parts;
  unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  // The stages that only call (optnone) are one part, generated as at -O0 (fast register
  // allocation too); the rest in up to one part per core.
  unsigned minPart = beforeOptimising ? kMinPartInstrsBeforeOptimising : kMinPartInstrs;
  auto partsFor = [&](uint64_t n, size_t defs, unsigned threads) {
    return unsigned(
        std::max<uint64_t>(1, std::min<uint64_t>({threads, kMaxParts, defs, n / minPart})));
  };
  // The optimised parts first (the threads take parts in order), the -O0 one last.
  spread(rest, partsFor(restInstrs, rest.size(), cores), /*fast=*/false, parts);
  if (!calls.empty())
    spread(calls, 1, /*fast=*/true, parts);
  if (parts.size() < 2)
    parts.clear();
  return parts;
}

Expected<std::vector<std::string>> splitCodegen(llvm::Module &M,
                                                const std::vector<CodegenPart> &plan,
                                                const llvm::orc::JITTargetMachineBuilder &jtmb,
                                                bool optimise, std::string *ir,
                                                bool times) {
  // Every definition becomes external, so that each part can call the others.
  llvm::DenseMap<const llvm::GlobalValue *, size_t> partOf;
  for (size_t p = 0; p < plan.size(); p++)
    for (llvm::Function *f : plan[p].functions) {
      if (f->hasLocalLinkage()) {
        f->setLinkage(llvm::GlobalValue::ExternalLinkage);
        f->setVisibility(llvm::GlobalValue::DefaultVisibility);
      }
      partOf[f] = p;
    }
  size_t n = plan.size();
  std::vector<std::string> bitcode(n);
  PhaseTimer cloning(M.getModuleIdentifier() + ": " + std::to_string(n) + " parts as bitcode",
                     times);
  for (size_t p = 0; p < n; p++) {
    llvm::ValueToValueMapTy vmap;
    std::unique_ptr<llvm::Module> part =
        llvm::CloneModule(M, vmap, [&](const llvm::GlobalValue *gv) {
          auto it = partOf.find(gv);
          if (it != partOf.end())
            return it->second == p;
          // A helper or constant in no part (planned beforeOptimising): a copy for every
          // optimised part, which drops it if unused (optimiseModule starts with
          // GlobalDCE); the -O0 part gets the constants only.
          if (!optimise || !gv->hasLocalLinkage())
            return false;
          return !plan[p].fast || llvm::isa<llvm::GlobalVariable>(gv);
        });
    llvm::raw_string_ostream os(bitcode[p]);
    llvm::WriteBitcodeToFile(*part, os);
    os.flush();
  }
  cloning.stop();
  // The parts on up to one thread per core, this one included.
  std::vector<std::string> objects(n), errors(n), irs(n);
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t p; (p = next++) < n;)
      errors[p] = emitPart(bitcode[p], jtmb, plan[p].fast, optimise, ir ? &irs[p] : nullptr,
                           objects[p],
                           times ? M.getModuleIdentifier() + " part " + std::to_string(p) + " (" +
                                       std::to_string(plan[p].functions.size()) + " functions)"
                                 : "");
  };
  unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> threads;
  for (size_t t = 1; t < std::min<size_t>(n, cores); t++)
    threads.emplace_back(worker);
  worker();
  for (std::thread &t : threads)
    t.join();
  for (size_t p = 0; p < n; p++)
    if (!errors[p].empty())
      return makeError(ErrorCode::Internal, "CPU backend: code generation of part ", p, " of ",
                       n, " of ", M.getModuleIdentifier(), ": ", errors[p]);
  if (ir)
    for (const std::string &t : irs)
      *ir += t;
  return objects;
}

std::string packObjectParts(const std::vector<std::string> &objects) {
  std::string out(kPartsMagic, sizeof kPartsMagic);
  auto putU64 = [&](uint64_t v) { out.append(reinterpret_cast<const char *>(&v), sizeof v); };
  putU64(objects.size());
  for (const std::string &o : objects)
    putU64(o.size());
  for (const std::string &o : objects)
    out += o;
  return out;
}

bool unpackObjectParts(llvm::StringRef file, std::vector<llvm::StringRef> &objects) {
  objects.clear();
  if (file.size() < sizeof kPartsMagic ||
      std::memcmp(file.data(), kPartsMagic, sizeof kPartsMagic) != 0)
    return false;
  size_t pos = sizeof kPartsMagic;
  auto getU64 = [&](uint64_t &v) {
    if (file.size() - pos < sizeof v)
      return false;
    std::memcpy(&v, file.data() + pos, sizeof v);
    pos += sizeof v;
    return true;
  };
  uint64_t n = 0;
  if (!getU64(n) || n == 0 || n > kMaxParts)
    return false;
  std::vector<uint64_t> sizes(n);
  for (uint64_t &s : sizes)
    if (!getU64(s))
      return false;
  for (uint64_t s : sizes) {
    if (file.size() - pos < s)
      return false;
    objects.push_back(file.substr(pos, s));
    pos += s;
  }
  return pos == file.size();
}

} // namespace kiln::cpu
