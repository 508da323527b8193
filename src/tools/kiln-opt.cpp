// kiln-opt: reads a module in the graph text form, runs graph passes on its functions, and
// prints the result.
//
//   kiln-opt [options] [FILE | -]
//     --pass=LIST          passes to run, e.g. cse,dce or (sink-transposes,dce)*
//     --pipeline=NAME      a named pipeline: default | none; with --backend, the backend's
//                          own pipeline when it registered one
//     --backend=NAME       the backend whose shouldLower / isOpSupported drive lowering and
//                          fusion (default: none, i.e. lower everything, fuse nothing)
//     --function=NAME      only this function (default: every function)
//     --dump-after=LIST    print the function after each run of these passes (* = all)
//     --time-passes        print per-pass times to stderr
//     --no-verify          do not verify after each pass
//     --split-input-file   treat `// -----` lines as separating independent modules (as
//                          in the golden tests); outputs are separated the same way
//     --list-passes        print the passes and exit
//     -o FILE              write the result to FILE instead of stdout

#include "kiln/Backend/Backend.h"
#include "kiln/Graph/Graph.h"
#include "kiln/Graph/TextIR.h"
#include "kiln/Passes/Pipeline.h"

#include <fstream>
#include <iostream>
#include <sstream>

using namespace kiln;

namespace {

struct Options {
  std::string passes, pipeline, backend, function, output, input = "-";
  std::vector<std::string> dumpAfter;
  bool timePasses = false, verify = true, listPasses = false, split = false;
};

std::vector<std::string> splitCommas(const std::string &s) {
  std::vector<std::string> r;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty())
      r.push_back(item);
  return r;
}

int usage(const char *msg) {
  std::cerr << "kiln-opt: " << msg << "\n"
            << "usage: kiln-opt [--pass=LIST | --pipeline=NAME] [--backend=NAME] "
               "[--function=NAME] [--dump-after=LIST] [--time-passes] [--no-verify] "
               "[--split-input-file] [--list-passes] [-o FILE] [FILE | -]\n";
  return 2;
}

Expected<Options> parseArgs(int argc, char **argv) {
  Options o;
  bool sawInput = false;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto value = [&](const char *flag, std::string &out) {
      std::string f = std::string(flag) + "=";
      if (a.rfind(f, 0) != 0)
        return false;
      out = a.substr(f.size());
      return true;
    };
    std::string v;
    if (value("--pass", o.passes) || value("--pipeline", o.pipeline) ||
        value("--backend", o.backend) || value("--function", o.function))
      continue;
    if (value("--dump-after", v)) {
      for (const std::string &d : splitCommas(v))
        o.dumpAfter.push_back(d);
      continue;
    }
    if (a == "--time-passes") {
      o.timePasses = true;
    } else if (a == "--no-verify") {
      o.verify = false;
    } else if (a == "--split-input-file") {
      o.split = true;
    } else if (a == "--list-passes") {
      o.listPasses = true;
    } else if (a == "-o" && i + 1 < argc) {
      o.output = argv[++i];
    } else if (a == "-" || a[0] != '-') {
      if (sawInput)
        return makeError(ErrorCode::InvalidArgument, "more than one input file");
      o.input = a;
      sawInput = true;
    } else {
      return makeError(ErrorCode::InvalidArgument, "unknown option '", a, "'");
    }
  }
  if (!o.passes.empty() && !o.pipeline.empty())
    return makeError(ErrorCode::InvalidArgument, "give --pass or --pipeline, not both");
  return o;
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
  Pipeline pipeline;
  if (!o.passes.empty()) {
    KILN_ASSIGN_OR_RETURN(pipeline, parsePassList(o.passes));
  } else if (o.pipeline == "default" && backend) {
    pipeline = getPipelineForBackend(backend.get());
  } else if (!o.pipeline.empty()) {
    KILN_ASSIGN_OR_RETURN(pipeline, getNamedPipeline(o.pipeline));
  }
  KILN_ASSIGN_OR_RETURN(std::string text, readInput(o.input));
  std::string source = o.input == "-" ? "<stdin>" : o.input;
  std::vector<std::pair<std::string, unsigned>> chunks; // text, first line
  if (o.split) {
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
  } else {
    chunks.push_back({text, 1});
  }

  PassManagerOptions pm;
  pm.verifyEach = o.verify;
  pm.dumpAfter = o.dumpAfter;
  pm.dumpStream = &std::cerr;
  std::string out;
  for (size_t c = 0; c < chunks.size(); c++) {
    std::string where =
        source + (o.split ? " (case at line " + std::to_string(chunks[c].second) + ")" : "");
    Expected<std::unique_ptr<Module>> parsed = parseModule(chunks[c].first);
    if (!parsed)
      return parsed.takeError().addContext(where);
    std::unique_ptr<Module> m = std::move(parsed).get();
    bool found = o.function.empty();
    for (const auto &f : m->getFunctions()) {
      if (!o.function.empty() && f->getName() != o.function)
        continue;
      found = true;
      Expected<PipelineReport> report = runPipeline(f.get(), pipeline, backend.get(), pm);
      if (!report)
        return report.takeError().addContext(where);
      if (o.timePasses)
        std::cerr << "function " << f->getName() << ", pipeline '" << pipeline.name
                  << "': " << pipeline.toString() << "\n"
                  << report->timingTable();
    }
    if (!found)
      return makeError(ErrorCode::NotFound, where, ": no function named '", o.function, "'");
    if (c)
      out += "// -----\n";
    out += printModule(*m);
  }

  if (o.output.empty()) {
    std::cout << out;
    return Error::success();
  }
  std::ofstream os(o.output);
  if (!os)
    return makeError(ErrorCode::NotFound, "cannot write '", o.output, "'");
  os << out;
  return Error::success();
}

} // namespace

int main(int argc, char **argv) {
  Expected<Options> o = parseArgs(argc, argv);
  if (!o)
    return usage(o.getError().message().c_str());
  if (Error e = run(*o)) {
    std::cerr << "kiln-opt: error: " << e.toString() << "\n";
    return 1;
  }
  return 0;
}
