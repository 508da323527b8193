// Ahead-of-time bundles (Bundle.h): the CPU backend's program as an object file, a C
// header and the packed weights.
#include "Bundle.h"

#include "backends/CPU/CPUBackend.h"
#include "backends/CPU/codegen/Codegen.h"
#include "kiln/Backend/Compiler.h"
#include "kiln/Memory/MemoryPipeline.h"

#include "llvm/IR/Constants.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <set>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

namespace kiln::cpu {

namespace {

constexpr uint64_t kRegionAlign = 64; // the kernels' vector alignment (codegen's kAlign)

uint64_t alignUp64(uint64_t n) { return (n + kRegionAlign - 1) / kRegionAlign * kRegionAlign; }

/// One graph input or output in the mutable region.
struct Slot {
  std::string name;
  const Placeholder *ph = nullptr;
  uint64_t offset = 0;
  bool input = true;
};

/// The enumerator of \p k in the header's kiln_elem_kind.
const char *elemKindEnum(ElemKind k) {
  switch (k) {
  case ElemKind::Float:
    return "KILN_FLOAT";
  case ElemKind::Float16:
    return "KILN_FLOAT16";
  case ElemKind::BFloat16:
    return "KILN_BFLOAT16";
  case ElemKind::Int8Q:
    return "KILN_INT8Q";
  case ElemKind::UInt8Q:
    return "KILN_UINT8Q";
  case ElemKind::Int32Q:
    return "KILN_INT32Q";
  case ElemKind::Int32I:
    return "KILN_INT32";
  case ElemKind::Int64I:
    return "KILN_INT64";
  case ElemKind::Bool:
    return "KILN_BOOL";
  }
  return "KILN_FLOAT";
}

/// \p s as the tail of a C macro name: upper case, every other character '_'.
std::string macroPart(const std::string &s) {
  std::string out;
  for (char c : s)
    out += std::isalnum(static_cast<unsigned char>(c)) ? char(std::toupper(c)) : '_';
  return out.empty() ? std::string("_") : out;
}

/// \p s as the contents of a C string literal.
std::string cString(const std::string &s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (static_cast<unsigned char>(c) < 32) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\%03o", unsigned(static_cast<unsigned char>(c)));
      out += buf;
      continue;
    }
    out += c;
  }
  return out;
}

/// \p s safe inside a C comment.
std::string commentText(std::string s) {
  for (size_t i; (i = s.find("*/")) != std::string::npos;)
    s.replace(i, 2, "* /");
  for (char &c : s)
    if (c == '\n')
      c = ' ';
  return s;
}

/// Files written under temporary names and renamed into place together, or removed.
class FileSet {
public:
  explicit FileSet(std::string dir) : dir_(std::move(dir)) {}
  ~FileSet() {
    for (const auto &f : files_)
      std::remove(f.first.c_str());
    if (createdDir_)
      ::rmdir(dir_.c_str());
  }
  void setCreatedDir() { createdDir_ = true; }
  /// Writes \p data to a temporary file of its own, renamed to \p name by commit().
  Error add(const std::string &name, const char *data, size_t size) {
    std::string final = dir_ + "/" + name;
    std::string tmp = dir_ + "/." + name + ".tmpXXXXXX";
    std::vector<char> path(tmp.begin(), tmp.end());
    path.push_back('\0');
    int fd = ::mkstemp(path.data());
    if (fd < 0)
      return makeError(ErrorCode::InvalidArgument, "cannot write to folder '", dir_,
                       "': ", std::strerror(errno));
    tmp = path.data();
    files_.push_back({tmp, final});
    size_t done = 0;
    while (done < size) {
      ssize_t n = ::write(fd, data + done, size - done);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0) {
        int err = errno;
        ::close(fd);
        return makeError(ErrorCode::InvalidArgument, "cannot write '", final,
                         "': ", std::strerror(err));
      }
      done += size_t(n);
    }
    ::fchmod(fd, 0644);
    if (::close(fd) != 0)
      return makeError(ErrorCode::InvalidArgument, "cannot write '", final,
                       "': ", std::strerror(errno));
    return Error::success();
  }
  Error commit() {
    for (size_t i = 0; i < files_.size(); i++)
      if (std::rename(files_[i].first.c_str(), files_[i].second.c_str()) != 0) {
        int err = errno;
        for (size_t j = 0; j < i; j++) // undo: leave nothing half-written behind
          std::remove(files_[j].second.c_str());
        return makeError(ErrorCode::InvalidArgument, "cannot write '", files_[i].second,
                         "': ", std::strerror(err));
      }
    files_.clear();
    createdDir_ = false;
    return Error::success();
  }

