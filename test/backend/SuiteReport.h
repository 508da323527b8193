/// \file
/// The operator suite's main and its summary, shared by the per-family targets (FamilyMain.cpp)
/// and kiln_operator_suite (SuiteMain.cpp). After the tests it prints, per backend, a line
/// per skipped test with the reason, then
///
///   kiln operator suite: NAME: T tests, P passed, S self-comparisons, F failed,
///   K skipped (U unsupported by isOpSupported, of them H for part of the test; O other)
///
/// where a pass is a self-comparison when the backend runs the Interpreter's kernels
/// (runsInterpreterKernels) and the test had no expectation of its own (it only compared
/// with the Interpreter), and "for part of the test" counts skips where some of the test's
/// outputs needed only supported nodes. On the Interpreter itself (the reference) such a
/// test is counted as "unchecked": nothing was compared.
#ifndef KILN_TEST_BACKEND_SUITEREPORT_H
#define KILN_TEST_BACKEND_SUITEREPORT_H

namespace kiln::test {

/// Parses --kiln_backend=NAME (repeatable; the backends to run on) and
/// --kiln_interpreter_kernels=NAME (repeatable; backends that run the Interpreter's
/// kernels), runs every test and prints the summary. Without --kiln_backend: every
/// registered backend, but the Interpreter unless \p withInterpreter (it is the reference
/// every result is compared with) or it is the only one.
int runOperatorSuite(int argc, char **argv, bool withInterpreter);

} // namespace kiln::test

#endif // KILN_TEST_BACKEND_SUITEREPORT_H
