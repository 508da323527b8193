/// \file
/// The operator test-suite harness. Each test is written once and runs on every
/// registered backend (TEST_P over getRegisteredBackends()). `run()` compiles and executes
/// the test's function on the backend under test and, for backends other than the
/// Interpreter, also on the Interpreter, and checks both agree; the test then checks the
/// result against hand-computed or independently derived expectations. A test skips itself
/// when the backend reports through isOpSupported that it cannot run some node once the
/// nodes it asks for are lowered (as the compile driver checks): never by a
/// list of test names; the skip message says when some of the test's outputs needed only
/// supported nodes (a test that mixes cases a backend runs with cases it cannot: split it).
/// Each test records whether it read the backend's outputs (an expectation of its own) or
/// only relied on the comparison with the Interpreter; the suite's summary (SuiteReport.h)
/// counts the latter as self-comparisons on backends that run the Interpreter's kernels.
#ifndef KILN_TEST_BACKEND_BACKENDTESTUTILS_H
#define KILN_TEST_BACKEND_BACKENDTESTUTILS_H

#include "kiln/Backend/Backend.h"
#include "kiln/kiln.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace kiln::test {

class BackendTest : public ::testing::TestWithParam<std::string> {
protected:
  BackendTest() : F_(mod_.createFunction("main")) {}
  /// Records the test property "kiln_checks": "own" when the test read every output after
  /// run() or checked runRaw's Error (it has expectations of its own), "interpreter" when
  /// some output was checked only by run()'s comparison with the Interpreter.
  void TearDown() override;

  Module &mod() { return mod_; }
  Function *F() { return F_; }

  /// A placeholder input with the given values (converted from double).
  Placeholder *input(const std::string &name, ElemKind k, Dims dims,
                     std::initializer_list<double> values);
  /// A placeholder input with a given tensor.
  Placeholder *input(const std::string &name, Tensor t);
  /// A placeholder input of \p ty filled with seeded random values in [lo, hi].
  Placeholder *randomInput(const std::string &name, const Type &ty, float lo, float hi,
                           uint64_t seed = 1);
  /// A constant with the given values.
  Constant *constant(const std::string &name, ElemKind k, Dims dims,
                     std::initializer_list<double> values);
  /// Saves \p v; its tensor is available from output() after run().
  SaveNode *save(NodeValue v, const std::string &name = "out");

  /// Compiles and runs on the backend under test (and on the Interpreter for comparison,
  /// within \p atol/\p rtol). Returns false (after GTEST_SKIP) when unsupported; check with
  /// `if (!run()) return;`.
  bool run(float atol = 1e-5f, float rtol = 1e-5f);
  /// The output tensor of save \p s after run().
  const Tensor &output(SaveNode *s);

  /// Expects \p t to hold \p expected (double values, row-major) within atol + rtol*|e|.
  static void expectValues(const Tensor &t, const std::vector<double> &expected,
                           double atol = 1e-5, double rtol = 1e-5);

  bool isInterpreter() const { return GetParam() == "Interpreter"; }

  /// Compiles \p f (any function of mod()) for the backend under test and runs it with
  /// \p inputs bound and its outputs allocated; returns the Error of the run. Sets
  /// \p skipped when the backend does not support some node. For tests of run-time errors.
  Error runRaw(Function *f, std::vector<std::pair<Placeholder *, Tensor>> inputs,
               bool &skipped);

private:
  /// Compiles \p f for \p backend and runs it, binding \p out (inputs must be there).
  static Error compileAndRun(const std::string &backend, Function *f, PlaceholderBindings &out,
                             bool &skipped);
  Error runOn(const std::string &backend, PlaceholderBindings &out);
  /// "" when every output of F_ needs an unsupported node; else a note saying how many of
  /// the outputs the backend \p b could have run.
  std::string partlySupportedNote(const Backend &b) const;

  Module mod_;
  Function *F_;
  std::vector<std::pair<Placeholder *, Tensor>> inputs_;
  PlaceholderBindings results_;
  std::set<const SaveNode *> read_; ///< The saves output() returned.
  bool ranRaw_ = false;              ///< runRaw() was called.
};

/// A tensor of \p ty holding \p values, row-major (raw integers for quantized kinds).
Tensor makeTensor(const Type &ty, std::initializer_list<double> values);
/// A quantized tensor of kind \p k with the given raw values.
Tensor qTensor(ElemKind k, Dims dims, float scale, int32_t offset,
               std::initializer_list<double> raw);
/// A tensor of \p ty with seeded uniform values in [lo, hi] (quantized: raw integers).
Tensor randomTensor(const Type &ty, float lo, float hi, uint64_t seed);
/// All elements as doubles (quantized: raw integers).
std::vector<double> toDoubles(const Tensor &t);
/// Reference int8 quantization: round half away from zero, then saturate.
double quantizeRef(double real, double scale, int offset);

/// The backends the suite runs on: every registered backend, or those set by
/// setBackendsUnderTest (the operator suite's main, SuiteMain.cpp, sets them from
/// --kiln_backend). Read when gtest instantiates the suites, after main has started.
std::vector<std::string> backendsUnderTest();
/// Restricts the suite to \p names (empty: every registered backend).
void setBackendsUnderTest(std::vector<std::string> names);

/// Whether \p backend computes with the Interpreter's kernels, so that its agreement with
/// the Interpreter is a self-comparison: the Sim (backends/Sim/README.md, "How results
/// stay exact") and the backends named with addInterpreterKernelBackend (the operator
/// suite's --kiln_interpreter_kernels=NAME; kiln_operator_suite's interpreter_kernels).
bool runsInterpreterKernels(const std::string &backend);
void addInterpreterKernelBackend(std::string name);

/// The prefix of a skip message when some of the test's outputs need only supported nodes.
constexpr const char *kPartlySupported = "[part of the test is supported: ";

/// Instantiates a TEST_P suite over the backends under test.
#define KILN_INSTANTIATE_BACKEND_TESTS(SUITE)                                               \
  INSTANTIATE_TEST_SUITE_P(AllBackends, SUITE,                                               \
                           ::testing::ValuesIn(::kiln::test::backendsUnderTest()),           \
                           [](const ::testing::TestParamInfo<std::string> &i) {              \
                             return i.param;                                                 \
                           })

} // namespace kiln::test

#endif // KILN_TEST_BACKEND_BACKENDTESTUTILS_H
