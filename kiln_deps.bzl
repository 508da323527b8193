"""Everything Kiln needs, for Kiln's own WORKSPACE and for any workspace that uses Kiln.

A consumer's WORKSPACE (see examples/external/):

    local_repository(name = "kiln", path = "/path/to/kiln")   # or http_archive / git_repository
    load("@kiln//:kiln_deps.bzl", "kiln_dependencies")
    kiln_dependencies()

then depends on `@kiln//:kiln` (every backend) or `@kiln//:kiln_interpreter` (the Interpreter
only: no LLVM). The repository must be named `kiln`.

kiln_dependencies() declares, each only if the workspace has not declared it already (so a
consumer's own definition wins):
  - rules_cc, rules_java, remote_coverage_tools: the offline stand-ins in third_party/ for
    what Bazel 4.2.3 (Debian's bazel-bootstrap) would otherwise download;
  - glog, gtest, eigen, png, benchmark, protobuf, onnx: Debian's packages (third_party/setup.sh
    installs them), each rooted at its own header directory with a BUILD file from
    third_party/ (gtest and benchmark serve Kiln's tests only and are never fetched by a build
    of //:kiln);
  - llvm: the system LLVM 14 through llvm-config-14 (third_party/llvm_configure.bzl; override
    with --repo_env=LLVM_CONFIG=/path/to/llvm-config).
Kiln's BUILD files refer to these by these names (@glog, @llvm, ...).
"""

load("@bazel_tools//tools/build_defs/repo:utils.bzl", "maybe")
load("//third_party:llvm_configure.bzl", "llvm_configure")

def _kiln_vendored_repository_impl(rctx):
    # A folder of this repository as a repository of its own: `local_repository` takes a path
    # relative to the *main* workspace, which a consumer's workspace does not share, so the
    # folder is found through a label of a file inside it.
    src = rctx.path(rctx.attr.marker).dirname
    for child in src.readdir():
        rctx.symlink(child, child.basename)

_kiln_vendored_repository = repository_rule(
    implementation = _kiln_vendored_repository_impl,
    attrs = {"marker": attr.label(allow_single_file = True, mandatory = True)},
    local = True,
)

# Debian's system libraries: repository name -> (header directory, BUILD file).
_SYSTEM_LIBRARIES = {
    "glog": ("/usr/include/glog", "glog.BUILD"),
    "gtest": ("/usr/include/gtest", "gtest.BUILD"),
    "eigen": ("/usr/include/eigen3", "eigen.BUILD"),
    "png": ("/usr/include/libpng16", "png.BUILD"),
    "benchmark": ("/usr/include/benchmark", "benchmark.BUILD"),
    "protobuf": ("/usr/include/google/protobuf", "protobuf.BUILD"),
    "onnx": ("/usr/include/onnx", "onnx.BUILD"),
}

def kiln_dependencies():
    """Declares every external repository Kiln's targets use (see the file's docstring)."""
    for name in ["rules_cc", "rules_java", "remote_coverage_tools"]:
        maybe(
            _kiln_vendored_repository,
            name = name,
            marker = Label("//third_party/%s:WORKSPACE" % name),
        )
    for name, (path, build_file) in _SYSTEM_LIBRARIES.items():
        maybe(
            native.new_local_repository,
            name = name,
            path = path,
            build_file = str(Label("//third_party:" + build_file)),
        )
    maybe(llvm_configure, name = "llvm")
