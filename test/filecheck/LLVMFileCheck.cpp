#include "LLVMFileCheck.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sys/wait.h>
#include <unistd.h>

namespace kiln::test {

namespace {

/// A fresh directory under $TEST_TMPDIR (Bazel's per-test scratch) or /tmp.
std::string makeTempDir() {
  const char *base = std::getenv("TEST_TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/filecheck.XXXXXX";
  if (!::mkdtemp(tmpl.data()))
    return "";
  return tmpl;
}

bool writeFile(const std::string &path, const std::string &text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  return bool(out);
}

/// "a/b/c.txt" -> "c.txt".
std::string baseName(const std::string &p) {
  size_t s = p.rfind('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

} // namespace

std::string llvmFileCheckPath() {
  if (const char *env = std::getenv("KILN_FILECHECK"))
    if (*env && ::access(env, X_OK) == 0)
      return env;
  for (const char *p : {"/usr/bin/FileCheck-14", "/usr/lib/llvm-14/bin/FileCheck"})
    if (::access(p, X_OK) == 0)
      return p;
  return "";
}

std::string runLLVMFileCheck(const std::string &checks, const std::string &output,
                             const std::string &name, unsigned firstLine,
                             const std::string &prefix) {
  std::string fc = llvmFileCheckPath();
  if (fc.empty())
    return "LLVM's FileCheck is not installed (/usr/bin/FileCheck-14 from Debian's "
           "llvm-14-tools; run third_party/setup.sh)";
  std::string dir = makeTempDir();
  if (dir.empty())
    return "cannot create a temporary directory for FileCheck";
  // Blank lines first, so that FileCheck's line numbers are the file's.
  std::string checkPath = dir + "/" + baseName(name), inputPath = dir + "/output.txt";
  if (!writeFile(checkPath, std::string(firstLine > 1 ? firstLine - 1 : 0, '\n') + checks) ||
      !writeFile(inputPath, output))
    return "cannot write FileCheck's files in " + dir;
  std::string cmd = "'" + fc + "' --color=0 --dump-input=fail --check-prefix=" + prefix +
                    " --input-file='" + inputPath + "' '" + checkPath + "' 2>&1";
  std::string said;
  int status = -1;
  if (FILE *p = ::popen(cmd.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0)
      said.append(buf, n);
    status = ::pclose(p);
  }
  std::remove(checkPath.c_str());
  std::remove(inputPath.c_str());
  ::rmdir(dir.c_str());
  if (status == 0)
    return "";
  if (status == -1)
    return "cannot run " + fc;
  return said.empty() ? "FileCheck failed (status " + std::to_string(status) + ")" : said;
}

} // namespace kiln::test