private:
  std::string dir_;
  std::vector<std::pair<std::string, std::string>> files_; // (temporary, final)
  bool createdDir_ = false;
};

/// Creates \p dir when missing (the last component only) and checks that files can be
/// created in it.
Error prepareDir(const std::string &dir, FileSet &files) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) {
    if (::mkdir(dir.c_str(), 0755) != 0)
      return makeError(ErrorCode::InvalidArgument, "cannot create folder '", dir,
                       "': ", std::strerror(errno));
    files.setCreatedDir();
  } else if (!S_ISDIR(st.st_mode)) {
    return makeError(ErrorCode::InvalidArgument, "'", dir, "' is not a folder");
  }
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return makeError(ErrorCode::InvalidArgument, "cannot write to folder '", dir,
                     "': ", std::strerror(errno));
  return Error::success();
}

/// Adds the entry point: `int NAME(uint8_t *constants, uint8_t *mutables, uint8_t
/// *activations[, parallel_for, user])` runs the stages of \p prog in order on the caller's
/// regions (what CPUFunction::execute does with its own).
/// The entry point's arguments: the three regions, and with threads the caller's
/// parallel-for and its user pointer (else null).
struct EntryArgs {
  llvm::Value *constants, *mutables, *activations, *parallelFor, *user;
};

/// True when a region the program uses is null, or (threaded) the parallel-for is.
llvm::Value *missingArgument(llvm::IRBuilder<> &B, const Program &prog,
                             const std::vector<Slot> &slots, const EntryArgs &a) {
  llvm::Value *missing = B.getFalse();
  auto need = [&](llvm::Value *p, uint64_t bytes) {
    if (bytes)
      missing = B.CreateOr(missing, B.CreateIsNull(p));
  };
  need(a.constants, prog.constantBytes);
  uint64_t mutableBytes = 0;
  for (const Slot &s : slots)
    mutableBytes += s.ph->getType()->sizeInBytes();
  need(a.mutables, mutableBytes);
  need(a.activations, prog.activationBytes);
  if (a.parallelFor)
    missing = B.CreateOr(missing, B.CreateIsNull(a.parallelFor));
  return missing;
}

/// The stages' buffer table on the stack (constants, activations, then each placeholder at
/// its offset in the mutable region); returns a pointer to its first entry.
llvm::Value *bufferTable(llvm::IRBuilder<> &B, const Program &prog,
                         const std::vector<Slot> &slots, const EntryArgs &a) {
  auto *i8p = llvm::Type::getInt8PtrTy(B.getContext());
  size_t nbufs = kFirstPlaceholderBase + prog.placeholders.size();
  auto *arrTy = llvm::ArrayType::get(i8p, nbufs);
  llvm::Value *bufs = B.CreateAlloca(arrTy);
  auto slot = [&](size_t k) { return B.CreateConstInBoundsGEP2_64(arrTy, bufs, 0, k); };
  B.CreateStore(a.constants, slot(kConstantBase));
  B.CreateStore(a.activations, slot(kActivationBase));
  std::map<const Placeholder *, uint64_t> offsets;
  for (const Slot &s : slots)
    offsets[s.ph] = s.offset;
  for (size_t k = 0; k < prog.placeholders.size(); k++)
    B.CreateStore(B.CreateConstInBoundsGEP1_64(B.getInt8Ty(), a.mutables,
                                               offsets.at(prog.placeholders[k])),
                  slot(kFirstPlaceholderBase + k));
  return slot(0);
}

