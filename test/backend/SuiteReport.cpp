#include "SuiteReport.h"

#include "BackendTestUtils.h"

#include <algorithm>
#include <cstring>
#include <iostream>
#include <map>

namespace kiln::test {

namespace {

struct Counts {
  unsigned passed = 0, selfComparisons = 0, unchecked = 0, failed = 0;
  unsigned unsupported = 0, partlyUnsupported = 0, otherSkips = 0;
  std::vector<std::string> skips;   ///< "Suite.Test: why".
  std::vector<std::string> selfRun; ///< Tests counted as self-comparisons or unchecked.
};

/// Counts results per backend: the backend is the last component of a test's name
/// ("Conv2D/SimCopy").
class SuiteReport : public ::testing::EmptyTestEventListener {
public:
  explicit SuiteReport(std::vector<std::string> backends) : backends_(std::move(backends)) {}

  void OnTestEnd(const ::testing::TestInfo &info) override {
    std::string name = info.name();
    size_t slash = name.rfind('/');
    if (slash == std::string::npos)
      return;
    const std::string backend = name.substr(slash + 1);
    const std::string test = std::string(info.test_suite_name()) + "." + name.substr(0, slash);
    Counts &c = counts_[backend];
    const ::testing::TestResult &r = *info.result();
    if (r.Skipped()) {
      std::string why;
      for (int i = 0; i < r.total_part_count(); i++)
        if (r.GetTestPartResult(i).skipped())
          why = r.GetTestPartResult(i).message();
      why = why.substr(0, why.find('\n'));
      if (why.find(kPartlySupported) == 0) {
        c.unsupported++;
        c.partlyUnsupported++;
      } else if (why.find(" does not support ") != std::string::npos) {
        c.unsupported++;
      } else {
        c.otherSkips++;
      }
      c.skips.push_back(test + (why.empty() ? "" : ": " + why));
      return;
    }
    if (r.Failed()) {
      c.failed++;
      return;
    }
    bool own = false;
    for (int i = 0; i < r.test_property_count(); i++)
      if (std::string(r.GetTestProperty(i).key()) == "kiln_checks")
        own = std::string(r.GetTestProperty(i).value()) == "own";
    if (own) {
      c.passed++;
    } else if (backend == "Interpreter") {
      c.unchecked++;
      c.selfRun.push_back(test + ": unchecked (no expectation of its own on the reference)");
    } else if (runsInterpreterKernels(backend)) {
      c.selfComparisons++;
      c.selfRun.push_back(test + ": self-comparison (compared only with the Interpreter, "
                                 "whose kernels it runs)");
    } else {
      c.passed++; // compared with the Interpreter, an independent implementation
    }
  }

  void OnTestProgramEnd(const ::testing::UnitTest &) override {
    for (const std::string &b : backends_) {
      const Counts &c = counts_[b];
      for (const std::string &s : c.skips)
        std::cout << "kiln operator suite: " << b << " skipped " << s << "\n";
      for (const std::string &s : c.selfRun)
        std::cout << "kiln operator suite: " << b << " " << s << "\n";
      unsigned skipped = c.unsupported + c.otherSkips;
      std::cout << "kiln operator suite: " << b << ": "
                << c.passed + c.selfComparisons + c.unchecked + c.failed + skipped << " tests, "
                << c.passed << " passed, " << c.selfComparisons << " self-comparisons";
      if (c.unchecked)
        std::cout << ", " << c.unchecked << " unchecked";
      std::cout << ", " << c.failed << " failed, " << skipped << " skipped (" << c.unsupported
                << " unsupported by isOpSupported, of them " << c.partlyUnsupported
                << " for part of the test; " << c.otherSkips << " other)";
      if (runsInterpreterKernels(b))
        std::cout << " [" << b << " runs the Interpreter's kernels: its passes are the tests "
                  << "with expectations of their own]";
      std::cout << std::endl;
    }
  }

private:
  std::vector<std::string> backends_;
  std::map<std::string, Counts> counts_;
};

/// The values of flag \p flag ("--name=") in argv, removed from it.
std::vector<std::string> takeFlag(int &argc, char **argv, const char *flag) {
  std::vector<std::string> values;
  int kept = 1;
  for (int i = 1; i < argc; i++) {
    if (std::strncmp(argv[i], flag, std::strlen(flag)) == 0)
      values.push_back(argv[i] + std::strlen(flag));
    else
      argv[kept++] = argv[i];
  }
  argc = kept;
  return values;
}

} // namespace

int runOperatorSuite(int argc, char **argv, bool withInterpreter) {
  std::vector<std::string> names = takeFlag(argc, argv, "--kiln_backend=");
  for (std::string &n : takeFlag(argc, argv, "--kiln_interpreter_kernels="))
    addInterpreterKernelBackend(std::move(n));
  std::vector<std::string> registered = getRegisteredBackends();
  if (names.empty())
    for (const std::string &b : registered)
      if (withInterpreter || b != "Interpreter")
        names.push_back(b);
  if (names.empty())
    names.push_back("Interpreter"); // only the reference is linked: test it alone
  for (const std::string &b : names)
    if (std::find(registered.begin(), registered.end(), b) == registered.end()) {
      std::cerr << "kiln operator suite: no backend '" << b << "' is linked; registered:";
      for (const std::string &r : registered)
        std::cerr << " " << r;
      std::cerr << "\n";
      return 2;
    }
  setBackendsUnderTest(names);
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::UnitTest::GetInstance()->listeners().Append(new SuiteReport(names));
  return RUN_ALL_TESTS();
}

} // namespace kiln::test
