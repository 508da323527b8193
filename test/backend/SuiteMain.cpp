// The main of the operator suite for any backend (kiln_operator_suite in suite.bzl): runs
// every operator test on the backends named by --kiln_backend=NAME (repeatable; default:
// every registered backend but the Interpreter, the reference each result is checked
// against), then prints per backend how many tests passed, failed, and were skipped
// because the backend does not support some node (isOpSupported).

#include "BackendTestUtils.h"

#include <algorithm>
#include <cstring>
#include <iostream>
#include <map>

namespace {

struct Counts {
  unsigned passed = 0, failed = 0, skipped = 0;
  std::vector<std::string> skips; ///< "Suite.Test: why".
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
    Counts &c = counts_[name.substr(slash + 1)];
    const ::testing::TestResult &r = *info.result();
    if (r.Skipped()) {
      c.skipped++;
      std::string why;
      for (int i = 0; i < r.total_part_count(); i++)
        if (r.GetTestPartResult(i).skipped())
          why = r.GetTestPartResult(i).message();
      why = why.substr(0, why.find('\n'));
      c.skips.push_back(std::string(info.test_suite_name()) + "." + name.substr(0, slash) +
                        (why.empty() ? "" : ": " + why));
    } else if (r.Failed()) {
      c.failed++;
    } else {
      c.passed++;
    }
  }

  void OnTestProgramEnd(const ::testing::UnitTest &) override {
    for (const std::string &b : backends_) {
      const Counts &c = counts_[b];
      for (const std::string &s : c.skips)
        std::cout << "kiln operator suite: " << b << " skipped " << s << "\n";
      std::cout << "kiln operator suite: " << b << ": " << c.passed + c.failed + c.skipped
                << " tests, " << c.passed << " passed, " << c.failed << " failed, " << c.skipped
                << " skipped (unsupported by isOpSupported)" << std::endl;
    }
  }

private:
  std::vector<std::string> backends_;
  std::map<std::string, Counts> counts_;
};

} // namespace

int main(int argc, char **argv) {
  const char *flag = "--kiln_backend=";
  std::vector<std::string> names;
  int kept = 1;
  for (int i = 1; i < argc; i++) {
    if (std::strncmp(argv[i], flag, std::strlen(flag)) == 0)
      names.push_back(argv[i] + std::strlen(flag));
    else
      argv[kept++] = argv[i];
  }
  argc = kept;
  std::vector<std::string> registered = kiln::getRegisteredBackends();
  if (names.empty())
    for (const std::string &b : registered)
      if (b != "Interpreter")
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
  kiln::test::setBackendsUnderTest(names);
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::UnitTest::GetInstance()->listeners().Append(new SuiteReport(names));
  return RUN_ALL_TESTS();
}
