"""kiln_bundle: an ONNX model compiled ahead of time by kiln-compile into a cc_library.

    load("//src/tools:kiln_bundle.bzl", "kiln_bundle")

    kiln_bundle(
        name = "digits",                      # the cc_library, the entry point, the files
        model = "//examples/digits:digits.onnx",
        target = "x86-64-v3",                 # x86-64-v4 | x86-64-v3 | x86-64 | host
        shapes = ["image=1x1x8x8"],           # inputs with symbolic dimensions
    )

    cc_binary(name = "app", srcs = ["app.c"], deps = [":digits"])  # #include "digits.h"

The library holds NAME.o and NAME.h (included as "NAME.h"); NAME.weights is its data
file (runfiles path <package>/NAME.weights) unless embed_weights = True, which puts the
weights inside the object as NAME_weights. docs/Bundles.md is the header's contract.
"""

def _kiln_compile_impl(ctx):
    outs = [ctx.outputs.object, ctx.outputs.header]
    if ctx.outputs.weights:
        outs.append(ctx.outputs.weights)
    args = ctx.actions.args()
    args.add(ctx.executable._kiln_compile)
    args.add("--model", ctx.file.model)
    args.add("--out", ctx.outputs.object.dirname)
    args.add("--name", ctx.attr.bundle_name)
    args.add("--target", ctx.attr.target)
    if ctx.attr.threads:
        args.add("--threads", str(ctx.attr.threads))
    if ctx.attr.embed_weights:
        args.add("--embed-weights")
    for s in ctx.attr.shapes:
        args.add("--shape", s)
    for o in ctx.attr.backend_opts:
        args.add("--backend-opt", o)
    ctx.actions.run_shell(
        # kiln-compile prints what it wrote; a build log needs none of it.
        command = '"$1" "${@:2}" >/dev/null',
        arguments = [args],
        inputs = [ctx.file.model],
        tools = [ctx.executable._kiln_compile],
        outputs = outs,
        mnemonic = "KilnCompile",
        progress_message = "kiln-compile %s for %s" % (ctx.attr.bundle_name, ctx.attr.target),
    )
    return [DefaultInfo(files = depset(outs), runfiles = ctx.runfiles(files = outs))]

# kiln-compile runs in the target configuration: the compiler is the same build as the rest
# of Kiln (no second, host-configured build of it and its LLVM code), and bundles are for
# x86-64 like the machine that builds them.
_kiln_compile = rule(
    implementation = _kiln_compile_impl,
    attrs = {
        "model": attr.label(allow_single_file = True, mandatory = True),
        "object": attr.output(mandatory = True),
        "header": attr.output(mandatory = True),
        "weights": attr.output(),
        "bundle_name": attr.string(mandatory = True),
        "target": attr.string(mandatory = True),
        "threads": attr.int(default = 0),
        "shapes": attr.string_list(),
        "embed_weights": attr.bool(default = False),
        "backend_opts": attr.string_list(),
        "_kiln_compile": attr.label(
            default = "//src/tools:kiln-compile",
            executable = True,
            cfg = "target",
        ),
    },
)

def kiln_bundle(
        name,
        model,
        bundle_name = None,
        target = "x86-64-v3",
        threads = 0,
        shapes = [],
        embed_weights = False,
        backend_opts = [],
        visibility = None,
        tags = []):
    """Runs kiln-compile on `model` at build time; `name` is a cc_library of the bundle.

    Args:
      name: the cc_library's name; also the entry point's and the files' unless
        bundle_name is given.
      model: the ONNX model (a label).
      bundle_name: the entry point's name and the files' stem (a C identifier).
      target: x86-64-v4 (AVX-512), x86-64-v3 (AVX2), x86-64 (SSE2) or host (the build
        machine's CPU; not portable).
      threads: 0 or 1 for a serial bundle; N > 1 compiles for N threads and the entry
        point takes a parallel-for callback.
      shapes: "INPUT=DxD..." items for inputs with symbolic dimensions.
      embed_weights: put the weights inside the object instead of NAME.weights.
      backend_opts: CPU backend parameters, "NAME=VALUE" items.
      visibility: of the cc_library and the weights.
      tags: of the generated targets.
    """
    n = bundle_name or name
    _kiln_compile(
        name = name + "_kiln_compile",
        model = model,
        object = n + ".o",
        header = n + ".h",
        weights = None if embed_weights else n + ".weights",
        bundle_name = n,
        target = target,
        threads = threads,
        shapes = shapes,
        embed_weights = embed_weights,
        backend_opts = backend_opts,
        tags = tags,
    )
    native.cc_library(
        name = name,
        srcs = [n + ".o"],
        hdrs = [n + ".h"],
        data = [] if embed_weights else [n + ".weights"],
        includes = ["."],
        linkstatic = 1,
        visibility = visibility,
        tags = tags,
    )