/// The run-time checks' status words in the activation region, cleared; null without
/// checks.
llvm::Value *clearedStatus(llvm::IRBuilder<> &B, const Program &prog, llvm::Value *activations) {
  if (prog.statusOffset < 0)
    return nullptr;
  auto *i64 = B.getInt64Ty();
  llvm::Value *status = B.CreatePointerCast(
      B.CreateConstInBoundsGEP1_64(B.getInt8Ty(), activations, uint64_t(prog.statusOffset)),
      i64->getPointerTo());
  for (unsigned w = 0; w < 3; w++)
    B.CreateStore(B.getInt64(0), B.CreateConstInBoundsGEP1_64(i64, status, w));
  return status;
}

void addEntryPoint(llvm::Module &M, const Program &prog, const std::vector<Slot> &slots,
                   const std::string &name, unsigned threads) {
  llvm::LLVMContext &C = M.getContext();
  auto *i8p = llvm::Type::getInt8PtrTy(C);
  auto *i64 = llvm::Type::getInt64Ty(C);
  auto *i32 = llvm::Type::getInt32Ty(C);
  auto *voidTy = llvm::Type::getVoidTy(C);
  auto *taskTy = llvm::FunctionType::get(voidTy, {i8p, i64, i64}, false);
  auto *pfTy = llvm::FunctionType::get(voidTy, {i8p, i64, taskTy->getPointerTo(), i8p}, false);
  std::vector<llvm::Type *> params = {i8p, i8p, i8p};
  const bool threaded = threads > 1;
  if (threaded) {
    params.push_back(pfTy->getPointerTo());
    params.push_back(i8p);
  }
  auto *fty = llvm::FunctionType::get(i32, params, false);
  auto *F = llvm::Function::Create(fty, llvm::GlobalValue::ExternalLinkage, name, M);
  F->addFnAttr(llvm::Attribute::NoUnwind);
  auto it = F->arg_begin();
  EntryArgs a{&*it++, &*it++, &*it++, nullptr, nullptr};
  if (threaded) {
    a.parallelFor = &*it++;
    a.user = &*it++;
  }
  auto *entry = llvm::BasicBlock::Create(C, "entry", F);
  auto *bad = llvm::BasicBlock::Create(C, "bad_argument", F);
  auto *run = llvm::BasicBlock::Create(C, "run", F);
  llvm::IRBuilder<> B(entry);
  // A region the program uses must be given (-1 otherwise).
  B.CreateCondBr(missingArgument(B, prog, slots, a), bad, run);
  llvm::IRBuilder<>(bad).CreateRet(llvm::ConstantInt::get(i32, -1, true));

  B.SetInsertPoint(run);
  llvm::Value *bufsPtr = bufferTable(B, prog, slots, a);
  llvm::Value *status = clearedStatus(B, prog, a.activations);
  for (const Stage &s : prog.stages) {
    llvm::Function *sf = M.getFunction(s.name);
    // Stages stay calls, as in the JIT: a stage loads its buffer pointers from the table
    // with !invariant.load (constant during a call of the stage), which inlined here would
    // let LLVM hoist those loads above the stores that fill the table (compiler_fuzz,
    // test/fuzz/README.md, "Bugs found" 4: null or stale pointers, a crash).
    sf->addFnAttr(llvm::Attribute::NoInline);
    if (s.parallel && threaded)
      B.CreateCall(pfTy, a.parallelFor,
                   {a.user, B.getInt64(threads), B.CreatePointerCast(sf, taskTy->getPointerTo()),
                    B.CreatePointerCast(bufsPtr, i8p)});
    else
      B.CreateCall(sf->getFunctionType(), sf, {bufsPtr, B.getInt64(0), B.getInt64(1)});
    if (status) {
      // A kernel that checks its input failed: return 1 + the check's index.
      llvm::Value *v = B.CreateLoad(i64, status);
      auto *fail = llvm::BasicBlock::Create(C, "check_failed", F);
      auto *next = llvm::BasicBlock::Create(C, "next", F);
      B.CreateCondBr(B.CreateICmpNE(v, B.getInt64(0)), fail, next);
      llvm::IRBuilder<> fb(fail);
      fb.CreateRet(fb.CreateTrunc(v, i32));
      B.SetInsertPoint(next);
    }
  }
  B.CreateRet(llvm::ConstantInt::get(i32, 0));
}

