"""kiln_whole_archive: its deps' libraries, every one linked whole (as if `alwayslink = 1`).

A `cc_binary(linkshared = 1)` links its deps' archives, and the linker keeps only the objects
something in the binary refers to: a shared library would lose every function only its users
call (most of the builders, the importer's entry points, ...). Depending on this rule instead
keeps every object of every Kiln library. System libraries (`linkopts` such as -lLLVM-14,
-lglog) pass through unchanged.
"""

load("@bazel_tools//tools/cpp:toolchain_utils.bzl", "find_cpp_toolchain")

def _whole(ctx, feature_configuration, cc_toolchain, lib):
    if lib.static_library == None and lib.pic_static_library == None:
        return lib  # a shared library only: nothing to keep whole
    return cc_common.create_library_to_link(
        actions = ctx.actions,
        feature_configuration = feature_configuration,
        cc_toolchain = cc_toolchain,
        static_library = lib.static_library,
        pic_static_library = lib.pic_static_library,
        alwayslink = True,
    )

def _kiln_whole_archive_impl(ctx):
    cc_toolchain = find_cpp_toolchain(ctx)
    feature_configuration = cc_common.configure_features(
        ctx = ctx,
        cc_toolchain = cc_toolchain,
        requested_features = ctx.features,
        unsupported_features = ctx.disabled_features,
    )
    merged = cc_common.merge_cc_infos(cc_infos = [d[CcInfo] for d in ctx.attr.deps])
    linker_inputs = []
    for li in merged.linking_context.linker_inputs.to_list():
        linker_inputs.append(cc_common.create_linker_input(
            owner = li.owner,
            libraries = depset([
                _whole(ctx, feature_configuration, cc_toolchain, lib)
                for lib in li.libraries
            ]),
            user_link_flags = depset(li.user_link_flags),
            additional_inputs = depset(li.additional_inputs),
        ))
    return [CcInfo(
        compilation_context = merged.compilation_context,
        linking_context = cc_common.create_linking_context(
            linker_inputs = depset(linker_inputs),
        ),
    )]

kiln_whole_archive = rule(
    implementation = _kiln_whole_archive_impl,
    attrs = {
        "deps": attr.label_list(providers = [CcInfo]),
        "_cc_toolchain": attr.label(
            default = Label("@bazel_tools//tools/cpp:current_cc_toolchain"),
        ),
    },
    fragments = ["cpp"],
    toolchains = ["@bazel_tools//tools/cpp:toolchain_type"],
    incompatible_use_toolchain_transition = True,
)
