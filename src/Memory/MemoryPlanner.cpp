// The static memory planner (see kiln/Memory/MemoryPlanner.h).

#include "kiln/Memory/MemoryPlanner.h"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <unordered_map>

namespace kiln {

namespace {

uint64_t alignUp(uint64_t x, uint64_t a) { return a > 1 ? (x + a - 1) / a * a : x; }

bool overlapsInTime(const PlannedBuffer &a, const PlannedBuffer &b) {
  return a.start < b.end && b.start < a.end;
}

bool overlapsInSpace(const PlannedBuffer &a, const PlannedBuffer &b) {
  return a.size && b.size && a.offset < b.offset + b.size && b.offset < a.offset + a.size;
}

std::string describe(const PlannedBuffer &b) {
  std::ostringstream os;
  os << (isa<WeightVar>(b.value) ? "@" : "%") << b.value->getName() << " [" << b.offset << ", "
     << b.offset + b.size << ") live [" << b.start << ", " << b.end << ")";
  return os.str();
}

} // namespace

const char *memoryRegionName(MemoryRegion r) {
  switch (r) {
  case MemoryRegion::Constant:
    return "constant";
  case MemoryRegion::Mutable:
    return "mutable";
  case MemoryRegion::Activation:
    return "activation";
  }
  return "?";
}

std::string PlacementStrategy::name() const {
  const char *o = "";
  switch (order) {
  case PlacementOrder::BySize:
    o = "by-size";
    break;
  case PlacementOrder::ByStart:
    o = "by-start";
    break;
  case PlacementOrder::ByArea:
    o = "by-area";
    break;
  case PlacementOrder::ByLifetime:
    o = "by-lifetime";
    break;
  }
  return std::string(o) + (fit == PlacementFit::FirstFit ? "/first-fit" : "/best-fit");
}

std::vector<PlacementStrategy> getAllPlacementStrategies() {
  std::vector<PlacementStrategy> r;
  for (PlacementOrder o : {PlacementOrder::BySize, PlacementOrder::ByStart, PlacementOrder::ByArea,
                           PlacementOrder::ByLifetime})
    for (PlacementFit f : {PlacementFit::BestFit, PlacementFit::FirstFit})
      r.push_back({o, f});
  return r;
}

const PlannedBuffer *MemoryPlan::find(const Value *v) const {
  for (const PlannedBuffer &b : buffers)
    if (b.value == v)
      return &b;
  return nullptr;
}

bool MemoryPlan::locate(const Value *v, MemoryRegion &region, uint64_t &offset) const {
  uint64_t extra = 0;
  for (; auto *tv = dyn_cast<TensorViewInst>(v); v = tv->getSrc())
    extra += viewElementOffset(tv) * tv->getSrc()->getType()->elemBytes();
  const PlannedBuffer *b = find(v);
  if (!b)
    return false;
  region = b->region;
  offset = b->offset + extra;
  return true;
}

std::string MemoryPlan::summary() const {
  std::ostringstream os;
  char line[200];
  auto mib = [](uint64_t b) { return double(b) / (1024.0 * 1024.0); };
  std::snprintf(line, sizeof(line),
                "constant %.3f MiB, mutable %.3f MiB, activations %.3f MiB (max-live %.3f MiB, "
                "efficiency %.1f%%, %s)",
                mib(constantBytes), mib(mutableBytes), mib(activationBytes), mib(maxLiveBytes),
                100.0 * efficiency(), strategy.c_str());
  os << line;
  return os.str();
}

std::vector<PlannedBuffer> computeActivationLifetimes(const IRFunction &F) {
  std::vector<PlannedBuffer> r;
  std::unordered_map<const Value *, size_t> idx;
  size_t pos = 0;
  for (const auto &ip : F.getInstrs()) {
    const Instruction *I = ip.get();
    if (auto *A = dyn_cast<AllocActivationInst>(I)) {
      PlannedBuffer b;
      b.value = A;
      b.region = MemoryRegion::Activation;
      b.size = A->getType()->sizeInBytes();
      b.start = pos;
      b.end = size_t(-1);
      idx[A] = r.size();
      r.push_back(b);
    } else if (auto *D = dyn_cast<DeallocActivationInst>(I)) {
      auto it = idx.find(D->getSrc());
      if (it != idx.end() && r[it->second].end == size_t(-1))
        r[it->second].end = pos;
    }
    pos++;
  }
  for (PlannedBuffer &b : r)
    if (b.end == size_t(-1))
      b.end = pos;
  return r;
}

std::vector<PlannedBuffer> computePlaceholderLifetimes(const IRFunction &F) {
  std::vector<PlannedBuffer> r;
  std::unordered_map<const Value *, size_t> idx;
  for (const auto &w : F.getWeights())
    if (!w->isConstant()) {
      PlannedBuffer b;
      b.value = w.get();
      b.region = MemoryRegion::Activation;
      b.size = w->getType()->sizeInBytes();
      b.start = b.end = size_t(-1); // untouched so far
      idx[w.get()] = r.size();
      r.push_back(b);
    }
  const size_t n = F.getInstrs().size();
  std::vector<bool> written(r.size(), false);
  size_t pos = 0;
  for (const auto &ip : F.getInstrs()) {
    const Instruction *I = ip.get();
    if (!isa<TensorViewInst>(I))
      for (unsigned i = 0; i < I->getNumOperands(); i++) {
        const Value *v = I->getOperand(i).first;
        while (auto *tv = dyn_cast<TensorViewInst>(v))
          v = tv->getSrc();
        auto it = idx.find(v);
        if (it == idx.end())
          continue;
        PlannedBuffer &b = r[it->second];
        bool writes = I->getOperand(i).second != OperandKind::In;
        if (b.start == size_t(-1))
          b.start = writes && I->getOperand(i).second == OperandKind::Out ? pos : 0;
        b.end = pos + 1;
        written[it->second] = written[it->second] || writes;
      }
    pos++;
  }
  for (size_t i = 0; i < r.size(); i++) {
    if (r[i].start == size_t(-1))
      r[i].start = 0, r[i].end = 1;
    if (written[i])
      r[i].end = std::max<size_t>(n, r[i].start + 1);
  }
  return r;
}

uint64_t computeMaxLiveBytes(const std::vector<PlannedBuffer> &lifetimes, uint64_t alignment) {
  std::vector<std::pair<size_t, int64_t>> ev;
  for (const PlannedBuffer &b : lifetimes) {
    int64_t s = int64_t(alignUp(b.size, alignment));
    ev.push_back({b.start, s});
    ev.push_back({b.end, -s});
  }
  // At equal positions, ends (negative) first: a buffer that ends at p is not live at p.
  std::sort(ev.begin(), ev.end());
  int64_t live = 0, peak = 0;
  for (auto &e : ev) {
    live += e.second;
    peak = std::max(peak, live);
  }
  return uint64_t(peak);
}

uint64_t placeActivations(std::vector<PlannedBuffer> &buffers, const PlacementStrategy &s,
                          uint64_t alignment) {
  std::vector<size_t> order(buffers.size());
  for (size_t i = 0; i < order.size(); i++)
    order[i] = i;
  auto len = [&](size_t i) { return uint64_t(buffers[i].end - buffers[i].start); };
  auto sz = [&](size_t i) { return alignUp(buffers[i].size, alignment); };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    switch (s.order) {
    case PlacementOrder::BySize:
      if (sz(a) != sz(b))
        return sz(a) > sz(b);
      return buffers[a].start < buffers[b].start;
    case PlacementOrder::ByStart:
      return buffers[a].start < buffers[b].start;
    case PlacementOrder::ByArea:
      if (sz(a) * len(a) != sz(b) * len(b))
        return sz(a) * len(a) > sz(b) * len(b);
      return buffers[a].start < buffers[b].start;
    case PlacementOrder::ByLifetime:
      if (len(a) != len(b))
        return len(a) > len(b);
      return sz(a) > sz(b);
    }
    return false;
  });

  std::vector<size_t> placed;
  uint64_t arena = 0;
  std::vector<std::pair<uint64_t, uint64_t>> busy; // (offset, end) of conflicting buffers
  for (size_t i : order) {
    PlannedBuffer &b = buffers[i];
    uint64_t need = sz(i);
    busy.clear();
    for (size_t j : placed)
      if (overlapsInTime(b, buffers[j]))
        busy.push_back({buffers[j].offset, buffers[j].offset + sz(j)});
    std::sort(busy.begin(), busy.end());
    uint64_t cursor = 0, bestOff = 0, bestGap = UINT64_MAX;
    bool found = false;
    for (auto &[off, end] : busy) {
      if (off > cursor && off - cursor >= need) {
        uint64_t gap = off - cursor;
        if (s.fit == PlacementFit::FirstFit) {
          bestOff = cursor;
          found = true;
          break;
        }
        if (gap < bestGap) {
          bestGap = gap;
          bestOff = cursor;
          found = true;
        }
      }
      cursor = std::max(cursor, end);
    }
    b.offset = found ? bestOff : cursor;
    if (need)
      arena = std::max(arena, b.offset + need);
    placed.push_back(i);
  }
  return arena;
}