/// The header's opening comment: target, threads, the three regions and the return codes.
void headerComment(std::ostream &h, const BundleOptions &opts, const BundleResult &r,
                   unsigned threads) {
  const std::string &n = opts.name;
  h << "/* " << n << ".h: a Kiln ahead-of-time bundle"
    << (opts.source.empty() ? "" : " of " + commentText(opts.source)) << ", generated by "
    << "kiln-compile; do not edit.\n"
    << " * Target " << r.target << " (" << (r.avx512 ? "AVX-512" : "AVX2") << " kernels), "
    << (threads > 1 ? std::to_string(threads) + " threads through the caller's parallel-for"
                    : std::string("serial"))
    << ". The contract: docs/Bundles.md in Kiln.\n"
    << " *\n"
    << " * Three regions, each at least " << kRegionAlign << "-byte aligned, owned by the caller:\n"
    << " *   constants    the weights: " << n << ".weights read into it"
    << (opts.embedWeights ? " (here: " + n + "_weights, inside the object)" : "")
    << "; read only\n"
    << " *   mutables     inputs and outputs at the offsets below\n"
    << " *   activations  scratch; its contents need not survive between runs\n"
    << " * " << n << "() returns 0, -1 for a null region, or 1 + the index of a failed\n"
    << " * run-time check (listed below). The bundle allocates nothing, has no mutable globals\n"
    << " * and starts no threads; calls with distinct activation regions may run concurrently.\n"
    << " */\n";
}

/// The types every bundle header shares, guarded so that several headers can be included.
const char *const kBundleTypes =
    "#ifndef KILN_BUNDLE_TYPES_V1\n#define KILN_BUNDLE_TYPES_V1\n"
    "/* Element types (Kiln's ElemKind). Quantized kinds hold integers q meaning\n"
    "   scale * (q - zero_point). Bool is one byte, 0 or 1. */\n"
    "typedef enum {\n  KILN_FLOAT = 0,\n  KILN_FLOAT16 = 1,\n  KILN_BFLOAT16 = 2,\n"
    "  KILN_INT8Q = 3,\n  KILN_UINT8Q = 4,\n  KILN_INT32Q = 5,\n  KILN_INT32 = 6,\n"
    "  KILN_INT64 = 7,\n  KILN_BOOL = 8\n} kiln_elem_kind;\n\n"
    "#define KILN_BUNDLE_MAX_RANK 8\n\n"
    "/* An input or output: its place in the mutable region, row-major, dense. */\n"
    "typedef struct {\n  const char *name;\n  kiln_elem_kind kind;\n  uint32_t rank;\n"
    "  int64_t shape[KILN_BUNDLE_MAX_RANK];\n  uint64_t offset; /* bytes into mutables */\n"
    "  uint64_t size;   /* bytes */\n  float scale;     /* quantized kinds */\n"
    "  int32_t zero_point;\n} kiln_bundle_tensor;\n\n"
    "/* Bundles built with --threads N: a parallel stage is a task of N shares. The\n"
    "   caller's parallel_for(user, n, fn, task) must call fn(task, t, n) exactly once for\n"
    "   every t in [0, n), on any threads in any order, and return after all returned.\n"
    "   A loop on the calling thread is a correct (serial) implementation. */\n"
    "typedef void (*kiln_task_fn)(void *task, int64_t tid, int64_t nthreads);\n"
    "typedef void (*kiln_parallel_for_fn)(void *user, int64_t n, kiln_task_fn fn, "
    "void *task);\n"
    "#endif /* KILN_BUNDLE_TYPES_V1 */\n\n";

