#include "kiln/Base/Tensor.h"

#include "kiln/Base/Pages.h"

#include <cmath>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <new>
#include <sstream>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

#include <glog/logging.h>

namespace kiln {

namespace {

constexpr size_t kAlign = 64;

/// Tensors of at least this many bytes get memory of their own from the kernel, 2 MiB
/// aligned, in 2 MiB pages where it has them and the page policy asks for them
/// (kiln/Base/Pages.h; the size below which a network's arenas stay on small pages too,
/// codegen/Arena.cpp).
constexpr size_t kHugePage = size_t(2) << 20;
constexpr size_t kLargeTensor = 2 * kHugePage;

/// Tensors of at least this many bytes (and below kLargeTensor) are cut from shared chunks
/// (slabAlloc), in 2 MiB pages as above; smaller ones come from calloc.
constexpr size_t kSlabTensor = size_t(64) << 10;
/// The size of a shared chunk.
constexpr size_t kSlabChunk = size_t(32) << 20;
/// The word below a slab block's data (where a mapping's length or calloc's 0 is).
constexpr uintptr_t kSlabTag = 1;

/// Under AddressSanitizer every tensor comes from calloc, whose blocks it surrounds with
/// poisoned red zones; the mappings and chunks above have none, so a kernel writing past a
/// tensor's end would go unseen there.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

/// A large tensor's memory: a private anonymous mapping whose first page (in huge pages, a
/// 2 MiB one) starts kAlign bytes before the data, the mapping's start and length kept in
/// the two words below the data. Fresh mappings read as zeros. The page policy
/// (kiln/Base/Pages.h) picks the pages: huge ones (MADV_HUGEPAGE) take one fault per 2 MiB
/// on their first touch instead of one per 4 KiB; 4 KiB ones (MADV_NOHUGEPAGE) where those
/// are faster to fault in. Null when the system has no such mappings or refuses one.
char *largeAlloc(size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  const bool huge = longLivedMemoryInHugePages();
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  const size_t len = (bytes + kAlign + page - 1) / page * page;
  const size_t mapped = huge ? len + kHugePage : len;
  void *m = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED)
    return nullptr;
  uintptr_t start = reinterpret_cast<uintptr_t>(m);
  uintptr_t base = huge ? (start + kHugePage - 1) / kHugePage * kHugePage : start;
  if (base > start) // the unaligned head and tail go back
    munmap(m, base - start);
  if (start + mapped > base + len)
    munmap(reinterpret_cast<void *>(base + len), start + mapped - (base + len));
  // Advice only, either way (kiln/Base/Pages.h).
  madvise(reinterpret_cast<void *>(base), len, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
  char *data = reinterpret_cast<char *>(base) + kAlign;
  reinterpret_cast<uintptr_t *>(data)[-1] = base;
  reinterpret_cast<uintptr_t *>(data)[-2] = len;
  return data;
#else
  (void)bytes;
  return nullptr;
#endif
}

/// A chunk that mid-size tensors are cut from, in order (never reused: each block is
/// fresh, zero memory). The chunk counts the live blocks on each of its 2 MiB pages; a page
/// whose blocks are all freed, once no later block can land on it, goes back to the system
/// whole (MADV_DONTNEED on the 2 MiB page: the kernel can hand it out again as a huge page,
/// to the constant arena that the freed weights were packed into; giving back each block's
/// 4 KiB pages split the huge pages, and the arena's faults then took fresh ones). The chunk
/// is unmapped when its last block is freed and another chunk is being filled.
struct SlabChunk {
  char *base = nullptr;
  size_t len = 0, used = 0, live = 0;
  uint32_t pageLive[kSlabChunk / kHugePage] = {};
};

std::mutex &slabMutex() {
  static std::mutex m;
  return m;
}
SlabChunk *&slabCurrent() {
  static SlabChunk *c = nullptr;
  return c;
}

/// Gives back the 2 MiB pages of \p c below \p limit that hold no live block.
void releaseEmptyPages(SlabChunk *c, size_t first, size_t last, size_t limit) {
  for (size_t p = first; p <= last; p++)
    if (c->pageLive[p] == 0 && (p + 1) * kHugePage <= limit)
      madvise(c->base + p * kHugePage, kHugePage, MADV_DONTNEED);
}

/// Memory for a tensor of kSlabTensor to kLargeTensor bytes: cut from a chunk mapped by
/// largeAlloc (in 2 MiB pages under the page policy's huge pages). Where a fault on a
/// fresh 4 KiB page is slow (a virtual machine's page tables; figures in
/// backends/CPU/README.md, "Memory"), a network's many weights of 64 KiB to 4 MiB, each in
/// pages of its own (calloc or a mapping), took most of a small network's import; in
/// shared 2 MiB pages they take one fault per 2 MiB. Below
/// the data: the chunk, kSlabTag, and the block's length. Null when no chunk can be mapped.
char *slabAlloc(size_t bytes) {
  const size_t need = (bytes + 2 * kAlign - 1) / kAlign * kAlign;
  std::lock_guard<std::mutex> l(slabMutex());
  SlabChunk *&cur = slabCurrent();
  if (!cur || cur->used + need > cur->len) {
    char *base = largeAlloc(kSlabChunk - kAlign);
    if (!base)
      return nullptr;
    if (cur && cur->live == 0) {
      munmap(cur->base, cur->len);
      delete cur;
    } else if (cur) { // sealed: its empty touched pages can go now
      releaseEmptyPages(cur, 0, cur->len / kHugePage - 1, cur->len);
      cur->used = cur->len;
    }
    cur = new SlabChunk;
    cur->base = base - kAlign; // largeAlloc's words below base are overwritten by the blocks
    cur->len = kSlabChunk;
  }
  const size_t off = cur->used;
  char *data = cur->base + off + kAlign;
  cur->used += need;
  cur->live++;
  for (size_t p = off / kHugePage; p <= (off + need - 1) / kHugePage; p++)
    cur->pageLive[p]++;
  reinterpret_cast<uintptr_t *>(data)[-1] = reinterpret_cast<uintptr_t>(cur);
  reinterpret_cast<uintptr_t *>(data)[-2] = kSlabTag;
  reinterpret_cast<uintptr_t *>(data)[-3] = need;
  return data;
}

void slabFree(char *data) {
  auto *chunk = reinterpret_cast<SlabChunk *>(reinterpret_cast<uintptr_t *>(data)[-1]);
  const size_t need = reinterpret_cast<uintptr_t *>(data)[-3];
  const size_t off = size_t(data - kAlign - chunk->base);
  std::lock_guard<std::mutex> l(slabMutex());
  if (--chunk->live == 0 && chunk != slabCurrent()) {
    munmap(chunk->base, chunk->len);
    delete chunk;
    return;
  }
  const size_t first = off / kHugePage, last = (off + need - 1) / kHugePage;
  for (size_t p = first; p <= last; p++)
    chunk->pageLive[p]--;
  // A page the bump pointer has passed gets no later block.
  releaseEmptyPages(chunk, first, last, chunk->used);
}

/// Zero-filled, kAlign-aligned memory for an owning tensor, freed by alignedFree; null when
/// the host has no memory left. A large one comes from largeAlloc, a mid-size one from
/// slabAlloc; the others from calloc, kAlign bytes larger, with calloc's own pointer kept
/// in the word below the aligned one and 0 in the word below that: calloc hands out a large
/// block as fresh pages from the kernel, which are zero already, so a tensor that its
/// caller then fills is written, and its pages faulted in, once; aligned_alloc + memset
/// wrote it twice.
char *zeroedAlloc(size_t bytes) {
  if (bytes >= kLargeTensor && !kSanitized)
    if (char *p = largeAlloc(bytes))
      return p;
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (bytes >= kSlabTensor && bytes < kLargeTensor && !kSanitized)
    if (char *p = slabAlloc(bytes))
      return p;
#endif
  size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  void *p = std::calloc(1, (rounded ? rounded : kAlign) + kAlign);
  if (!p)
    return nullptr;
  uintptr_t aligned = (reinterpret_cast<uintptr_t>(p) + kAlign) / kAlign * kAlign;
  static_assert(kAlign >= 2 * sizeof(uintptr_t), "two words below the data");
  reinterpret_cast<void **>(aligned)[-1] = p;
  reinterpret_cast<uintptr_t *>(aligned)[-2] = 0;
  return reinterpret_cast<char *>(aligned);
}

void alignedFree(char *data) {
  if (!data)
    return;
  uintptr_t mappedLen = reinterpret_cast<uintptr_t *>(data)[-2];
#if defined(__linux__)
  if (mappedLen == kSlabTag) {
    slabFree(data);
    return;
  }
  if (mappedLen) {
    munmap(reinterpret_cast<void *>(reinterpret_cast<uintptr_t *>(data)[-1]), mappedLen);
    return;
  }
#endif
  std::free(reinterpret_cast<void **>(data)[-1]);
}

/// Rounds to nearest (even on ties) and clamps to T's range; NaN becomes 0.
template <typename T> T saturate(double v) {
  if (std::isnan(v))
    return T(0);
  double r = std::nearbyint(v);
  // One past the largest value, exactly (double(max) of int64 would round up to 2^63).
  const double lim = std::ldexp(1.0, int(sizeof(T) * 8) - (std::is_signed_v<T> ? 1 : 0));
  if (r < double(std::numeric_limits<T>::min()))
    return std::numeric_limits<T>::min();
  if (r >= lim)
    return std::numeric_limits<T>::max();
  return T(r);
}

} // namespace

Tensor::Tensor(const Type &ty) {
  Expected<Tensor> t = tryCreate(ty);
  if (!t)
    throw std::bad_alloc();
  *this = std::move(*t);
}

Expected<Tensor> Tensor::tryCreate(const Type &ty) {
  Tensor t;
  t.data_ = zeroedAlloc(ty.sizeInBytes());
  if (!t.data_)
    return makeError(ErrorCode::OutOfMemory, "out of host memory: cannot allocate ",
                     ty.sizeInBytes(), " bytes for a tensor of ", ty.toString());
  t.type_ = ty;
  t.owning_ = true;
  if (isQuantized(ty.kind) && ty.offset != 0)
    t.zero(); // every element to the offset
  return t;
}

Tensor::Tensor(ElemKind k, Dims dims, std::initializer_list<double> values) : Tensor(Type(k, dims)) {
  CHECK_EQ(values.size(), size()) << "value count does not match " << type_.toString();
  size_t i = 0;
  for (double v : values)
    setFromDouble(i++, v);
}

Tensor Tensor::view(const Type &ty, void *data) {
  Tensor t;
  t.type_ = ty;
  t.data_ = static_cast<char *>(data);
  t.owning_ = false;
  return t;
}

Tensor::Tensor(Tensor &&o) noexcept : type_(o.type_), data_(o.data_), owning_(o.owning_) {
  o.data_ = nullptr;
  o.owning_ = false;
}

Tensor &Tensor::operator=(Tensor &&o) noexcept {
  if (this != &o) {
    if (owning_)
      alignedFree(data_);
    type_ = o.type_;
    data_ = o.data_;
    owning_ = o.owning_;
    o.data_ = nullptr;
    o.owning_ = false;
  }
  return *this;
}

Tensor::~Tensor() {
  if (owning_)
    alignedFree(data_);
}

Tensor Tensor::clone() const {
  Tensor t(type_);
  if (getSizeInBytes())
    std::memcpy(t.data_, data_, getSizeInBytes());
  return t;
}

void Tensor::reshape(const Type &ty) {
  CHECK_EQ(ty.sizeInBytes(), type_.sizeInBytes()) << "reshape must keep the byte size";
  type_ = ty;
}

void Tensor::zero() {
  if (!data_)
    return;
  if (isQuantized(type_.kind) && type_.offset != 0) {
    for (size_t i = 0, e = size(); i < e; i++)
      setFromDouble(i, type_.offset);
    return;
  }
  std::memset(data_, 0, getSizeInBytes());
}

double Tensor::getAsDouble(size_t i) const {
  switch (type_.kind) {
  case ElemKind::Float:
    return reinterpret_cast<const float *>(data_)[i];
  case ElemKind::Float16:
    return float(reinterpret_cast<const float16 *>(data_)[i]);
  case ElemKind::BFloat16:
    return float(reinterpret_cast<const bfloat16 *>(data_)[i]);
  case ElemKind::Int8Q:
    return reinterpret_cast<const int8_t *>(data_)[i];
  case ElemKind::UInt8Q:
    return reinterpret_cast<const uint8_t *>(data_)[i];
  case ElemKind::Int32Q:
  case ElemKind::Int32I:
    return reinterpret_cast<const int32_t *>(data_)[i];
  case ElemKind::Int64I:
    return double(reinterpret_cast<const int64_t *>(data_)[i]);
  case ElemKind::Bool:
    return reinterpret_cast<const bool *>(data_)[i] ? 1.0 : 0.0;
  }
  return 0;
}

void Tensor::setFromDouble(size_t i, double v) {
  switch (type_.kind) {
  case ElemKind::Float:
    reinterpret_cast<float *>(data_)[i] = float(v);
    return;
  case ElemKind::Float16:
    reinterpret_cast<float16 *>(data_)[i] = float16(float(v));
    return;
  case ElemKind::BFloat16:
    reinterpret_cast<bfloat16 *>(data_)[i] = bfloat16(float(v));
    return;
  case ElemKind::Int8Q:
    reinterpret_cast<int8_t *>(data_)[i] = saturate<int8_t>(v);
    return;
  case ElemKind::UInt8Q:
    reinterpret_cast<uint8_t *>(data_)[i] = saturate<uint8_t>(v);
    return;
  case ElemKind::Int32Q:
  case ElemKind::Int32I:
    reinterpret_cast<int32_t *>(data_)[i] = saturate<int32_t>(v);
    return;
  case ElemKind::Int64I:
    reinterpret_cast<int64_t *>(data_)[i] = saturate<int64_t>(v);
    return;
  case ElemKind::Bool:
    reinterpret_cast<bool *>(data_)[i] = v != 0.0;
    return;
  }
}

void Tensor::randomize(float lo, float hi, PseudoRNG &rng) {
  for (size_t i = 0, e = size(); i < e; i++) {
    if (type_.kind == ElemKind::Bool)
      setFromDouble(i, double(rng.uniformInt(0, 1)));
    else if (isFloatKind(type_.kind))
      setFromDouble(i, rng.uniform(lo, hi));
    else
      setFromDouble(i, double(rng.uniformInt(int64_t(std::ceil(lo)), int64_t(std::floor(hi)))));
  }
}

bool Tensor::isEqual(const Tensor &other, float atol, float rtol, bool verbose) const {
  if (type_ != other.type_) {
    if (verbose)
      LOG(INFO) << "types differ: " << type_ << " vs " << other.type_;
    return false;
  }
  for (size_t i = 0, e = size(); i < e; i++) {
    double a = getAsDouble(i), b = other.getAsDouble(i);
    if (std::isnan(a) && std::isnan(b))
      continue;
    if (a == b)
      continue; // also equal infinities
    if (!(std::fabs(a - b) <= atol + rtol * std::fabs(b))) {
      if (verbose)
        LOG(INFO) << "element " << i << " differs: " << a << " vs " << b;
      return false;
    }
  }
  return true;
}

double Tensor::maxAbsDiff(const Tensor &other) const {
  CHECK(type_.dims == other.type_.dims) << "maxAbsDiff needs equal shapes";
  double m = 0;
  for (size_t i = 0, e = size(); i < e; i++) {
    double d = std::fabs(getAsDouble(i) - other.getAsDouble(i));
    if (std::isnan(d))
      return std::numeric_limits<double>::infinity();
    m = std::max(m, d);
  }
  return m;
}

std::string Tensor::toString(size_t maxElems) const {
  std::ostringstream os;
  os << type_.toString() << " [";
  size_t n = size();
  for (size_t i = 0; i < n && i < maxElems; i++)
    os << (i ? ", " : "") << getAsDouble(i);
  if (n > maxElems)
    os << ", ... (" << n << " elements)";
  os << "]";
  return os.str();
}

} // namespace kiln
