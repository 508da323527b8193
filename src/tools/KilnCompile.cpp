// kiln-compile: compiles an ONNX model ahead of time into a bundle (an object file, a C
// header and the weights) that a C or C++ program links with no LLVM and no Kiln at run
// time. docs/Bundles.md is the header's contract.
//
//   kiln-compile --model M.onnx --backend CPU --out DIR [--name NAME]
//                [--target x86-64-v4|x86-64-v3|x86-64|host] [--threads N] [--embed-weights]
//                [--shape NAME=DxD...] [--backend-opt NAME=VALUE]
#include "Flags.h"

#include "backends/CPU/bundle/Bundle.h"
#include "kiln/Graph/Graph.h"
#include "kiln/Importer/ONNX.h"

#include <cctype>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

/// The model file's stem as a C identifier ("resnet-50.onnx" -> "resnet_50").
std::string defaultName(const std::string &model) {
  std::string stem = model.substr(model.find_last_of('/') + 1);
  size_t dot = stem.find('.');
  if (dot != std::string::npos)
    stem = stem.substr(0, dot);
  std::string out;
  for (char c : stem)
    out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0])))
    out = "model_" + out;
  return out.substr(0, 64);
}

/// What the command line asks for.
struct Args {
  std::string model, backend = "CPU", out, name, target = "host";
  unsigned threads = 0;
  bool embed = false;
  std::map<std::string, std::vector<kiln::dim_t>> shapes;
  kiln::CompileOptions compile;
};

/// Declares kiln-compile's flags, bound to the fields of a.
void addFlags(kiln::tools::Flags &flags, Args &a) {
  flags.add("--model", a.model, "M.onnx", "the ONNX model").required();
  flags.add("--backend", a.backend, "NAME", "the backend compiling it (CPU only)");
  flags.add("--out", a.out, "DIR", "the folder to write to (created when missing)").required();
  flags.add("--name", a.name, "NAME",
            "the entry point's name and the files' stem, a C identifier (default: the "
            "model file's stem)");
  flags.add("--target", a.target, "CPU",
            "x86-64-v4 (AVX-512), x86-64-v3 (AVX2), x86-64 (SSE2) or host (what the JIT "
            "would use on this machine)");
  flags.add("--threads", a.threads, "N",
            "compile for N threads: the entry point takes a parallel-for callback (0 or 1: "
            "serial, no callback)");
  flags.add("--embed-weights", a.embed, "put the weights inside the object file");
  flags.add("--shape", "NAME=DxDx...",
            "the shape of input NAME, repeatable (inputs with symbolic dimensions)",
            "NAME=DxD... with positive sizes", "the model's, symbolic dimensions 1",
            [&a](const std::string &v) { return kiln::tools::parseShapeFlag(v, a.shapes); });
  flags.add("--backend-opt", "NAME=VALUE",
            "a CPU backend parameter, repeatable (winograd=0, avx512=0, ...)", "NAME=VALUE",
            "none",
            [&a](const std::string &v) { return !bool(a.compile.setBackendOption(v)); });
}

/// The reason the parsed arguments cannot be used, or "" (fills in the default name).
std::string checkArgs(Args &a) {
  if (a.backend != "CPU")
    return "backend '" + a.backend + "' cannot write bundles (only CPU can)";
  if (a.name.empty())
    a.name = defaultName(a.model);
  if (!kiln::cpu::isValidBundleName(a.name))
    return "--name '" + a.name + "' is not a C identifier";
  const std::string &t = a.target;
  if (t != "host" && t != "x86-64-v4" && t != "x86-64-v3" && t != "x86-64")
    return "unknown target '" + t + "' (expected x86-64-v4, x86-64-v3, x86-64 or host)";
  if (a.compile.threads)
    return "give the thread count with --threads, not as a backend option";
  return "";
}

int fail(const kiln::Error &e) {
  std::cerr << "kiln-compile: " << e.toString() << "\n";
  return 1;
}

/// Imports the model, writes the bundle and prints what it wrote; the exit status.
int compileBundle(const Args &a) {
  kiln::Module mod;
  kiln::Function *f = mod.createFunction("main");
  kiln::ONNXLoadOptions lo;
  lo.inputShapes = a.shapes;
  if (kiln::Expected<kiln::ONNXSignature> sig = kiln::getONNXSignature(a.model)) {
    if (kiln::Error e = kiln::checkONNXInputShapes(sig->inputs, a.shapes))
      return fail(e);
  } else {
    return fail(sig.takeError());
  }
  kiln::Expected<kiln::ONNXModel> m = kiln::loadONNX(a.model, f, lo);
  if (!m)
    return fail(m.takeError());
  std::vector<kiln::cpu::BundleTensor> inputs, outputs;
  for (const std::string &n : m->inputNames)
    inputs.push_back({n, m->getInput(n)});
  for (const std::string &n : m->outputNames)
    outputs.push_back({n, m->getOutputPlaceholder(n)});

  kiln::cpu::BundleOptions bo;
  bo.name = a.name;
  bo.outDir = a.out;
  bo.target = a.target;
  bo.threads = a.threads;
  bo.embedWeights = a.embed;
  bo.source = a.model.substr(a.model.find_last_of('/') + 1);
  bo.compile = a.compile;
  kiln::Expected<kiln::cpu::BundleResult> r = kiln::cpu::writeBundle(f, inputs, outputs, bo);
  if (!r)
    return fail(r.takeError());
  std::cout << "kiln-compile: " << a.name << " for " << r->target << " ("
            << (r->avx512 ? "AVX-512" : "AVX2") << " kernels, "
            << (a.threads > 1 ? std::to_string(a.threads) + " threads" : std::string("serial"))
            << "): constants " << r->constantBytes << " B, mutables " << r->mutableBytes
            << " B, activations " << r->activationBytes << " B\n";
  for (const std::string &p : r->files)
    std::cout << "  " << p << "\n";
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  Args a;
  kiln::tools::Flags flags(
      "kiln-compile", "usage: kiln-compile --model M.onnx --out DIR [options]",
      "Writes NAME.o, NAME.h and NAME.weights (no .weights with --embed-weights) into DIR:\n"
      "the model compiled ahead of time by the CPU backend, linked by C or C++ programs\n"
      "with no LLVM or Kiln library (docs/Bundles.md). Exit 0 on success, 1 when the model\n"
      "cannot be compiled or the files cannot be written (nothing is left behind), 2 for\n"
      "bad arguments.\n");
  addFlags(flags, a);
  if (std::optional<int> exitCode = flags.parse(argc, argv))
    return *exitCode;
  std::string bad = checkArgs(a);
  if (!bad.empty())
    return flags.fail(bad);
  return compileBundle(a);
}
