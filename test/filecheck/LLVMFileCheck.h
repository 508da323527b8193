/// \file
/// Runs LLVM's own FileCheck on a tool's output, for gtest-driven golden tests, so that
/// the whole directive set (CHECK, CHECK-NEXT, CHECK-NOT, CHECK-DAG, CHECK-LABEL,
/// CHECK-SAME, CHECK-EMPTY, {{regex}}, [[VAR:...]]) is available. The binary is
/// Debian's llvm-14-tools (`third_party/setup.sh` installs it).
#ifndef KILN_TEST_FILECHECK_LLVMFILECHECK_H
#define KILN_TEST_FILECHECK_LLVMFILECHECK_H

#include <string>

namespace kiln::test {

/// /usr/bin/FileCheck-14 or /usr/lib/llvm-14/bin/FileCheck (KILN_FILECHECK overrides),
/// or "" when none is installed.
std::string llvmFileCheckPath();

/// Checks \p output against the directives in \p checks with LLVM's FileCheck. \p checks
/// is the text of one test case whose first line is line \p firstLine of file \p name, so
/// that FileCheck's diagnostics point into the real file. Returns "" on success, else
/// FileCheck's diagnostics (or why it could not run).
std::string runLLVMFileCheck(const std::string &checks, const std::string &output,
                             const std::string &name = "checks.txt", unsigned firstLine = 1,
                             const std::string &prefix = "CHECK");

} // namespace kiln::test

#endif // KILN_TEST_FILECHECK_LLVMFILECHECK_H
