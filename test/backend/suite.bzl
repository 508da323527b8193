"""The operator suite for a backend built outside this repository."""

def kiln_operator_suite(name, backend, backend_name = None, args = [], size = "large", **kwargs):
    """Runs every operator test of //test/backend on a backend.

    Each test builds a small function, runs it on the backend and on the Interpreter, and
    checks that they agree and that the result is right; a test skips itself when the
    backend's isOpSupported refuses one of its nodes. The log ends with one line per backend:
    "kiln operator suite: NAME: N tests, N passed, N failed, N skipped (unsupported by
    isOpSupported)", after a line per skipped test naming the unsupported node.

    Args:
      name: the test's name.
      backend: the backend's cc_library; it must register itself (KILN_REGISTER_BACKEND)
        and be linked whole (alwayslink = 1).
      backend_name: the name it registers; default: every registered backend but the
        Interpreter.
      args: more arguments for the test (gtest flags such as --gtest_filter=*Conv*).
      size: the test's size.
      **kwargs: passed to cc_test (tags, timeout, ...).
    """
    native.cc_test(
        name = name,
        size = size,
        args = (["--kiln_backend=" + backend_name] if backend_name else []) + args,
        deps = [
            backend,
            "//test/backend:operator_suite",
        ],
        **kwargs
    )
