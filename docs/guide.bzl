"""One cc_test per C++ block of the user guide (docs/guide/*.md)."""

def guide_snippets(name, pages, deps, extra_deps = {}):
    """Compiles, links and runs every ```cpp block of the guide's pages.

    Args:
      name: the test_suite holding every snippet test and the block count check.
      pages: {page: number of ```cpp blocks}; //docs:<name>_count fails when a page has
        another number or a page of docs/guide/*.md is missing here.
      deps: what every snippet links (the embedder library).
      extra_deps: {page: [more deps]} (the backend-writing page's kiln/backend.h).
    """
    tests = []
    for page, count in pages.items():
        stem = page.split("/")[-1].replace(".md", "").replace("-", "_")
        for i in range(1, count + 1):
            src = "%s_snippet_%d.cpp" % (stem, i)
            native.genrule(
                name = "%s_snippet_%d_src" % (stem, i),
                srcs = [page],
                outs = [src],
                cmd = "$(location :extract_snippet.sh) $(location %s) %d $@" % (page, i),
                tools = [":extract_snippet.sh"],
            )
            test = "%s_snippet_%d" % (stem, i)
            native.cc_test(
                name = test,
                srcs = [src],
                copts = ["-Werror"],
                deps = deps + extra_deps.get(page, []),
            )
            tests.append(":" + test)
    native.sh_test(
        name = name + "_count",
        srcs = ["count_snippets.sh"],
        args = ["$(location %s)=%d" % (p, c) for p, c in pages.items()] + ["--"] +
               ["$(locations %s)" % ":guide_pages"],
        data = [":guide_pages"] + list(pages.keys()),
    )
    native.test_suite(
        name = name,
        tests = tests + [":" + name + "_count"],
    )