/// Offset and size macros per input and output, by index and by (deduplicated) name.
void headerSlotMacros(std::ostream &h, const std::string &N, const std::vector<Slot> &slots) {
  std::set<std::string> used;
  unsigned ki = 0, ko = 0;
  for (const Slot &s : slots) {
    const Type &t = *s.ph->getType();
    std::string idx = (s.input ? "INPUT_" + std::to_string(ki++) : "OUTPUT_" + std::to_string(ko++));
    std::string byName = N + "_" + macroPart(s.name);
    if (!used.insert(byName).second)
      byName = N + "_" + idx + "_" + macroPart(s.name);
    used.insert(byName);
    h << "/* " << (s.input ? "input" : "output") << " \"" << commentText(s.name) << "\": "
      << commentText(t.toString()) << " */\n";
    h << "#define " << N << "_" << idx << "_OFFSET " << s.offset << "ull\n"
      << "#define " << N << "_" << idx << "_SIZE " << t.sizeInBytes() << "ull\n"
      << "#define " << byName << "_OFFSET " << s.offset << "ull\n"
      << "#define " << byName << "_SIZE " << t.sizeInBytes() << "ull\n";
  }
}

/// The static table of the inputs (\p input) or the outputs, \p count entries.
void headerSlotTable(std::ostream &h, const std::string &n, const std::vector<Slot> &slots,
                     bool input, unsigned count) {
  h << "static const kiln_bundle_tensor " << n << (input ? "_inputs" : "_outputs") << "["
    << std::max(1u, count) << "] = {\n";
  for (const Slot &s : slots) {
    if (s.input != input)
      continue;
    const Type &t = *s.ph->getType();
    h << "  {\"" << cString(s.name) << "\", " << elemKindEnum(t.kind) << ", " << t.rank()
      << ", {";
    for (size_t d = 0; d < t.rank(); d++)
      h << (d ? ", " : "") << t.dims[d];
    if (!t.rank())
      h << "0";
    char scale[32];
    std::snprintf(scale, sizeof scale, "%.9ef", double(t.scale));
    h << "}, " << s.offset << "ull, " << t.sizeInBytes() << "ull, " << scale << ", "
      << t.offset << "},\n";
  }
  if (!count)
    h << "  {0, KILN_FLOAT, 0, {0}, 0, 0, 0.0f, 0}\n";
  h << "};\n";
}

/// The run-time checks the entry point reports, and where their value and position are.
void headerChecks(std::ostream &h, const std::string &n, const Program &prog) {
  if (prog.checks.empty())
    return;
  h << "\n/* Run-time checks (" << n << "() returns 1 + the index on failure):\n";
  for (size_t i = 0; i < prog.checks.size(); i++)
    h << " *   " << i + 1 << ": " << commentText(prog.checks[i].before) << "<value> at position "
      << "<position>" << commentText(prog.checks[i].after) << "\n";
  h << " * (the failing value and position are the int64 words at byte offset "
    << prog.statusOffset + 8 << " of activations) */\n";
}

