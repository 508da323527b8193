// compiler_fuzz: the differential fuzzer of the compiler (test/fuzz/README.md).
//
//   bazel run -c opt //test/fuzz:compiler_fuzz -- --seconds 3600 --seed 1 --reduce --out /tmp/f
//
// Generates graphs (GraphGen.h), checks each in a child process against the oracle
// (Oracle.h), and writes every finding (and with --reduce its reduced graph) under --out.

#include "GraphGen.h"
#include "Oracle.h"
#include "Reducer.h"

#include "kiln/Graph/TextIR.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <vector>

using namespace kiln;
using namespace kiln::fuzz;

namespace {

void usage() {
  std::cerr << "usage: compiler_fuzz [--seed N] [--count N] [--seconds S] [--threads N]\n"
               "         [--config SUBSTR] [--reduce] [--out DIR] [--max-nodes N]\n"
               "         [--max-elements N] [--no-fork] [--stats] [--no-quant-mix]\n"
               "         [--check FILE]\n"
               "  --seed      first seed (graph i uses seed*1000003+i)\n"
               "  --count     graphs to try (default: unlimited with --seconds, else 100)\n"
               "  --seconds   stop starting graphs after this many seconds\n"
               "  --threads   graphs checked at once (one child process each)\n"
               "  --config    only configurations whose name contains SUBSTR\n"
               "  --reduce    shrink each finding and write it as a regression file\n"
               "  --out       directory for findings (default ./compiler_fuzz_out)\n"
               "  --stats     print per-operator generation counts at the end\n"
               "  --no-quant-mix  no graph from the quantizable mix (else every fifth)\n"
               "  --check     run the oracle on one text-IR file and exit\n";
}

uint64_t graphSeed(uint64_t seed, uint64_t i) { return seed * 1000003ull + i; }

std::string printExact(const Module &m) {
  PrintOptions po;
  po.maxConstantElements = size_t(1) << 40;
  return printModule(m, po);
}

bool writeFile(const std::string &path, const std::string &text) {
  std::ofstream o(path);
  o << text;
  return bool(o);
}

/// Reads "// fuzz-input-seed: N" from a regression file's header.
uint64_t headerSeed(const std::string &text) {
  size_t p = text.find("// fuzz-input-seed: ");
  return p == std::string::npos ? 1 : std::stoull(text.substr(p + 20));
}

} // namespace

