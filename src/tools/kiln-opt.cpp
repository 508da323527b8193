// kiln-opt: reads a module in the graph text form, runs graph passes on its functions, and
// prints the result.
//
//   kiln-opt --pass=cse,dce [--dump-after=cse] [--time-passes] FILE
//   kiln-opt --pipeline=default --backend=CPU --split-input-file test/golden/cse.txt
//   kiln-opt --pipeline=default --backend=CPU --dot=after.dot model.txt
//
// `kiln-opt --help` lists the flags. Exit 0 on success, 1 when parsing or a pass fails,
// 2 on a bad command line.

#include "Flags.h"

#include "kiln/Backend/Backend.h"
#include "kiln/Graph/Graph.h"
#include "kiln/Graph/TextIR.h"
#include "kiln/Passes/Pipeline.h"

#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

using namespace kiln;

namespace {

struct Options {
  std::string passes, pipeline, backend, function, output, dot, input = "-";
  std::vector<std::string> dumpAfter;
  bool timePasses = false, noVerify = false, listPasses = false, split = false;
};

/// Parses the flags into \p o; returns the exit status when the tool should stop.
std::optional<int> parseOptions(int argc, char **argv, Options &o) {
  tools::Flags flags("kiln-opt", "usage: kiln-opt [options] [FILE | -]",
                     "Reads a module in the graph text form (FILE or stdin), runs graph passes "
                     "on its functions\nand prints the result.\n");
  flags.add("--pass", o.passes, "LIST", "passes to run, e.g. cse,dce or (sink-transposes,dce)*");
  flags.add("--pipeline", o.pipeline, "NAME",
            "a named pipeline: default | none; with --backend, the backend's own pipeline "
            "when it registered one");
  flags.add("--backend", o.backend, "NAME",
            "the backend whose shouldLower / isOpSupported drive lowering and fusion "
            "(default: none, i.e. lower everything, fuse nothing)");
  flags.add("--function", o.function, "NAME", "only this function (default: every function)");
  flags.add("--dump-after", o.dumpAfter, "LIST",
            "print the function after each run of these passes (* = all)");
  flags.add("--time-passes", o.timePasses, "print per-pass times to stderr");
  flags.add("--no-verify", o.noVerify, "do not verify after each pass");
  flags.add("--split-input-file", o.split,
            "treat `// -----` lines as separating independent modules (as in the golden "
            "tests); outputs are separated the same way");
  flags.add("--list-passes", o.listPasses, "print the passes and exit");
  flags.add("-o", o.output, "FILE", "write the result to FILE instead of stdout");
  flags.add("--dot", o.dot, "FILE",
            "also write Graphviz DOT of every function after the passes to FILE (one "
            "digraph per function, in order)");
  flags.positional(o.input, "input file");
  if (std::optional<int> exitCode = flags.parse(argc, argv))
    return exitCode;
  if (!o.passes.empty() && !o.pipeline.empty())
    return flags.fail("give --pass or --pipeline, not both");
  return std::nullopt;
}

Expected<std::string> readInput(const std::string &path) {
  std::ostringstream os;
  if (path == "-") {
    os << std::cin.rdbuf();
    return os.str();
  }
  std::ifstream in(path);
  if (!in)
    return makeError(ErrorCode::NotFound, "cannot open input file '", path, "'");
  os << in.rdbuf();
  return os.str();
}

/// The pipeline the options name: --passes, the backend's own with --pipeline default, a
/// named one, or none.
Expected<Pipeline> choosePipeline(const Options &o, Backend *backend) {
  if (!o.passes.empty())
    return parsePassList(o.passes);
  if (o.pipeline == "default" && backend)
    return getPipelineForBackend(backend);
  if (!o.pipeline.empty())
    return getNamedPipeline(o.pipeline);
  return Pipeline();
}

/// The input's cases with the line each starts on: the whole text, or with --split the
/// pieces between lines starting "// -----".
std::vector<std::pair<std::string, unsigned>> splitCases(const std::string &text, bool split) {
  if (!split)
    return {{text, 1}};
  std::vector<std::pair<std::string, unsigned>> chunks;
  std::istringstream in(text);
  std::string cur;
  unsigned no = 1, first = 1;
  for (std::string line; std::getline(in, line); no++) {
    if (line.rfind("// -----", 0) == 0) {
      chunks.push_back({cur, first});
      cur.clear();
      first = no + 1;
      continue;
    }
    cur += line + "\n";
  }
  chunks.push_back({cur, first});
  return chunks;
}

/// Parses one case, runs the pipeline over its functions (the one --function names, or
/// all) and appends the printed module to out and the functions' DOT to dot.
Error runCase(const Options &o, const std::string &text, const std::string &where,
              const Pipeline &pipeline, Backend *backend, std::string &out, std::string &dot) {
  PassManagerOptions pm;
  pm.verifyEach = !o.noVerify;
  pm.dumpAfter = o.dumpAfter;
  pm.dumpStream = &std::cerr;
  Expected<std::unique_ptr<Module>> parsed = parseModule(text);
  if (!parsed)
    return parsed.takeError().addContext(where);
  std::unique_ptr<Module> m = std::move(parsed).get();
  bool found = o.function.empty();
  for (const auto &f : m->getFunctions()) {
    if (!o.function.empty() && f->getName() != o.function)
      continue;
    found = true;
    Expected<PipelineReport> report = runPipeline(f.get(), pipeline, backend, pm);
    if (!report)
      return report.takeError().addContext(where);
    if (o.timePasses)
      std::cerr << "function " << f->getName() << ", pipeline '" << pipeline.name
                << "': " << pipeline.toString() << "\n"
                << report->timingTable();
    if (!o.dot.empty())
      dot += f->toDot();
  }
  if (!found)
    return makeError(ErrorCode::NotFound, where, ": no function named '", o.function, "'");
  out += printModule(*m);
  return Error::success();
}

/// Writes text to path; an error naming the file if it cannot.
Error writeText(const std::string &path, const std::string &text) {
  std::ofstream os(path);
  os << text;
  os.close();
  if (!os)
    return makeError(ErrorCode::NotFound, "cannot write '", path, "'");
  return Error::success();
}

Error run(const Options &o) {
  if (o.listPasses) {
    for (const std::string &name : getGraphPassNames())
      std::cout << name << "  " << getGraphPassDescription(name) << "\n";
    return Error::success();
  }
  std::unique_ptr<Backend> backend;
  if (!o.backend.empty()) {
    KILN_ASSIGN_OR_RETURN(backend, createBackend(o.backend));
  }
  KILN_ASSIGN_OR_RETURN(Pipeline pipeline, choosePipeline(o, backend.get()));
  KILN_ASSIGN_OR_RETURN(std::string text, readInput(o.input));
  std::string source = o.input == "-" ? "<stdin>" : o.input;
  std::vector<std::pair<std::string, unsigned>> chunks = splitCases(text, o.split);
  std::string out, dot;
  for (size_t c = 0; c < chunks.size(); c++) {
    std::string where =
        source + (o.split ? " (case at line " + std::to_string(chunks[c].second) + ")" : "");
    if (c)
      out += "// -----\n";
    if (Error e = runCase(o, chunks[c].first, where, pipeline, backend.get(), out, dot))
      return e;
  }
  if (!o.dot.empty()) {
    if (Error e = writeText(o.dot, dot))
      return e;
  }
  if (o.output.empty()) {
    std::cout << out;
    return Error::success();
  }
  return writeText(o.output, out);
}

} // namespace

int main(int argc, char **argv) {
  Options o;
  if (std::optional<int> exitCode = parseOptions(argc, argv, o))
    return *exitCode;
  if (Error e = run(o)) {
    std::cerr << "kiln-opt: error: " << e.toString() << "\n";
    return 1;
  }
  return 0;
}