std::string headerText(const BundleOptions &opts, const BundleResult &r, const Program &prog,
                       const std::vector<Slot> &slots, unsigned threads) {
  const std::string &n = opts.name;
  const std::string N = macroPart(n);
  std::ostringstream h;
  headerComment(h, opts, r, threads);
  h << "#ifndef " << N << "_KILN_BUNDLE_H\n#define " << N << "_KILN_BUNDLE_H\n\n"
    << "#include <stdint.h>\n\n#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n";
  h << kBundleTypes;
  h << "#define " << N << "_ALIGNMENT " << kRegionAlign << "u\n"
    << "#define " << N << "_CONSTANTS_SIZE " << r.constantBytes << "ull\n"
    << "#define " << N << "_MUTABLES_SIZE " << r.mutableBytes << "ull\n"
    << "#define " << N << "_ACTIVATIONS_SIZE " << r.activationBytes << "ull\n"
    << "#define " << N << "_THREADS " << std::max(1u, threads) << "\n"
    << "#define " << N << "_EMBEDDED_WEIGHTS " << (opts.embedWeights ? 1 : 0) << "\n";
  unsigned nin = 0, nout = 0;
  for (const Slot &s : slots)
    (s.input ? nin : nout)++;
  h << "#define " << N << "_NUM_INPUTS " << nin << "\n#define " << N << "_NUM_OUTPUTS " << nout
    << "\n\n";
  headerSlotMacros(h, N, slots);
  h << "\n";
  headerSlotTable(h, n, slots, true, nin);
  headerSlotTable(h, n, slots, false, nout);
  headerChecks(h, n, prog);
  h << "\n";
  if (opts.embedWeights)
    h << "/* The weights, to pass as constants (" << N << "_CONSTANTS_SIZE bytes). */\n"
      << "extern const uint8_t " << n << "_weights[];\n\n";
  h << "/* Runs the model once: reads the inputs in mutables, writes the outputs there. */\n";
  if (threads > 1)
    h << "int " << n << "(uint8_t *constants, uint8_t *mutables, uint8_t *activations,\n"
      << "    kiln_parallel_for_fn parallel_for, void *user);\n";
  else
    h << "int " << n << "(uint8_t *constants, uint8_t *mutables, uint8_t *activations);\n";
  h << "\n#ifdef __cplusplus\n}\n#endif\n\n#endif /* " << N << "_KILN_BUNDLE_H */\n";
  return h.str();
}

} // namespace

bool isValidBundleName(const std::string &name) {
  if (name.empty() || name.size() > 64 || std::isdigit(static_cast<unsigned char>(name[0])))
    return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_')
      return false;
  return true;
}

namespace {

/// An error for options no bundle can be written with.
Error checkBundleOptions(const BundleOptions &opts) {
  if (!isValidBundleName(opts.name))
    return makeError(ErrorCode::InvalidArgument, "bundle name '", opts.name,
                     "' is not a C identifier (letters, digits and '_', not starting with a "
                     "digit, at most 64 characters)");
  if (opts.target != "host" && !isKnownTargetCpu(opts.target))
    return makeError(ErrorCode::InvalidArgument, "unknown target '", opts.target,
                     "' (expected x86-64-v4, x86-64-v3, x86-64 or host)");
  if (opts.outDir.empty())
    return makeError(ErrorCode::InvalidArgument, "no output folder given");
  return Error::success();
}

/// f planned and emitted by the CPU backend for the bundle's target and thread count; cg
/// receives the code generation options used.
Expected<EmittedProgram> emitBundleProgram(Function *f, const BundleOptions &opts,
                                           unsigned threads, CodegenOptions &cg) {
  CPUBackend backend;
  CompileOptions co = opts.compile;
  co.threads = threads;
  KILN_RETURN_IF_ERR(checkBackendOptions("CPU", co, backend.getParameters()));
  KILN_ASSIGN_OR_RETURN(CPUBackendOptions bo, parseCPUBackendOptions(co, CPUBackendOptions()));
  KILN_RETURN_IF_ERR(prepareFunction(f, backend));
  KILN_ASSIGN_OR_RETURN(PlannedIR P, backend.planIR(f, co));
  cg = getCodegenOptions(bo, co);
  cg.borrowConstants = false; // the bundle's weights are one file: every constant in it
  cg.threads = threads;
  cg.profile = false; // one stage per instruction: the JIT's profiling layout, not wanted here
  cg.jit.keepIR = cg.jit.keepAsm = false;
  cg.jit.targetCpu = opts.target == "host" ? "" : opts.target;
  Expected<EmittedProgram> emitted = emitProgram(*P.F, P.plan, cg);
  if (!emitted)
    return emitted.takeError().addContext("CPU backend compiling '" + f->getName() + "'");
  return emitted;
}

/// The mutable region: inputs, then outputs, each 64-byte aligned; top receives its size.
/// Every placeholder of the program must be one of them.
Expected<std::vector<Slot>> mutableSlots(const std::vector<BundleTensor> &inputs,
                                         const std::vector<BundleTensor> &outputs,
                                         const Program &prog, const std::string &name,
                                         uint64_t &top) {
  std::vector<Slot> slots;
  top = 0;
  std::set<const Placeholder *> listed;
  for (int pass = 0; pass < 2; pass++)
    for (const BundleTensor &t : pass == 0 ? inputs : outputs) {
      if (!t.placeholder || !listed.insert(t.placeholder).second)
        continue;
      Slot s{t.name, t.placeholder, top, pass == 0};
      top = alignUp64(top + t.placeholder->getType()->sizeInBytes());
      slots.push_back(s);
    }
  for (const Placeholder *ph : prog.placeholders)
    if (!listed.count(ph))
      return makeError(ErrorCode::InvalidArgument, "bundle '", name, "': placeholder '",
                       ph->getName(), "' is neither an input nor an output");
  return slots;
}

/// The program's constants as the exported global NAME_weights of the module.
void embedWeights(EmittedProgram &ep, const Program &prog, const std::string &name) {
  llvm::StringRef bytes(prog.constants, prog.constantBytes);
  auto *init = llvm::ConstantDataArray::getRaw(bytes, prog.constantBytes,
                                               llvm::Type::getInt8Ty(*ep.ctx));
  auto *g = new llvm::GlobalVariable(*ep.module, init->getType(), /*isConstant=*/true,
                                     llvm::GlobalValue::ExternalLinkage, init,
                                     name + "_weights");
  g->setAlignment(llvm::Align(kRegionAlign));
}

} // namespace

