/// \file
/// The limits of the machine a tool runs on, measured when asked (kiln-run's profile
/// compares each stage's rate with them): one core's multiply-add peak and the copy
/// bandwidth in L2 and from DRAM. Each takes a few milliseconds to tens of milliseconds.
#ifndef KILN_TOOLS_MACHINELIMITS_H
#define KILN_TOOLS_MACHINELIMITS_H

#include <string>

namespace kiln::tools {

struct MachineLimits {
  std::string isa;      ///< the vector instructions of the peak: "AVX-512", "AVX2+FMA", "scalar"
  double fmaGflops = 0; ///< one core: 12 independent multiply-add chains, registers only
  double l2GBs = 0;     ///< memcpy of 256 KB, bytes read plus written per second
  double dramGBs = 0;   ///< the same with 64 MB
};

/// Measures them now (best of a few rounds each; about 0.2 s in all).
MachineLimits measureMachineLimits();

} // namespace kiln::tools

#endif // KILN_TOOLS_MACHINELIMITS_H
