// Runs every model of Debian's libonnx-testdata (ONNX's backend test-suite:
// /usr/share/libonnx-testdata/data/{node,pytorch-converted,pytorch-operator,simple}) on
// every registered backend and prints, per folder, each category separately:
//  - passed: the backend computed outputs from run-time inputs that match the reference;
//  - passed with frozen inputs (named): the importer needs some inputs at load time (a
//    shape, axes, a bound: "input 'X' is computed at run time"), so exactly the inputs it
//    names are frozen to the first data set's values and the rest stay run-time inputs;
//  - constant outputs: every output of the function is a saved constant (computed by the
//    importer, or folded on the Interpreter at compile time), so the backend only copied
//    it: not a backend pass, whatever the reference says;
//  - reference-exempted: the known bad bfloat16 references (kBadReferenceData), passed only
//    where kiln's output is the round-to-nearest-even of the input and differs from the
//    reference only where truncation gives the reference;
//  - failed, and unsupported with the unsupported operators.
// It fails when a model that loads and compiles (so uses only supported operators) gives a
// wrong result, an unexpected error, or crashes.
//
// Each model runs in a forked child so that a crash or hang in one is reported, not fatal.
// Environment: KILN_ONNX_TESTDATA overrides the data root; KILN_CONFORMANCE_FILTER runs
// only tests whose name contains it; KILN_CONFORMANCE_BACKENDS (comma-separated names) runs
// only those backends; KILN_CONFORMANCE_VERBOSE=1 prints every result.

#include "src/tools/ModelRunner.h"

#include "kiln/Backend/Backend.h"

#include <gtest/gtest.h>

#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <iostream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