Expected<BundleResult> writeBundle(Function *f, const std::vector<BundleTensor> &inputs,
                                   const std::vector<BundleTensor> &outputs,
                                   const BundleOptions &opts) {
  KILN_RETURN_IF_ERR(checkBundleOptions(opts));
  FileSet files(opts.outDir);
  KILN_RETURN_IF_ERR(prepareDir(opts.outDir, files));
  const unsigned threads = std::max(1u, opts.threads);
  CodegenOptions cg;
  KILN_ASSIGN_OR_RETURN(EmittedProgram ep, emitBundleProgram(f, opts, threads, cg));
  const Program &prog = *ep.prog;
  uint64_t top = 0;
  KILN_ASSIGN_OR_RETURN(std::vector<Slot> slots,
                        mutableSlots(inputs, outputs, prog, opts.name, top));

  BundleResult r;
  r.constantBytes = prog.constantBytes;
  r.mutableBytes = top;
  r.activationBytes = alignUp64(prog.activationBytes);
  r.target = ep.host.cpu;
  r.avx512 = ep.host.avx512;

  addEntryPoint(*ep.module, prog, slots, opts.name, threads);
  std::vector<std::string> exported = {opts.name};
  if (opts.embedWeights) {
    embedWeights(ep, prog, opts.name);
    exported.push_back(opts.name + "_weights");
  }
  KILN_ASSIGN_OR_RETURN(std::string object,
                        compileToObject(std::move(ep.module), exported, cg.jit, ep.sharedKernels));
  std::string header = headerText(opts, r, prog, slots, threads);

  KILN_RETURN_IF_ERR(files.add(opts.name + ".o", object.data(), object.size()));
  KILN_RETURN_IF_ERR(files.add(opts.name + ".h", header.data(), header.size()));
  r.files = {opts.outDir + "/" + opts.name + ".o", opts.outDir + "/" + opts.name + ".h"};
  if (!opts.embedWeights) {
    KILN_RETURN_IF_ERR(files.add(opts.name + ".weights", prog.constants, prog.constantBytes));
    r.files.push_back(opts.outDir + "/" + opts.name + ".weights");
  }
  KILN_RETURN_IF_ERR(files.commit());
  return r;
}

} // namespace kiln::cpu
