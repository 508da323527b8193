/// \file
/// Models and helpers shared by the runtime tests: small networks built with the graph
/// API, and the Interpreter as the reference.
#ifndef KILN_TEST_RUNTIME_RUNTIMETESTUTILS_H
#define KILN_TEST_RUNTIME_RUNTIMETESTUTILS_H

#include "kiln/Runtime/DeviceManager.h"
#include "kiln/Runtime/HostManager.h"
#include "kiln/kiln.h"

#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

namespace kiln::test {

/// A built network: its function, its input, and its outputs.
struct Net {
  Function *f = nullptr;
  Placeholder *input = nullptr;
  std::vector<Placeholder *> outputs;
};

/// Only what the Sim runs: x [1, width] through \p layers FullyConnected+Relu pairs of
/// width x width float weights (4*width^2 bytes each), then saved.
Net buildMLP(Module &m, const std::string &name, unsigned layers, dim_t width);

/// Convolutions, pooling, Add, Concat and FullyConnected (Sim) mixed with Sigmoid and
/// Tanh (host only), and an int8 Quantize/Dequantize round trip (Sim); two outputs.
Net buildMixed(Module &m, const std::string &name);

/// Input \p i of a family of seeded random inputs for \p ph.
Tensor makeInput(const Placeholder *ph, unsigned i);

/// Bindings with \p x for the input and zeroed outputs.
std::unique_ptr<PlaceholderBindings> makeBindings(const Net &n, const Tensor &x);

/// The outputs of \p n on \p x, computed by the Interpreter on the original function.
std::vector<Tensor> reference(const Net &n, const Tensor &x);

/// True when the outputs in \p b equal \p ref exactly; explains a mismatch in \p why.
bool sameOutputs(const Net &n, const PlaceholderBindings &b, const std::vector<Tensor> &ref,
                 std::string *why = nullptr);

/// \p count Sim devices of \p memory bytes each, then one Interpreter device.
std::vector<DeviceConfig> simDevices(unsigned count, uint64_t memory, bool withHost = true);

/// Collects asynchronous results, in the order their callbacks were called; wait() returns
/// when \p n have arrived.
class Results {
public:
  void add(RunResult r) {
    std::lock_guard<std::mutex> lock(mu_);
    results_.push_back(std::move(r));
    cv_.notify_all();
  }
  std::vector<RunResult> &wait(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return results_.size() >= n; });
    return results_;
  }
  ResultCallback callback() {
    return [this](RunResult r) { add(std::move(r)); };
  }

private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<RunResult> results_;
};

inline bool contains(const std::string &s, const std::string &part) {
  return s.find(part) != std::string::npos;
}

} // namespace kiln::test

#endif // KILN_TEST_RUNTIME_RUNTIMETESTUTILS_H