namespace kiln::test {
namespace {

std::vector<std::string> listDir(const std::string &dir) {
  std::vector<std::string> out;
  if (DIR *d = opendir(dir.c_str())) {
    while (dirent *e = readdir(d))
      if (e->d_name[0] != '.')
        out.push_back(e->d_name);
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool exists(const std::string &p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

enum class Status { Pass, Fail, Unsupported, Constant, Exempt };

struct Result {
  Status status = Status::Fail;
  std::string detail; // failure message, or the unsupported features ("Op1,Op2")
  std::vector<std::string> frozen; // the inputs frozen into constants
};

/// Tests whose reference data is wrong in ONNX 1.12 (Debian's libonnx-testdata): the
/// generator converted float to bfloat16 by truncation, while the operator (and kiln)
/// round to nearest even; later ONNX releases regenerated them. They pass as
/// reference-exempted only under checkTruncatedReference.
const std::set<std::string> kBadReferenceData = {
    "test_cast_FLOAT_to_BFLOAT16",
    "test_castlike_FLOAT_to_BFLOAT16",
    "test_castlike_FLOAT_to_BFLOAT16_expanded",
};

/// Bits of the bfloat16 nearest to \p f, ties to even (NaN stays a quiet NaN).
uint16_t bf16RoundNearestEven(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return uint16_t((u >> 16) | 0x40);
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

/// Bits of \p f truncated to bfloat16.
uint16_t bf16Truncate(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return uint16_t(u >> 16);
}

/// For a kBadReferenceData test: "" when kiln's bfloat16 output \p y is, element by
/// element, the round-to-nearest-even of the float input \p x, and differs from the
/// reference \p ref (bfloat16 bit patterns, as ONNX 1.12 stores them) only where \p ref is
/// the truncation of \p x; otherwise what breaks that. \p differing counts the elements
/// that differ from the reference.
std::string checkTruncatedReference(const Tensor &x, const Tensor &y, const Tensor &ref,
                                    size_t &differing) {
  differing = 0;
  if (x.getElementType() != ElemKind::Float || y.getElementType() != ElemKind::BFloat16 ||
      x.size() != y.size() || ref.size() != y.size())
    return "expected a float input, a bfloat16 output and a reference of the same size, got " +
           x.getType().toString() + ", " + y.getType().toString() + " and " +
           ref.getType().toString();
  for (size_t i = 0; i < y.size(); i++) {
    float xi = float(x.getAsDouble(i));
    uint16_t got = y.getHandle<bfloat16>().raw(i).bits();
    uint16_t want = bf16RoundNearestEven(xi);
    uint16_t r = ref.getElementType() == ElemKind::BFloat16
                     ? ref.getHandle<bfloat16>().raw(i).bits()
                     : uint16_t(ref.getAsDouble(i));
    bool nan = std::isnan(xi);
    if (got != want && !(nan && std::isnan(float(bfloat16::fromBits(got)))))
      return "element " + std::to_string(i) + " of the output is bfloat16 bits " +
             std::to_string(got) + ", not the round-to-nearest-even of the input (" +
             std::to_string(want) + ")";
    if (r == got || (nan && std::isnan(float(bfloat16::fromBits(r)))))
      continue;
    differing++;
    if (r != bf16Truncate(xi))
      return "element " + std::to_string(i) + " of the reference (bits " + std::to_string(r) +
             ") is neither kiln's output nor the truncation of the input";
  }
  return "";
}

/// Whether every output of \p f is a saved constant (the backend only copies it).
bool onlySavesConstants(const Function *f) {
  if (!f || f->getSaves().empty())
    return false;
  for (SaveNode *s : f->getSaves())
    if (!isa<Constant>(s->getInput().node))
      return false;
  return true;
}

/// The unsupported operators or features named by an Unsupported error.
std::string unsupportedKeys(const Error &e) {
  // Drop the file context ("loading '/path/model.onnx': ").
  std::string m = std::regex_replace(e.message(), std::regex(R"(^(loading )?'[^']*': )"), "");
  std::set<std::string> keys;
  size_t p = m.find("unsupported ONNX operators at opset ");
  if (p != std::string::npos) {
    std::string list = m.substr(m.find(": ", p) + 2);
    std::regex op(R"((?:^|; )([A-Za-z0-9_.]+) \()");
    for (std::sregex_iterator it(list.begin(), list.end(), op), end; it != end; ++it)
      keys.insert((*it)[1]);
  } else {
    std::smatch sm;
    if (std::regex_search(m, sm, std::regex(R"(\(([A-Za-z0-9_]+), opset \d+\): (.*))"))) {
      std::string why = sm[2];
      keys.insert(std::string(sm[1]) + " [" + why.substr(0, 90) + "]");
    } else {
      keys.insert("[" + m.substr(0, 80) + "]");
    }
  }
  std::string s;
  for (const auto &k : keys)
    s += (s.empty() ? "" : "|") + k;
  return s;
}

Result runTest(const std::string &dir, const std::string &backend) {
  Result r;
  std::vector<std::string> sets;
  for (const auto &e : listDir(dir))
    if (e.rfind("test_data_set_", 0) == 0)
      sets.push_back(dir + "/" + e);
  if (sets.empty()) {
    r.detail = "no test data sets";
    return r;
  }
  Expected<tools::TestDataSet> first = tools::loadTestDataSet(sets[0]);
  auto classify = [&](Error e, const char *stage) {
    bool dataErr = std::string(stage) == "data" && e.code() == ErrorCode::ModelParse;
    if (e.code() == ErrorCode::Unsupported || dataErr) {
      // Test data that is not a plain tensor (sequences, optionals, strings) counts as
      // unsupported, like the model that uses it.
      r.status = Status::Unsupported;
      std::smatch sm;
      std::string msg = e.message();
      if (std::string(stage) == "compile" &&
          std::regex_search(msg, sm, std::regex(R"(node '[^']*' \((\w+))")))
        r.detail = "backend " + backend + ": " + std::string(sm[1]);
      else if (dataErr)
        r.detail = "[test data that is not a tensor]";
      else
        r.detail = unsupportedKeys(e);
    } else {
      r.status = Status::Fail;
      r.detail = std::string(stage) + ": " + e.toString();
    }
    return r;
  };
  if (!first)
    return classify(first.takeError(), "data");
  tools::ModelRunner runner(backend);
  std::set<std::string> named;
  if (Error e = runner.load(dir + "/model.onnx", &*first)) {
    // Node tests often feed shapes, axes, bounds or scales as graph inputs; kiln needs them
    // at load time. Freeze exactly the inputs the importer names (one at a time, each a
    // graph input with data), keep the others run-time inputs, and report the names.
    const std::regex needed(R"(input '([^']+)' is (computed at run time|an empty tensor))");
    std::set<std::string> graphInputs;
    if (Expected<ONNXSignature> sig = getONNXSignature(dir + "/model.onnx")) {
      for (size_t k = 0; k < sig->inputs.size() && k < first->inputs.size(); k++)
        graphInputs.insert(sig->inputs[k].name);
    } else {
      (void)sig.takeError();
    }
    while (e && e.code() == ErrorCode::Unsupported) {
      std::smatch sm;
      std::string msg = e.message();
      if (!std::regex_search(msg, sm, needed) || !graphInputs.count(sm[1]) || named.count(sm[1]))
        break;
      named.insert(sm[1]);
      e = runner.load(dir + "/model.onnx", &*first, /*freezeIntegerInputs=*/false, named);
    }
    if (e)
      return classify(std::move(e), "load");
    r.frozen.assign(named.begin(), named.end());
  }
  bool importedConstant = onlySavesConstants(runner.function());
  if (Error e = runner.compile())
    return classify(std::move(e), "compile");
  if (!r.frozen.empty())
    sets.resize(1); // the frozen values are the first data set's
  for (const auto &s : sets) {
    Expected<tools::TestDataSet> ds = tools::loadTestDataSet(s);
    if (!ds)
      return classify(ds.takeError(), "data");
    if (Error e = runner.bindInputs(ds->inputs))
      return classify(std::move(e), "bind");
    if (Error e = runner.run())
      return classify(std::move(e), "run");
    tools::Comparison c = tools::compareOutputs(runner.outputs(), ds->outputs);
    if (!c.match) {
      r.status = Status::Fail;
      r.detail = "mismatch in " + s.substr(s.rfind('/') + 1) + ": " + c.detail +
                 " (max abs err " + std::to_string(c.maxAbsErr) + ")";
      std::string test = dir.substr(dir.rfind('/') + 1);
      if (!kBadReferenceData.count(test) || ds->inputs.empty() || ds->outputs.size() != 1 ||
          runner.outputs().size() != 1)
        return r;
      size_t differing = 0;
      std::string why =
          checkTruncatedReference(ds->inputs[0], *runner.outputs()[0], ds->outputs[0], differing);
      if (!why.empty()) {
        r.detail += "; not explained by a truncating reference: " + why;
        return r;
      }
      r.status = Status::Exempt;
      r.detail = std::to_string(differing) + " of " + std::to_string(ds->outputs[0].size()) +
                 " elements differ from the reference of " + s.substr(s.rfind('/') + 1) +
                 ", each where the reference is the input truncated and kiln's the input "
                 "rounded to nearest even";
    }
  }
  if (r.status == Status::Exempt)
    return r;
  if (importedConstant || onlySavesConstants(runner.function())) {
    r.status = Status::Constant;
    r.detail = importedConstant ? "every output is a constant computed by the importer"
                                : "every output is a constant folded at compile time";
    return r;
  }
  r.status = Status::Pass;
  return r;
}

/// Runs one test in a child process; a crash, abort or timeout is a failure.
Result runIsolated(const std::string &dir, const std::string &backend, int timeoutSec) {
  int fds[2];
  if (pipe(fds) != 0)
    return runTest(dir, backend);
  std::cout.flush();
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    Result r = runTest(dir, backend);
    std::string names;
    for (const std::string &n : r.frozen)
      names += (names.empty() ? "" : ",") + n;
    std::string msg = std::to_string(int(r.status)) + "\n" + names + "\n" + r.detail;
    size_t off = 0;
    while (off < msg.size()) {
      ssize_t w = write(fds[1], msg.data() + off, msg.size() - off);
      if (w <= 0)
        break;
      off += size_t(w);
    }
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  std::string out;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeoutSec);
  bool timedOut = false;
  char buf[4096];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      timedOut = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    int rc = poll(&p, 1, int(left));
    if (rc <= 0)
      continue;
    ssize_t n = read(fds[0], buf, sizeof buf);
    if (n <= 0)
      break;
    out.append(buf, size_t(n));
  }
  close(fds[0]);
  if (timedOut)
    kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  Result r;
  if (timedOut) {
    r.detail = "timed out after " + std::to_string(timeoutSec) + " s";
  } else if (WIFSIGNALED(status)) {
    r.detail = std::string("crashed with signal ") + strsignal(WTERMSIG(status));
  } else if (out.empty()) {
    r.detail = "the child exited without a result";
  } else {
    size_t nl = out.find('\n');
    size_t nl2 = nl == std::string::npos ? nl : out.find('\n', nl + 1);
    r.status = Status(std::stoi(out.substr(0, nl)));
    if (nl != std::string::npos) {
      std::stringstream names(out.substr(nl + 1, nl2 - nl - 1));
      std::string n;
      while (std::getline(names, n, ','))
        r.frozen.push_back(n);
    }
    r.detail = nl2 == std::string::npos ? "" : out.substr(nl2 + 1);
  }
  return r;
}

TEST(ONNXConformance, LibONNXTestData) {
  const char *rootEnv = std::getenv("KILN_ONNX_TESTDATA");
  std::string root = rootEnv ? rootEnv : "/usr/share/libonnx-testdata/data";
  if (!exists(root))
    GTEST_SKIP() << root << " is missing (install libonnx-testdata)";
  const char *filter = std::getenv("KILN_CONFORMANCE_FILTER");
  bool verbose = std::getenv("KILN_CONFORMANCE_VERBOSE") != nullptr;
  const char *only = std::getenv("KILN_CONFORMANCE_BACKENDS");
  std::vector<std::string> failures;
  for (const std::string &backend : getRegisteredBackends()) {
    if (only && ("," + std::string(only) + ",").find("," + backend + ",") == std::string::npos)
      continue;
    struct Counts {
      unsigned total = 0, passed = 0, passedFrozen = 0, constant = 0, exempt = 0, failed = 0,
               unsupported = 0;
    } all;
    for (const char *folder : {"node", "pytorch-converted", "pytorch-operator", "simple"}) {
      std::string fdir = root + "/" + folder;
      Counts c;
      std::map<std::string, unsigned> unsupportedOps;
      std::vector<std::string> frozenPasses, constants, exempted;
      auto t0 = std::chrono::steady_clock::now();
      for (const std::string &test : listDir(fdir)) {
        std::string dir = fdir + "/" + test;
        if (!exists(dir + "/model.onnx"))
          continue;
        if (filter && test.find(filter) == std::string::npos)
          continue;
        c.total++;
        Result r = runIsolated(dir, backend, 120);
        std::string frozenNames;
        for (const std::string &n : r.frozen)
          frozenNames += (frozenNames.empty() ? "" : ", ") + n;
        if (verbose)
          std::cout << backend << " " << folder << "/" << test << ": "
                    << (r.status == Status::Pass          ? "PASS"
                        : r.status == Status::Fail        ? "FAIL"
                        : r.status == Status::Constant    ? "CONSTANT"
                        : r.status == Status::Exempt      ? "REFERENCE-EXEMPTED"
                                                          : "UNSUPPORTED")
                    << (r.frozen.empty() ? "" : " [frozen: " + frozenNames + "]")
                    << (r.detail.empty() ? "" : " (" + r.detail + ")") << "\n";
        switch (r.status) {
        case Status::Pass:
          if (r.frozen.empty()) {
            c.passed++;
          } else {
            c.passedFrozen++;
            frozenPasses.push_back(test + " (" + frozenNames + ")");
          }
          break;
        case Status::Constant:
          c.constant++;
          constants.push_back(test + (r.frozen.empty() ? "" : " (frozen: " + frozenNames + ")"));
          break;
        case Status::Exempt:
          c.exempt++;
          exempted.push_back(test + ": " + r.detail);
          break;
        case Status::Fail:
          c.failed++;
          failures.push_back(backend + " " + folder + "/" + test + ": " + r.detail);
          break;
        case Status::Unsupported: {
          c.unsupported++;
          std::stringstream ss(r.detail);
          std::string key;
          while (std::getline(ss, key, '|'))
            unsupportedOps[key]++;
          break;
        }
        }
      }
      double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::cout << "[conformance] " << backend << " " << folder << ": total " << c.total
                << ", passed " << c.passed << " with no frozen input, passed "
                << c.passedFrozen << " with frozen inputs, constant outputs " << c.constant
                << " (not backend passes), reference-exempted " << c.exempt << ", failed "
                << c.failed << ", unsupported " << c.unsupported << " (" << int(secs)
                << " s)\n";
      auto list = [](const char *what, const std::vector<std::string> &items) {
        if (items.empty())
          return;
        std::cout << "[conformance]   " << what << " (" << items.size() << "):";
        for (const std::string &i : items)
          std::cout << " " << i << ";";
        std::cout << "\n";
      };
      list("passed with frozen inputs (the inputs frozen)", frozenPasses);
      list("constant outputs", constants);
      list("reference-exempted", exempted);
      if (!unsupportedOps.empty()) {
        std::cout << "[conformance]   unsupported:";
        for (const auto &[op, n] : unsupportedOps)
          std::cout << " " << op << (n > 1 ? " x" + std::to_string(n) : "") << ";";
        std::cout << "\n";
      }
      all.total += c.total;
      all.passed += c.passed;
      all.passedFrozen += c.passedFrozen;
      all.constant += c.constant;
      all.exempt += c.exempt;
      all.failed += c.failed;
      all.unsupported += c.unsupported;
    }
    std::cout << "[conformance] " << backend << " all folders: total " << all.total
              << ", passed " << all.passed << " with no frozen input, passed "
              << all.passedFrozen << " with frozen inputs, constant outputs " << all.constant
              << " (not backend passes), reference-exempted " << all.exempt << ", failed "
              << all.failed << ", unsupported " << all.unsupported << "\n";
  }
  for (const auto &f : failures)
    std::cout << "[conformance] FAILED " << f << "\n";
  EXPECT_TRUE(failures.empty()) << failures.size()
                                << " tests that use only supported operators failed";
}

} // namespace
} // namespace kiln::test
