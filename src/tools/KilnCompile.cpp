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

} // namespace

int main(int argc, char **argv) {
  std::string model, backend = "CPU", out, name, target = "host";
  unsigned threads = 0;
  bool embed = false;
  std::map<std::string, std::vector<kiln::dim_t>> shapes;
  kiln::CompileOptions compile;
  kiln::tools::Flags flags(
      "kiln-compile", "usage: kiln-compile --model M.onnx --out DIR [options]",
      "Writes NAME.o, NAME.h and NAME.weights (no .weights with --embed-weights) into DIR:\n"
      "the model compiled ahead of time by the CPU backend, linked by C or C++ programs\n"
      "with no LLVM or Kiln library (docs/Bundles.md). Exit 0 on success, 1 when the model\n"
      "cannot be compiled or the files cannot be written (nothing is left behind), 2 for\n"
      "bad arguments.\n");
  flags.add("--model", model, "M.onnx", "the ONNX model").required();
  flags.add("--backend", backend, "NAME", "the backend compiling it (CPU only)");
  flags.add("--out", out, "DIR", "the folder to write to (created when missing)").required();
  flags.add("--name", name, "NAME",
            "the entry point's name and the files' stem, a C identifier (default: the "
            "model file's stem)");
  flags.add("--target", target, "CPU",
            "x86-64-v4 (AVX-512), x86-64-v3 (AVX2), x86-64 (SSE2) or host (what the JIT "
            "would use on this machine)");
  flags.add("--threads", threads, "N",
            "compile for N threads: the entry point takes a parallel-for callback (0 or 1: "
            "serial, no callback)");
  flags.add("--embed-weights", embed, "put the weights inside the object file");
  flags.add("--shape", "NAME=DxDx...",
            "the shape of input NAME, repeatable (inputs with symbolic dimensions)",
            "NAME=DxD... with positive sizes", "the model's, symbolic dimensions 1",
            [&shapes](const std::string &v) { return kiln::tools::parseShapeFlag(v, shapes); });
  flags.add("--backend-opt", "NAME=VALUE",
            "a CPU backend parameter, repeatable (winograd=0, avx512=0, ...)", "NAME=VALUE",
            "none", [&compile](const std::string &v) { return !bool(compile.setBackendOption(v)); });
  if (std::optional<int> exitCode = flags.parse(argc, argv))
    return *exitCode;
  if (backend != "CPU")
    return flags.fail("backend '" + backend + "' cannot write bundles (only CPU can)");
  if (name.empty())
    name = defaultName(model);
  if (!kiln::cpu::isValidBundleName(name))
    return flags.fail("--name '" + name + "' is not a C identifier");
  if (target != "host" && target != "x86-64-v4" && target != "x86-64-v3" && target != "x86-64")
    return flags.fail("unknown target '" + target +
                      "' (expected x86-64-v4, x86-64-v3, x86-64 or host)");
  if (compile.threads)
    return flags.fail("give the thread count with --threads, not as a backend option");

  auto fail = [](const kiln::Error &e) {
    std::cerr << "kiln-compile: " << e.toString() << "\n";
    return 1;
  };
  kiln::Module mod;
  kiln::Function *f = mod.createFunction("main");
  kiln::ONNXLoadOptions lo;
  lo.inputShapes = shapes;
  if (kiln::Expected<kiln::ONNXSignature> sig = kiln::getONNXSignature(model)) {
    if (kiln::Error e = kiln::checkONNXInputShapes(sig->inputs, shapes))
      return fail(e);
  } else {
    return fail(sig.takeError());
  }
  kiln::Expected<kiln::ONNXModel> m = kiln::loadONNX(model, f, lo);
  if (!m)
    return fail(m.takeError());
  std::vector<kiln::cpu::BundleTensor> inputs, outputs;
  for (const std::string &n : m->inputNames)
    inputs.push_back({n, m->getInput(n)});
  for (const std::string &n : m->outputNames)
    outputs.push_back({n, m->getOutputPlaceholder(n)});

  kiln::cpu::BundleOptions bo;
  bo.name = name;
  bo.outDir = out;
  bo.target = target;
  bo.threads = threads;
  bo.embedWeights = embed;
  bo.source = model.substr(model.find_last_of('/') + 1);
  bo.compile = compile;
  kiln::Expected<kiln::cpu::BundleResult> r = kiln::cpu::writeBundle(f, inputs, outputs, bo);
  if (!r)
    return fail(r.takeError());
  std::cout << "kiln-compile: " << name << " for " << r->target << " ("
            << (r->avx512 ? "AVX-512" : "AVX2") << " kernels, "
            << (threads > 1 ? std::to_string(threads) + " threads" : std::string("serial"))
            << "): constants " << r->constantBytes << " B, mutables " << r->mutableBytes
            << " B, activations " << r->activationBytes << " B\n";
  for (const std::string &p : r->files)
    std::cout << "  " << p << "\n";
  return 0;
}