int main(int argc, char **argv) {
  uint64_t seed = 1, count = 0;
  double seconds = 0;
  unsigned threads = 1;
  std::string config, out = "compiler_fuzz_out", checkFile;
  bool reduce = false, fork = true, stats = false, quantMix = true;
  GenOptions gen;
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        usage();
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--seed")
      seed = std::stoull(next());
    else if (a == "--count")
      count = std::stoull(next());
    else if (a == "--seconds")
      seconds = std::stod(next());
    else if (a == "--threads")
      threads = unsigned(std::max(1, std::stoi(next())));
    else if (a == "--config")
      config = next();
    else if (a == "--reduce")
      reduce = true;
    else if (a == "--out")
      out = next();
    else if (a == "--max-nodes")
      gen.maxNodes = unsigned(std::stoul(next()));
    else if (a == "--max-elements")
      gen.maxElements = dim_t(std::stoull(next()));
    else if (a == "--no-fork")
      fork = false;
    else if (a == "--no-quant-mix")
      quantMix = false;
    else if (a == "--stats")
      stats = true;
    else if (a == "--check")
      checkFile = next();
    else {
      usage();
      return 2;
    }
  }
  if (!checkFile.empty()) {
    std::ifstream in(checkFile);
    std::stringstream ss;
    ss << in.rdbuf();
    OracleOptions o;
    o.configFilter = config;
    o.inputSeed = headerSeed(ss.str());
    GraphResult r = fork ? checkModuleIsolated(ss.str(), o) : checkModule(ss.str(), o);
    std::cout << (r.rejected ? "rejected: " + r.rejectReason + "\n" : "")
              << "configurations run: " << r.configsRun << "\n"
              << describeFindings(r);
    for (const auto &[why, n] : r.skipped)
      std::cout << "skipped: " << why << " (" << n << ")\n";
    return r.findings.empty() ? 0 : 1;
  }
  if (!count && seconds <= 0)
    count = 100;
  mkdir(out.c_str(), 0755);

  std::mutex mu;
  std::atomic<uint64_t> next{0};
  uint64_t tried = 0, rejected = 0, configs = 0, findings = 0, unstable = 0, nonFinite = 0,
           amplified = 0;
  std::map<std::string, uint64_t> skipped, rejectReasons, findingsByConfig;
  GenStats genStats;
  auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  double lastReport = 0;

  auto worker = [&] {
    for (;;) {
      uint64_t i = next++;
      if (count && i >= count)
        return;
      if (seconds > 0 && elapsed() >= seconds)
        return;
      uint64_t gs = graphSeed(seed, i);
      GenStats local;
      // Every other graph small (at most 8 operators, dimensions up to 12, 256 elements):
      // small images make pads, strides and dilations cover much of them.
      GenOptions g = gen;
      // Every fifth graph (small and large in turn) from the quantizable mix, which the
      // quantized configurations can run on the CPU backend (README, "The generator").
      if (quantMix && i % 5 == 1)
        g = quantizableMix(gen);
      if (i % 2 == 0) {
        g.maxNodes = std::min(g.maxNodes, 8u);
        g.maxDim = std::min<dim_t>(g.maxDim, 12);
        g.maxElements = std::min<dim_t>(g.maxElements, 256);
      }
      std::unique_ptr<Module> m = generateGraph(gs, g, &local);
      std::string text = printExact(*m);
      OracleOptions o;
      o.configFilter = config;
      o.inputSeed = gs;
      GraphResult r = fork ? checkModuleIsolated(text, o) : checkModule(text, o);
      std::vector<std::pair<Finding, std::string>> reduced;
      if (reduce)
        for (const Finding &f : r.findings)
          reduced.push_back({f, reduceModule(text, sameFinding(f, o))});
      std::lock_guard<std::mutex> lock(mu);
      tried++;
      for (const auto &[k, v] : local.perKind) {
        genStats.perKind[k].first += v.first;
        genStats.perKind[k].second += v.second;
      }
      if (r.rejected) {
        rejected++;
        rejectReasons[r.rejectReason.substr(0, 60)]++;
      }
      configs += r.configsRun;
      unstable += r.unstableOutputs;
      nonFinite += r.nonFiniteOutputs;
      amplified += r.amplifiedOutputs;
      for (const auto &[k, v] : r.skipped)
        skipped[k] += v;
      if (!r.findings.empty()) {
        findings += r.findings.size();
        std::string base = out + "/finding-" + std::to_string(gs);
        std::ostringstream hdr;
        for (const Finding &f : r.findings) {
          findingsByConfig[f.config + " " + f.kind]++;
          hdr << "// found: " << f.config << ": " << f.kind << ": " << f.detail << "\n";
        }
        hdr << "// fuzz-input-seed: " << gs << "\n";
        writeFile(base + ".txt", hdr.str() + text);
        std::cout << "FINDING graph seed " << gs << " -> " << base << ".txt\n"
                  << describeFindings(r) << std::flush;
        unsigned j = 0;
        for (const auto &[f, t] : reduced) {
          std::string path = base + "-reduced" + std::to_string(j++) + ".txt";
          writeFile(path, regressionFile(t, f, gs));
          std::cout << "  reduced (" << f.config << ") -> " << path << "\n" << std::flush;
        }
      }
      double e = elapsed();
      if (e - lastReport >= 60) {
        lastReport = e;
        std::cout << "[" << int(e) << " s] graphs " << tried << " (" << tried / e
                  << "/s), rejected " << rejected << ", configurations/graph "
                  << (tried > rejected ? double(configs) / double(tried - rejected) : 0)
                  << ", findings " << findings << "\n"
                  << std::flush;
      }
    }
  };
  std::vector<std::thread> ts;
  for (unsigned t = 0; t < threads; t++)
    ts.emplace_back(worker);
  for (auto &t : ts)
    t.join();

  double e = elapsed();
  std::cout << "\ncompiler_fuzz: seed " << seed << ", " << e << " s\n"
            << "graphs tried: " << tried << " (" << tried / std::max(e, 1e-9) << " graphs/s)\n"
            << "graphs rejected by the reference: " << rejected << "\n"
            << "configurations run: " << configs << " ("
            << (tried > rejected ? double(configs) / double(tried - rejected) : 0)
            << " per compared graph)\n"
            << "outputs not compared (discontinuous op on rounded floats): " << unstable << "\n"
            << "outputs not compared (non-finite or huge reference values): " << nonFinite << "\n"
            << "outputs compared with a bound widened by an ill-conditioned operator: "
            << amplified << "\n"
            << "findings: " << findings << "\n";
  for (const auto &[k, v] : findingsByConfig)
    std::cout << "  finding " << k << ": " << v << "\n";
  for (const auto &[k, v] : skipped)
    std::cout << "  skipped: " << k << ": " << v << "\n";
  for (const auto &[k, v] : rejectReasons)
    std::cout << "  rejected: " << k << ": " << v << "\n";
  if (stats) {
    std::cout << "per operator: candidates tried / nodes kept\n";
    for (const std::string &k : allOperatorKinds()) {
      auto it = genStats.perKind.find(k);
      auto v = it == genStats.perKind.end() ? std::pair<uint64_t, uint64_t>{0, 0} : it->second;
      std::cout << "  " << k << ": " << v.first << " / " << v.second << "\n";
    }
  }
  return findings ? 1 : 0;
}
