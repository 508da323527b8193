/// \file
/// Assertions for Kiln's own invariants in public headers, so that they need no logging
/// library. A failed KILN_CHECK prints "file:line: check failed: COND: message" to stderr
/// and aborts; it is for bugs in Kiln or in calling code that broke a documented
/// precondition (a wrong element type in getHandle<T>, a bad cast<T>). Anything a caller
/// can get wrong through data (models, shapes, options) is reported as a kiln::Error
/// instead (kiln/Base/Error.h).
///
/// \code
///   KILN_CHECK(n == size()) << "set: " << n << " values for " << size() << " elements";
///   KILN_DCHECK(i < dims.size());  // checked only in builds without NDEBUG
/// \endcode
#ifndef KILN_BASE_CHECK_H
#define KILN_BASE_CHECK_H

#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace kiln {
namespace detail {

/// Collects the message of a failed check; its destructor reports it and aborts.
class CheckFailure {
public:
  CheckFailure(const char *file, int line, const char *condition)
      : file_(file), line_(line), condition_(condition) {}
  CheckFailure(const CheckFailure &) = delete;
  CheckFailure &operator=(const CheckFailure &) = delete;
  [[noreturn]] ~CheckFailure() {
    std::string msg = message_.str();
    std::fprintf(stderr, "%s:%d: check failed: %s%s%s\n", file_, line_, condition_,
                 msg.empty() ? "" : ": ", msg.c_str());
    std::fflush(stderr);
    std::abort();
  }
  std::ostream &stream() { return message_; }

private:
  const char *file_;
  int line_;
  const char *condition_;
  std::ostringstream message_;
};

/// Gives the streamed expression of a failed check the type void, so that both arms of
/// the conditional in KILN_CHECK agree.
struct CheckVoidify {
  void operator&(std::ostream &) {}
};

} // namespace detail
} // namespace kiln

/// Aborts with file, line, the condition's text and the streamed message when \p cond is
/// false. The message is only evaluated on failure.
#define KILN_CHECK(cond)                                                                   \
  (cond) ? (void)0                                                                         \
         : ::kiln::detail::CheckVoidify() &                                                \
               ::kiln::detail::CheckFailure(__FILE__, __LINE__, #cond).stream()

/// KILN_CHECK in builds without NDEBUG; otherwise \p cond is type-checked but never
/// evaluated.
#ifdef NDEBUG
#define KILN_DCHECK(cond)                                                                  \
  while (false)                                                                            \
  KILN_CHECK(cond)
#else
#define KILN_DCHECK(cond) KILN_CHECK(cond)
#endif

#endif // KILN_BASE_CHECK_H
