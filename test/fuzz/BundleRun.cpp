// The oracle's bundle configurations (BundleRun.h).

#include "BundleRun.h"

#include "backends/CPU/bundle/Bundle.h"
#include "kiln/Graph/Graph.h"
#include "kiln/Graph/TextIR.h"

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <fstream>
#include <set>
#include <signal.h>
#include <spawn.h>
#include <sstream>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

extern char **environ;

namespace kiln::fuzz {

namespace {

bool isFile(const std::string &p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string absolute(const std::string &p) {
  char buf[PATH_MAX];
  return ::realpath(p.c_str(), buf) ? std::string(buf) : p;
}

std::string readText(const std::string &path, size_t max = 4000) {
  std::ifstream in(path, std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return s.size() > max ? s.substr(0, max) + "..." : s;
}

std::string oneLine(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' '))
    s.pop_back();
  for (char &c : s)
    if (c == '\n' || c == '\t')
      c = ' ';
  return s.size() > 400 ? s.substr(0, 400) + "..." : s;
}

/// A program's end: its exit status or signal, or a timeout.
struct Proc {
  bool started = false;
  bool timedOut = false;
  int status = 0;
  std::string err; ///< its standard error (truncated)
};

/// Runs \p args (args[0] looked up on PATH) with standard output discarded and standard
/// error kept, killing it after \p timeoutSeconds. posix_spawn: safe from a process with
/// threads (the CPU backend's pool).
Proc spawnAndWait(const std::vector<std::string> &args, const std::string &errPath,
                  unsigned timeoutSeconds) {
  Proc r;
  std::vector<char *> argv;
  for (const std::string &a : args)
    argv.push_back(const_cast<char *>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, errPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid;
  int rc = posix_spawnp(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    r.err = std::string("cannot start ") + args[0] + ": " + std::strerror(rc);
    return r;
  }
  r.started = true;
  auto start = std::chrono::steady_clock::now();
  auto nap = std::chrono::milliseconds(1);
  for (;;) {
    pid_t w = waitpid(pid, &r.status, WNOHANG);
    if (w == pid)
      break;
    if (w < 0 && errno != EINTR) {
      r.status = -1;
      break;
    }
    if (std::chrono::steady_clock::now() - start > std::chrono::seconds(timeoutSeconds)) {
      kill(pid, SIGKILL);
      waitpid(pid, &r.status, 0);
      r.timedOut = true;
      break;
    }
    std::this_thread::sleep_for(nap);
    nap = std::min(nap * 2, std::chrono::milliseconds(20));
  }
  r.err = readText(errPath);
  return r;
}

/// Removes the files of \p dir (no subfolders are made) and the folder.
void removeDir(const std::string &dir) {
  if (DIR *d = opendir(dir.c_str())) {
    std::vector<std::string> names;
    while (dirent *e = readdir(d))
      if (std::strcmp(e->d_name, ".") && std::strcmp(e->d_name, ".."))
        names.push_back(e->d_name);
    closedir(d);
    for (const std::string &n : names)
      ::unlink((dir + "/" + n).c_str());
  }
  ::rmdir(dir.c_str());
}

/// The temporary folder of one run, removed on every path out.
struct TempDir {
  std::string path;
  TempDir() {
    const char *t = std::getenv("TEST_TMPDIR");
    std::string tmpl = std::string(t && *t ? t : "/tmp") + "/kiln-fuzz-bundle-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back(0);
    if (::mkdtemp(buf.data()))
      path = buf.data();
  }
  ~TempDir() {
    // KILN_FUZZ_KEEP_BUNDLES=1 keeps the folders (bundle, program, inputs) for debugging.
    const char *keep = std::getenv("KILN_FUZZ_KEEP_BUNDLES");
    if (keep && *keep == '1')
      std::fprintf(stderr, "compiler_fuzz: bundle kept in %s\n", path.c_str());
    else if (!path.empty())
      removeDir(path);
  }
};

bool writeBytes(const std::string &path, const char *data, size_t n) {
  FILE *f = std::fopen(path.c_str(), "wb");
  if (!f)
    return false;
  bool ok = (n == 0 || std::fwrite(data, 1, n, f) == n);
  return std::fclose(f) == 0 && ok;
}

bool readBytes(const std::string &path, char *data, size_t n) {
  FILE *f = std::fopen(path.c_str(), "rb");
  if (!f)
    return false;
  bool ok = (n == 0 || std::fread(data, 1, n, f) == n) && std::fgetc(f) == EOF;
  std::fclose(f);
  return ok;
}

} // namespace

std::string findRunBundleSource() {
  const std::string rel = "test/bundle/run_bundle.c";
  std::vector<std::string> tries;
  if (const char *e = std::getenv("KILN_RUN_BUNDLE_C"))
    tries.push_back(e);
  tries.push_back(rel);
  for (const char *var : {"TEST_SRCDIR", "RUNFILES_DIR"})
    if (const char *d = std::getenv(var))
      tries.push_back(std::string(d) + "/kiln/" + rel);
  char exe[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    exe[n] = 0;
    tries.push_back(std::string(exe) + ".runfiles/kiln/" + rel);
  }
  for (const std::string &p : tries)
    if (isFile(p))
      return absolute(p);
  return "";
}

std::string findCCompiler() {
  const char *path = std::getenv("PATH");
  std::stringstream ss(path ? path : "");
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    std::string p = (dir.empty() ? "." : dir) + "/cc";
    if (::access(p.c_str(), X_OK) == 0 && isFile(p))
      return p;
  }
  return "";
}

BundleRunResult runBundle(const std::string &text, const BundleRunOptions &opts,
                          const std::map<std::string, Tensor> &inputs) {
  BundleRunResult res;
  auto fail = [&](BundleRunResult::Kind k, std::string d) {
    res.kind = k;
    res.detail = oneLine(std::move(d));
    res.outputs.clear();
    return std::move(res);
  };
  static const std::string source = findRunBundleSource();
  if (source.empty())
    return fail(BundleRunResult::Skipped, "bundle: test/bundle/run_bundle.c not found");
  static const std::string cc = findCCompiler();
  if (cc.empty())
    return fail(BundleRunResult::Skipped, "bundle: no C compiler (cc) on PATH");
  if (opts.target == "x86-64-v3" &&
      !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")))
    return fail(BundleRunResult::Skipped, "bundle: the host has no AVX2 + FMA for x86-64-v3");

  Expected<std::unique_ptr<Module>> parsed = parseModule(text);
  if (!parsed)
    return fail(BundleRunResult::Error, "parse: " + parsed.takeError().message());
  std::unique_ptr<Module> m = std::move(*parsed);
  if (m->getFunctions().size() != 1)
    return fail(BundleRunResult::Error, "the module must have one function");
  Function *f = m->getFunctions().front().get();

  // Outputs: the saved placeholders; inputs: every other placeholder.
  std::set<const Placeholder *> saved;
  std::vector<cpu::BundleTensor> ins, outs;
  for (SaveNode *s : f->getSaves())
    if (saved.insert(s->getPlaceholder()).second)
      outs.push_back({s->getPlaceholder()->getName(), s->getPlaceholder()});
  // A placeholder both read and saved is one slot of the mutable region, listed as an
  // input (writeBundle), so run_bundle.c would not write it back.
  for (const auto &n : f->getNodes())
    if (!isa<SaveNode>(n.get()))
      for (unsigned i = 0; i < n->getNumInputs(); i++)
        if (auto *ph = dyn_cast<Placeholder>(n->getNthInput(i).node))
          if (saved.count(ph))
            return fail(BundleRunResult::Skipped, "bundle: a placeholder both read and saved");
  for (const auto &ph : m->getPlaceholders())
    if (!saved.count(ph.get()))
      ins.push_back({ph->getName(), ph.get()});

  TempDir tmp;
  if (tmp.path.empty())
    return fail(BundleRunResult::Error, std::string("mkdtemp: ") + std::strerror(errno));
  const std::string dir = tmp.path, name = "fz";
  cpu::BundleOptions bo;
  bo.name = name;
  bo.outDir = dir;
  bo.target = opts.target;
  bo.threads = opts.threads;
  bo.embedWeights = opts.embedWeights;
  bo.source = "compiler_fuzz";
  bo.compile = opts.compile;
  Expected<cpu::BundleResult> wb = cpu::writeBundle(f, ins, outs, bo);
  if (!wb) {
    Error e = wb.takeError();
    if (e.code() == ErrorCode::Unsupported)
      return fail(BundleRunResult::Skipped, "bundle: unsupported operator");
    return fail(BundleRunResult::Error, "writeBundle: " + e.message());
  }

  // Link run_bundle.c with the object.
  const std::string exe = dir + "/run", errPath = dir + "/stderr.txt";
  std::vector<std::string> link = {cc,
                                   "-std=c11",
                                   "-O1",
                                   "-DBUNDLE=" + name,
                                   "-DBUNDLE_UPPER=FZ",
                                   "-DBUNDLE_HEADER=\"" + name + ".h\"",
                                   "-I" + dir};
  if (opts.threads > 1)
    link.push_back("-DBUNDLE_THREADED");
  link.insert(link.end(), {source, dir + "/" + name + ".o", "-o", exe, "-lm"});
  if (opts.threads > 1)
    link.push_back("-pthread");
  Proc l = spawnAndWait(link, errPath, 120);
  if (!l.started)
    return fail(BundleRunResult::Skipped, "bundle: the C compiler did not start");
  if (l.timedOut || !WIFEXITED(l.status) || WEXITSTATUS(l.status) != 0)
    return fail(BundleRunResult::Error, "linking run_bundle.c with the bundle failed: " + l.err);

  // Inputs as raw bytes, in the header's order.
  std::vector<std::string> run = {exe, opts.embedWeights ? "-" : dir + "/" + name + ".weights"};
  for (size_t k = 0; k < ins.size(); k++) {
    const Placeholder *ph = ins[k].placeholder;
    Tensor zero(*ph->getType());
    const Tensor *t = &zero;
    auto it = inputs.find(ph->getName());
    if (it != inputs.end() && it->second.getType() == *ph->getType())
      t = &it->second;
    std::string p = dir + "/in" + std::to_string(k) + ".bin";
    if (!writeBytes(p, t->getUnsafePtr(), t->getSizeInBytes()))
      return fail(BundleRunResult::Error, "cannot write " + p);
    run.push_back(p);
  }
  run.push_back("-o");
  for (size_t k = 0; k < outs.size(); k++)
    run.push_back(dir + "/out" + std::to_string(k) + ".bin");

  Proc r = spawnAndWait(run, errPath, opts.timeoutSeconds);
  if (r.timedOut)
    return fail(BundleRunResult::Crash, "the bundle program timed out after " +
                                            std::to_string(opts.timeoutSeconds) + " s");
  if (WIFSIGNALED(r.status))
    return fail(BundleRunResult::Crash, "the bundle program was killed by signal " +
                                            std::to_string(WTERMSIG(r.status)) + " (" +
                                            strsignal(WTERMSIG(r.status)) + ")");
  if (!WIFEXITED(r.status) || WEXITSTATUS(r.status) != 0)
    return fail(BundleRunResult::Error, "the bundle program exited with status " +
                                            std::to_string(WEXITSTATUS(r.status)) + ": " + r.err);
  for (size_t k = 0; k < outs.size(); k++) {
    Tensor t(*outs[k].placeholder->getType());
    std::string p = dir + "/out" + std::to_string(k) + ".bin";
    if (!readBytes(p, t.getUnsafePtr(), t.getSizeInBytes()))
      return fail(BundleRunResult::Error, "output file " + p + " does not hold " +
                                              std::to_string(t.getSizeInBytes()) + " bytes");
    res.outputs.emplace(outs[k].name, std::move(t));
  }
  return res;
}

} // namespace kiln::fuzz
