// The main of the per-family targets (conv_test, ...): every registered backend, the
// Interpreter included, then the per-backend summary of SuiteReport.h.

#include "SuiteReport.h"

int main(int argc, char **argv) { return kiln::test::runOperatorSuite(argc, argv, true); }
