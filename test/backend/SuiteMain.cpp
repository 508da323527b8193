// The main of the operator suite for any backend (kiln_operator_suite in suite.bzl): runs
// every operator test on the backends named by --kiln_backend=NAME (repeatable; default:
// every registered backend but the Interpreter, the reference each result is checked
// against), then prints per backend how many tests passed, were self-comparisons, failed,
// and were skipped by reason (SuiteReport.h).

#include "SuiteReport.h"

int main(int argc, char **argv) { return kiln::test::runOperatorSuite(argc, argv, false); }
