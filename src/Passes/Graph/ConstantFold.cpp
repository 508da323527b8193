// constant-fold: a node whose operands are all Constants (or nodes computed from
// Constants) is computed once, at compile time, by the reference backend: the constant
// subgraph is copied into a scratch Module (its Constants as views of the originals'
// payloads), saved into scratch placeholders, compiled and run on the Interpreter, and
// each result becomes a new Constant. One compile and one run per pass invocation, for
// all roots together. A Slice of a Constant is copied directly, by rows.
//
// Not folded (see PassOptions): Splats alone and, unless foldSplats, subgraphs fed only
// by Splats; Broadcast and Tile unless foldExpansions (they would grow memory);
// results above maxFoldElements; nodes the Interpreter does not support.

#include "ConstantFold.h"

#include "PassUtils.h"

#include "kiln/Backend/Backend.h"

#include <cstring>
#include <optional>
#include <unordered_map>

namespace kiln {

namespace {

struct FoldInfo {
  bool foldable = false;
  bool fromConstant = false; ///< Transitively reads at least one Constant.
};

bool isExpansion(const Node *n) {
  return n->getKind() == NodeKind::Broadcast || n->getKind() == NodeKind::Tile;
}

using FoldMap = std::unordered_map<const Node *, FoldInfo>;

/// Which nodes of \p order compute a compile-time value. Cheap checks first; the
/// Interpreter (\p interp) is created only when there is a candidate, and stays null when
/// there is none.
FoldMap findFoldable(const std::vector<Node *> &order, const PassOptions &opts,
                     std::unique_ptr<Backend> &interp) {
  FoldMap info;
  bool triedBackend = false;
  for (Node *n : order) {
    FoldInfo fi;
    if (n->getKind() == NodeKind::Save || !passutil::isLive(n) ||
        (isExpansion(n) && !opts.foldExpansions)) {
      info[n] = fi;
      continue;
    }
    bool ok = true;
    for (unsigned i = 0; i < n->getNumInputs() && ok; i++) {
      Node *in = n->getNthInput(i).node;
      if (isa<Constant>(in)) {
        fi.fromConstant = true;
        continue;
      }
      auto it = info.find(in);
      if (it == info.end() || !it->second.foldable) {
        ok = false;
        break;
      }
      fi.fromConstant |= it->second.fromConstant;
    }
    if (ok) {
      if (!triedBackend) {
        triedBackend = true;
        Expected<std::unique_ptr<Backend>> b = createBackend("Interpreter");
        if (b)
          interp = std::move(b).get();
      }
      ok = interp && interp->isOpSupported(*n);
    }
    fi.foldable = ok;
    info[n] = fi;
  }
  return info;
}

/// The nodes to fold: foldable nodes with a user outside the foldable set, within the
/// size limit.
std::vector<Node *> findRoots(const std::vector<Node *> &order, FoldMap &info,
                              const PassOptions &opts) {
  std::vector<Node *> roots;
  for (Node *n : order) {
    const FoldInfo &fi = info[n];
    if (!fi.foldable || n->getKind() == NodeKind::Splat)
      continue;
    if (!fi.fromConstant && !opts.foldSplats)
      continue;
    bool escapes = false;
    for (const NodeUse &u : n->getUsers()) {
      auto it = info.find(u.user);
      if (it == info.end() || !it->second.foldable || u.user->getKind() == NodeKind::Splat)
        escapes = true;
      // A user that will not itself be folded (splat-only or excluded) also needs us.
      else if (!it->second.fromConstant && !opts.foldSplats)
        escapes = true;
    }
    if (!escapes)
      continue;
    size_t elems = 0;
    for (unsigned r = 0; r < n->getNumResults(); r++)
      elems += n->getType(r)->numElements();
    if (opts.maxFoldElements && elems > opts.maxFoldElements)
      continue;
    roots.push_back(n);
  }
  return roots;
}

/// Copies the subgraphs of \p roots into \p sf of \p scratch (Constants as views of the
/// originals' payloads) and saves each used result of each root. Returns, per root and
/// result, its scratch placeholder (null for a result without users).
std::vector<std::vector<Placeholder *>> copyToScratch(const std::vector<Node *> &order,
                                                      const std::vector<Node *> &roots,
                                                      Module &scratch, Function *sf) {
  std::unordered_map<const Node *, Node *> map;
  std::vector<Node *> stack(roots.begin(), roots.end());
  std::unordered_set<const Node *> needed;
  while (!stack.empty()) {
    Node *n = stack.back();
    stack.pop_back();
    if (!needed.insert(n).second)
      continue;
    for (unsigned i = 0; i < n->getNumInputs(); i++) {
      Node *in = n->getNthInput(i).node;
      if (!isa<Constant>(in))
        stack.push_back(in);
    }
  }
  auto mapped = [&](NodeValue v) -> NodeValue {
    if (auto *c = dyn_cast<Constant>(v.node)) {
      auto it = map.find(c);
      if (it == map.end()) {
        Tensor &payload = c->getPayloadMutable();
        Constant *sc = scratch.createConstant(
            c->getName(), Tensor::view(payload.getType(), payload.getUnsafePtr()));
        it = map.emplace(c, sc).first;
      }
      return NodeValue(it->second, v.resNo);
    }
    return NodeValue(map.at(v.node), v.resNo);
  };
  for (Node *n : order) {
    if (!needed.count(n))
      continue;
    std::vector<NodeValue> ins;
    for (unsigned i = 0; i < n->getNumInputs(); i++)
      ins.push_back(mapped(n->getNthInput(i)));
    std::vector<TypeRef> types;
    for (unsigned r = 0; r < n->getNumResults(); r++)
      types.push_back(scratch.uniqueType(*n->getType(r)));
    map[n] = passutil::cloneWith(sf, n, ins, types);
  }
  std::vector<std::vector<Placeholder *>> outs(roots.size());
  for (size_t i = 0; i < roots.size(); i++)
    for (unsigned r = 0; r < roots[i]->getNumResults(); r++)
      if (roots[i]->getNumUsesOf(r))
        outs[i].push_back(sf->createSave("fold" + std::to_string(i) + "_" + std::to_string(r),
                                         NodeValue(map.at(roots[i]), r))
                              ->getPlaceholder());
      else
        outs[i].push_back(nullptr);
  return outs;
}

/// The value of \p s, a Slice of constant \p in, copied a row of the result at a time; no
/// value when the Slice does not describe a box of \p in or its result is not \p in's type
/// with other dims. The Interpreter copies a Slice element by element through its index
/// arithmetic, which was most of a 3-D network's folding (r2plus1d_18's filter planes).
std::optional<Tensor> sliceOfConstant(const SliceNode &s, const Tensor &in) {
  const Type &it = in.getType(), &ot = *s.getResultType();
  const auto &starts = s.getStarts(), &ends = s.getEnds();
  const size_t rank = it.rank();
  if (ot.kind != it.kind || ot.scale != it.scale || ot.offset != it.offset || rank == 0 ||
      ot.rank() != rank || starts.size() != rank || ends.size() != rank)
    return std::nullopt;
  for (size_t d = 0; d < rank; d++)
    if (starts[d] >= ends[d] || ends[d] > it.dims[d] || ot.dims[d] != ends[d] - starts[d])
      return std::nullopt;
  Tensor out = Tensor(ot);
  const Dims istr = it.strides();
  const size_t es = it.elemBytes();
  const dim_t run = ot.dims[rank - 1], rows = dim_t(ot.numElements()) / run;
  std::vector<dim_t> idx(rank, 0); // the result row's coordinates (the last stays 0)
  for (dim_t r = 0; r < rows; r++) {
    dim_t src = 0;
    for (size_t d = 0; d < rank; d++)
      src += (idx[d] + starts[d]) * istr[d];
    std::memcpy(out.getUnsafePtr() + r * run * es, in.getUnsafePtr() + src * es, run * es);
    for (size_t d = rank - 1; d-- > 0;) {
      if (++idx[d] < ot.dims[d])
        break;
      idx[d] = 0;
    }
  }
  return out;
}

/// Whether \p user is the only reader of \p c in the whole module (no node of another
/// function, no second use).
bool soleReader(const Constant *c, const Node *user) {
  const auto &users = c->getUsers();
  return users.size() == 1 && users[0].user == user;
}

/// Whether Slice \p s takes all of \p in (its result is \p in's type).
bool sliceTakesAll(const SliceNode &s, const Tensor &in) {
  const Type &it = in.getType(), &ot = *s.getResultType();
  return ot.kind == it.kind && ot.scale == it.scale && ot.offset == it.offset &&
         ot.dims == it.dims && in.isOwning() && in.getUnsafePtr();
}

/// Moves the payload out of \p c, which keeps its type and no memory (as a constant
/// released after packing, Tensor::view(type, nullptr)): a folded Slice or Reshape that
/// is its only reader takes over its bytes instead of a copy in fresh pages while the
/// original stayed in the module, unread (r2plus1d_18: 91 MB of filters held twice).
std::optional<Tensor> takePayload(Constant *c) {
  Tensor &t = c->getPayloadMutable();
  if (t.size() && !t.getUnsafePtr())
    return std::nullopt; // no values (released or parsed elided): nothing to fold
  if (!t.isOwning())
    return t.clone();
  Tensor moved = std::move(t);
  t = Tensor::view(moved.getType(), nullptr);
  return moved;
}

/// The value of \p n when it is a Slice of a Constant or a Reshape of such a Slice or of a
/// Constant (the importer cuts a 3-D convolution's filter planes so); nullopt otherwise. A
/// Slice of all of the Constant or a Reshape of it that is the Constant's only reader takes
/// its bytes over (takePayload), checked before anything is taken.
std::optional<Tensor> sliceOrReshapeValue(Node *n) {
  auto *r = dyn_cast<ReshapeNode>(n);
  auto *s = dyn_cast<SliceNode>(r ? r->getInput().node : n);
  Node *reader = s ? static_cast<Node *>(s) : r;
  auto *c = reader ? dyn_cast<Constant>(reader->getNthInput(0).node) : nullptr;
  if (!c)
    return std::nullopt;
  const Type &in = s ? *s->getResultType() : c->getPayload().getType();
  if (r && (r->getResultType()->kind != in.kind ||
            r->getResultType()->sizeInBytes() != in.sizeInBytes()))
    return std::nullopt;
  std::optional<Tensor> v;
  if ((!s || sliceTakesAll(*s, c->getPayload())) && soleReader(c, reader))
    v = takePayload(c);
  else
    v = s ? sliceOfConstant(*s, c->getPayload()) : std::optional<Tensor>(c->getPayload().clone());
  if (v && r)
    v->reshape(*r->getResultType());
  return v;
}

/// Folds directly the roots of \p roots that sliceOrReshapeValue computes (the Interpreter
/// copied the constant into its own arena, then again into the result), hands them to
/// \p sweeper and removes them from \p roots.
bool foldSlicesOfConstants(Function *f, std::vector<Node *> &roots, passutil::Sweeper &sweeper) {
  bool changed = false;
  std::vector<Node *> rest;
  for (Node *n : roots) {
    std::optional<Tensor> v = sliceOrReshapeValue(n);
    if (!v) {
      rest.push_back(n);
      continue;
    }
    Constant *folded = passutil::makeConstant(f, n->getName() + ".folded", std::move(*v));
    n->replaceAllUsesOfWith(0, NodeValue(folded));
    sweeper.add(n);
    changed = true;
  }
  roots = std::move(rest);
  return changed;
}

/// Replaces each used result of each root by a new Constant holding its computed value
/// (taken from \p bindings); the roots are left to \p sweeper.
void replaceRoots(Function *f, const std::vector<Node *> &roots,
                  const std::vector<std::vector<Placeholder *>> &outs,
                  PlaceholderBindings &bindings, passutil::Sweeper &sweeper) {
  for (size_t i = 0; i < roots.size(); i++) {
    Node *root = roots[i];
    for (unsigned r = 0; r < root->getNumResults(); r++) {
      Placeholder *ph = outs[i][r];
      if (!ph)
        continue;
      Tensor *t = bindings.get(ph);
      std::string name = root->getName();
      if (root->getNumResults() > 1)
        name += "." + root->getResultName(r);
      Constant *c = passutil::makeConstant(f, name + ".folded", std::move(*t));
      root->replaceAllUsesOfWith(r, NodeValue(c));
    }
    sweeper.add(root);
  }
}

/// Folds \p roots on the Interpreter \p interp: their subgraphs copied into a scratch
/// module, compiled and run once, each result made a Constant; the roots go to \p sweeper.
/// False when nothing was folded.
bool foldOnInterpreter(Function *f, const std::vector<Node *> &order,
                       const std::vector<Node *> &roots, Backend &interp,
                       passutil::Sweeper &sweeper) {
  Module scratch;
  Function *sf = scratch.createFunction("constant_fold");
  std::vector<std::vector<Placeholder *>> outs = copyToScratch(order, roots, scratch, sf);
  if (Error e = sf->verify())
    return false; // cannot happen for a verified input; fold nothing rather than fail
  Expected<std::unique_ptr<CompiledFunction>> cf = interp.compile(sf, CompileOptions());
  if (!cf) {
    (void)cf.takeError();
    return false;
  }
  PlaceholderBindings bindings;
  bindings.allocate(scratch.getPlaceholders());
  ExecutionContext ectx(&bindings);
  if (Error e = (*cf)->execute(ectx))
    return false;
  replaceRoots(f, roots, outs, bindings, sweeper);
  cf->reset(); // compiled code refers to the scratch module: drop it first
  return true;
}

} // namespace

bool foldConstants(Function *f, const PassContext &ctx) {
  std::vector<Node *> order = passutil::topoOrder(*f);
  std::unique_ptr<Backend> interp;
  FoldMap info = findFoldable(order, ctx.options, interp);
  if (!interp)
    return false;
  std::vector<Node *> roots = findRoots(order, info, ctx.options);
  passutil::Sweeper sweeper;
  bool changed = foldSlicesOfConstants(f, roots, sweeper);
  if (!roots.empty())
    changed = foldOnInterpreter(f, order, roots, *interp, sweeper) || changed;
  sweeper.sweep(f);
  return changed;
}

} // namespace kiln