Expected<MemoryPlan> planMemory(const IRFunction &F, const PlannerOptions &opts) {
  MemoryPlan plan;
  plan.alignment = std::max<uint64_t>(1, opts.alignment);
  uint64_t A = plan.alignment;
  plan.numInstrs = F.getInstrs().size();
  plan.placeholdersInArena = opts.placeholdersInArena;
  for (const auto &w : F.getWeights()) {
    if (opts.placeholdersInArena && !w->isConstant())
      continue; // with the activations below
    PlannedBuffer b;
    b.value = w.get();
    b.region = w->isConstant() ? MemoryRegion::Constant : MemoryRegion::Mutable;
    b.size = w->getType()->sizeInBytes();
    uint64_t &top = w->isConstant() ? plan.constantBytes : plan.mutableBytes;
    b.offset = top;
    top = alignUp(top + b.size, A);
    b.start = 0;
    b.end = plan.numInstrs;
    plan.buffers.push_back(b);
  }

  std::vector<PlannedBuffer> acts = computeActivationLifetimes(F);
  if (opts.placeholdersInArena) {
    std::vector<PlannedBuffer> phs = computePlaceholderLifetimes(F);
    acts.insert(acts.end(), phs.begin(), phs.end());
  }
  plan.maxLiveBytes = computeMaxLiveBytes(acts, A);
  plan.maxLiveBytesUnaligned = computeMaxLiveBytes(acts, 1);
  std::vector<PlacementStrategy> strategies =
      opts.strategies.empty() ? getAllPlacementStrategies() : opts.strategies;
  std::vector<PlannedBuffer> best;
  uint64_t bestArena = UINT64_MAX;
  for (const PlacementStrategy &s : strategies) {
    std::vector<PlannedBuffer> trial = acts;
    uint64_t arena = placeActivations(trial, s, A);
    plan.strategyArenas.push_back({s.name(), arena});
    if (arena < bestArena) {
      bestArena = arena;
      best = std::move(trial);
      plan.strategy = s.name();
    }
  }
  plan.activationBytes = acts.empty() ? 0 : bestArena;
  for (PlannedBuffer &b : best)
    plan.buffers.push_back(b);
  return plan;
}

