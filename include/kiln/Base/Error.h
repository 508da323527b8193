/// \file
/// Error handling for everything a caller can get wrong: a malformed model, an unsupported
/// operator, a shape mismatch, a device out of memory, a full queue. Library code returns
/// `Error` or `Expected<T>`; it never aborts on user input. KILN_CHECK (kiln/Base/Check.h)
/// in headers, and glog CHECK in .cpp files, are reserved for internal invariants (bugs in
/// Kiln itself).
#ifndef KILN_BASE_ERROR_H
#define KILN_BASE_ERROR_H

#include <memory>
#include <new>
#include <optional>
#include <sstream>
#include <string>
#include <utility>

namespace kiln {

/// Broad classes of failure, so callers can react without parsing messages.
enum class ErrorCode {
  InvalidArgument, ///< Bad shapes, attributes, or API arguments.
  InvalidGraph,    ///< The verifier rejected a graph.
  Unsupported,     ///< An operator or element kind the backend cannot run.
  ModelParse,      ///< A malformed or inconsistent model file.
  OutOfMemory,     ///< A device or memory region is too small.
  QueueFull,       ///< A bounded request queue is full.
  NotFound,        ///< A named entity (backend, network, placeholder) does not exist.
  Runtime,         ///< A failure while executing (device fault, cancelled request).
  Internal,        ///< Kiln itself is wrong; please report.
};

/// Returns a short lower-case name of \p code ("invalid-argument", ...).
const char *errorCodeName(ErrorCode code);

/// The result of an operation that can fail: success, or a code and a message.
/// An Error converts to true when it holds a failure: `if (Error e = f()) return e;`.
class [[nodiscard]] Error {
public:
  /// A success value.
  static Error success() { return Error(); }
  /// A failure with \p code and \p message.
  Error(ErrorCode code, std::string message)
      : info_(std::make_unique<Info>(Info{code, std::move(message)})) {}
  Error(Error &&) noexcept = default;
  Error &operator=(Error &&) noexcept = default;

  /// True when this holds a failure.
  explicit operator bool() const { return info_ != nullptr; }
  /// The failure's code; only valid when this holds a failure.
  ErrorCode code() const { return info_ ? info_->code : ErrorCode::Internal; }
  /// The failure's message, or "success".
  const std::string &message() const;
  /// "<code>: <message>", for printing.
  std::string toString() const;
  /// Prepends \p context to the message ("while compiling 'main': ..."), keeps the code.
  Error addContext(const std::string &context) &&;

private:
  Error() = default;
  struct Info {
    ErrorCode code;
    std::string message;
  };
  std::unique_ptr<Info> info_;
};

/// Builds an Error from streamed parts: `return makeError(ErrorCode::X, "node '", n, "'");`
template <typename... Args> Error makeError(ErrorCode code, const Args &...args) {
  std::ostringstream os;
  (os << ... << args);
  return Error(code, os.str());
}

/// A value of type T, or an Error explaining why there is none.
template <typename T> class [[nodiscard]] Expected {
public:
  Expected(T value) : value_(std::move(value)), error_(Error::success()) {}
  Expected(Error error) : error_(std::move(error)) {}
  template <typename U, typename = std::enable_if_t<std::is_convertible_v<U, T> &&
                                                     !std::is_same_v<U, T>>>
  Expected(U &&value) : value_(T(std::forward<U>(value))), error_(Error::success()) {}

  /// True when a value is present.
  explicit operator bool() const { return value_.has_value(); }
  bool hasValue() const { return value_.has_value(); }
  /// Moves the error out (success when a value is present).
  Error takeError() { return std::move(error_); }
  const Error &getError() const { return error_; }

  T &get() & { return *value_; }
  const T &get() const & { return *value_; }
  T &&get() && { return std::move(*value_); }
  T &operator*() & { return *value_; }
  const T &operator*() const & { return *value_; }
  T *operator->() { return &*value_; }
  const T *operator->() const { return &*value_; }

private:
  std::optional<T> value_;
  Error error_;
};

/// Aborts with the message if \p e is a failure. For tools, tests and examples, where an
/// error really is fatal; never used inside the library on user input.
void exitOnError(Error e, const char *what = nullptr);
template <typename T> T exitOnError(Expected<T> e, const char *what = nullptr) {
  if (!e)
    exitOnError(e.takeError(), what);
  return std::move(e).get();
}

/// Runs \p body (returning Error or Expected<T>), turning the host running out of memory
/// inside it (std::bad_alloc: a Tensor, a container or protobuf that cannot allocate) into
/// an OutOfMemory error "out of host memory <what>" (\p what may be empty). The library's
/// entry points that take sizes from user input (model loading, compilation) run under it,
/// so an embedder gets an error where the process would otherwise end.
template <typename F> auto guardHostMemory(const std::string &what, F &&body) -> decltype(body()) {
  try {
    return body();
  } catch (const std::bad_alloc &) {
    return makeError(ErrorCode::OutOfMemory, "out of host memory", what.empty() ? "" : " ", what);
  }
}

} // namespace kiln

#define KILN_CONCAT_IMPL(a, b) a##b
#define KILN_CONCAT(a, b) KILN_CONCAT_IMPL(a, b)

/// Returns from the enclosing function if \p expr yields a failing Error.
#define KILN_RETURN_IF_ERR(expr)                                                          \
  do {                                                                                     \
    if (::kiln::Error kilnErrTmp_ = (expr))                                                \
      return kilnErrTmp_;                                                                  \
  } while (0)

/// `KILN_ASSIGN_OR_RETURN(auto x, computeX());` unwraps an Expected or returns its Error.
#define KILN_ASSIGN_OR_RETURN(decl, expr)                                                 \
  KILN_ASSIGN_OR_RETURN_IMPL(KILN_CONCAT(kilnExpTmp_, __LINE__), decl, expr)
#define KILN_ASSIGN_OR_RETURN_IMPL(tmp, decl, expr)                                       \
  auto tmp = (expr);                                                                       \
  if (!tmp)                                                                                \
    return tmp.takeError();                                                                \
  decl = std::move(tmp).get()

#endif // KILN_BASE_ERROR_H
