#include "kiln/Base/Error.h"

#include <cstdio>
#include <cstdlib>

namespace kiln {

const char *errorCodeName(ErrorCode code) {
  switch (code) {
  case ErrorCode::InvalidArgument:
    return "invalid-argument";
  case ErrorCode::InvalidGraph:
    return "invalid-graph";
  case ErrorCode::Unsupported:
    return "unsupported";
  case ErrorCode::ModelParse:
    return "model-parse";
  case ErrorCode::OutOfMemory:
    return "out-of-memory";
  case ErrorCode::QueueFull:
    return "queue-full";
  case ErrorCode::NotFound:
    return "not-found";
  case ErrorCode::Runtime:
    return "runtime";
  case ErrorCode::Internal:
    return "internal";
  }
  return "unknown";
}

const std::string &Error::message() const {
  static const std::string kSuccess = "success";
  return info_ ? info_->message : kSuccess;
}

std::string Error::toString() const {
  if (!info_)
    return "success";
  return std::string(errorCodeName(info_->code)) + ": " + info_->message;
}

Error Error::addContext(const std::string &context) && {
  if (info_)
    info_->message = context + ": " + info_->message;
  return std::move(*this);
}

void exitOnError(Error e, const char *what) {
  if (!e)
    return;
  std::fprintf(stderr, "%s%s%s\n", what ? what : "", what ? ": " : "", e.toString().c_str());
  std::exit(2);
}

} // namespace kiln