Error verifyMemoryPlan(const IRFunction &F, const MemoryPlan &plan) {
  auto fail = [&](const std::string &what) {
    return makeError(ErrorCode::Internal, "memory plan of '", F.getName(), "': ", what);
  };
  std::unordered_map<const Value *, const PlannedBuffer *> byValue;
  for (const PlannedBuffer &b : plan.buffers)
    if (!byValue.emplace(b.value, &b).second)
      return fail("buffer " + describe(b) + " is planned twice");
  std::vector<const PlannedBuffer *> weights[2], acts;
  for (const auto &w : F.getWeights()) {
    auto it = byValue.find(w.get());
    if (it == byValue.end())
      return fail("weight @" + w->getName() + " has no place");
    if (plan.placeholdersInArena && !w->isConstant())
      continue; // checked with the activations
    MemoryRegion want = w->isConstant() ? MemoryRegion::Constant : MemoryRegion::Mutable;
    if (it->second->region != want)
      return fail("weight @" + w->getName() + " is in the " + memoryRegionName(it->second->region) +
                  " region");
    weights[w->isConstant() ? 0 : 1].push_back(it->second);
  }
  std::vector<PlannedBuffer> lifetimes = computeActivationLifetimes(F);
  if (plan.placeholdersInArena) {
    std::vector<PlannedBuffer> phs = computePlaceholderLifetimes(F);
    lifetimes.insert(lifetimes.end(), phs.begin(), phs.end());
  }
  for (const PlannedBuffer &l : lifetimes) {
    auto it = byValue.find(l.value);
    if (it == byValue.end())
      return fail("activation %" + l.value->getName() + " has no place");
    const PlannedBuffer &b = *it->second;
    if (b.region != MemoryRegion::Activation || b.start != l.start || b.end != l.end ||
        b.size != l.size)
      return fail("activation " + describe(b) + " does not match the function (live [" +
                  std::to_string(l.start) + ", " + std::to_string(l.end) + "), " +
                  std::to_string(l.size) + " bytes)");
    acts.push_back(&b);
  }
  size_t placedWeights = plan.placeholdersInArena ? weights[0].size() : F.getWeights().size();
  if (byValue.size() != placedWeights + lifetimes.size())
    return fail("the plan has buffers the function does not");
  const uint64_t regionSize[3] = {plan.constantBytes, plan.mutableBytes, plan.activationBytes};
  for (const PlannedBuffer &b : plan.buffers) {
    if (b.offset % plan.alignment)
      return fail("buffer " + describe(b) + " is not aligned to " + std::to_string(plan.alignment));
    if (b.offset + b.size > regionSize[int(b.region)])
      return fail("buffer " + describe(b) + " ends beyond its " + memoryRegionName(b.region) +
                  " region of " + std::to_string(regionSize[int(b.region)]) + " bytes");
  }
  for (auto &ws : weights)
    for (size_t i = 0; i < ws.size(); i++)
      for (size_t j = i + 1; j < ws.size(); j++)
        if (overlapsInSpace(*ws[i], *ws[j]))
          return fail("weights " + describe(*ws[i]) + " and " + describe(*ws[j]) + " overlap");
  // Sweep over start positions: compare each buffer with those live when it starts.
  std::vector<const PlannedBuffer *> byStart = acts;
  std::sort(byStart.begin(), byStart.end(),
            [](const PlannedBuffer *a, const PlannedBuffer *b) { return a->start < b->start; });
  std::vector<const PlannedBuffer *> active;
  for (const PlannedBuffer *b : byStart) {
    active.erase(std::remove_if(active.begin(), active.end(),
                                [&](const PlannedBuffer *a) { return a->end <= b->start; }),
                 active.end());
    for (const PlannedBuffer *a : active)
      if (overlapsInSpace(*a, *b))
        return fail("activations " + describe(*a) + " and " + describe(*b) +
                    " are live at the same time and share bytes");
    active.push_back(b);
  }
  return Error::success();
}

} // namespace kiln
