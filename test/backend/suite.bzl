"""The operator suite for a backend built outside this repository."""

def kiln_operator_suite(
        name,
        backend,
        backend_name = None,
        interpreter_kernels = False,
        args = [],
        size = "large",
        **kwargs):
    """Runs every operator test of //test/backend on a backend.

    Each test builds a small function, runs it on the backend and on the Interpreter, and
    checks that they agree and that the result is right; a test skips itself when the
    backend's isOpSupported refuses one of its nodes. The log ends with one line per backend
    (test/backend/SuiteReport.h): "kiln operator suite: NAME: T tests, P passed,
    S self-comparisons, F failed, K skipped (U unsupported by isOpSupported, of them H for
    part of the test; O other)", after a line per skipped test naming the unsupported nodes
    and one per self-comparison.

    Args:
      name: the test's name.
      backend: the backend's cc_library; it must register itself (KILN_REGISTER_BACKEND)
        and be linked whole (alwayslink = 1).
      backend_name: the name it registers; default: every registered backend but the
        Interpreter.
      interpreter_kernels: the backend computes with the Interpreter's kernels (as the Sim
        does), so a test that only compares it with the Interpreter is a self-comparison,
        not a pass; needs backend_name.
      args: more arguments for the test (gtest flags such as --gtest_filter=*Conv*).
      size: the test's size.
      **kwargs: passed to cc_test (tags, timeout, ...).
    """
    if interpreter_kernels and not backend_name:
        fail("kiln_operator_suite: interpreter_kernels needs backend_name")
    native.cc_test(
        name = name,
        size = size,
        args = (["--kiln_backend=" + backend_name] if backend_name else []) +
               (["--kiln_interpreter_kernels=" + backend_name] if interpreter_kernels else []) +
               args,
        deps = [
            backend,
            "//test/backend:operator_suite",
        ],
        **kwargs
    )
