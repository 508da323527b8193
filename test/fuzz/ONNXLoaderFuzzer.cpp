// libFuzzer target for the ONNX loader: any byte string given to loadONNXFromBuffer must
// produce either a model or an Error, never a crash, hang, leak or undefined behaviour.
// A model that loads is also verified and printed, so that whatever the importer built is
// walked once. Built with clang-14 by test/fuzz/build_fuzzer.sh (see test/fuzz/README.md).

#include "kiln/Graph/Graph.h"
#include "kiln/Importer/ONNX.h"

#include <cstddef>
#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  kiln::Module mod;
  kiln::Function *f = mod.createFunction("main");
  kiln::ONNXLoadOptions opts;
  // Keep each input's memory bounded: the loader must reject larger tensors cleanly.
  opts.maxTensorElements = uint64_t(1) << 22;
  kiln::Expected<kiln::ONNXModel> m = kiln::loadONNXFromBuffer(data, size, f, opts);
  if (!m) {
    kiln::Error e = m.takeError();
    (void)e.message();
    return 0;
  }
  kiln::Error v = f->verify();
  if (!v)
    (void)f->toString();
  return 0;
}
