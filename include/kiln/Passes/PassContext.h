/// \file
/// What every graph pass receives besides the Function: the backend it optimises for and
/// the options of its pipeline step. Plain data, passed in; passes read no global state.
#ifndef KILN_PASSES_PASSCONTEXT_H
#define KILN_PASSES_PASSCONTEXT_H

#include <cstddef>

namespace kiln {

class Backend;

/// Options of one pipeline step. Each field names the passes that read it; the others
/// ignore it.
struct PassOptions {
  /// constant-fold: skip a constant subgraph whose result has more elements than this
  /// (0: no limit).
  size_t maxFoldElements = 0;
  /// constant-fold: also fold subgraphs fed only by Splats into dense Constants. Off by
  /// default: a splat costs no memory, and simplify-splats folds the cheap cases.
  bool foldSplats = false;
  /// constant-fold: materialise Broadcast and Tile of constants (memory grows by the
  /// expansion factor). Off by default.
  bool foldExpansions = false;
  /// dce: also delete module Constants that no function uses any more (a caller that kept
  /// a pointer to such a Constant must not use it afterwards).
  bool eraseUnusedConstants = false;
};

/// The environment of one pass run.
struct PassContext {
  /// The backend the function is optimised for: lowering asks it `shouldLower(node)`,
  /// fuse-activations asks `isOpSupported(fused)`. Null means "no particular backend":
  /// lower everything that has a lowering (the Backend default) and fuse nothing.
  const Backend *backend = nullptr;
  PassOptions options;
};

} // namespace kiln

#endif // KILN_PASSES_PASSCONTEXT_H
