// Replays every reduced graph of test/fuzz/regress/ (README.md, "Bugs found") through the
// oracle with every configuration: each once made a configuration fail.

#include "Oracle.h"

#include "kiln/Graph/Graph.h"
#include "kiln/Graph/TextIR.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <dirent.h>
#include <fstream>
#include <sstream>

using namespace kiln;
using namespace kiln::fuzz;

namespace {

std::vector<std::string> regressFiles() {
  std::vector<std::string> v;
  const std::string dir = "test/fuzz/regress";
  if (DIR *d = opendir(dir.c_str())) {
    while (dirent *e = readdir(d)) {
      std::string n = e->d_name;
      if (n.size() > 4 && n.substr(n.size() - 4) == ".txt")
        v.push_back(dir + "/" + n);
    }
    closedir(d);
  }
  std::sort(v.begin(), v.end());
  return v;
}

TEST(CompilerFuzzRegress, EveryReducedGraphPasses) {
  std::vector<std::string> files = regressFiles();
  ASSERT_FALSE(files.empty()) << "no test/fuzz/regress/*.txt in the runfiles";
  for (const std::string &path : files) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string text = ss.str();
    // A graph the verifier once accepted wrongly must now be rejected, naming the cause.
    size_t x = text.find("// fuzz-expect-invalid: ");
    if (x != std::string::npos) {
      std::string want = text.substr(x + 24, text.find('\n', x) - x - 24);
      Expected<std::unique_ptr<Module>> m = parseModule(text);
      ASSERT_FALSE(bool(m)) << path << ": parsed, but the verifier should reject it";
      EXPECT_NE(m.takeError().message().find(want), std::string::npos) << path;
      continue;
    }
    OracleOptions o;
    size_t p = text.find("// fuzz-input-seed: ");
    if (p != std::string::npos)
      o.inputSeed = std::stoull(text.substr(p + 20));
    GraphResult r = checkModule(text, o);
    EXPECT_FALSE(r.rejected) << path << ": " << r.rejectReason;
    EXPECT_GT(r.configsRun, 0u) << path;
    EXPECT_TRUE(r.findings.empty()) << path << ":\n" << describeFindings(r);
  }
}

} // namespace
