#include "base/status.h"

namespace moeedb {

const char* Status::CodeName(Code code) {
  switch (code) {
    case Code::kOk: return "OK";
    case Code::kInvalidArgument: return "Invalid argument";
    case Code::kNotFound: return "Not found";
    case Code::kCorruption: return "Corruption";
    case Code::kNotSupported: return "Not supported";
    case Code::kIOError: return "IO error";
    case Code::kInternal: return "Internal error";
    case Code::kResourceExhausted: return "Resource exhausted";
    case Code::kUnavailable: return "Unavailable";
    case Code::kOutcomeUnknown: return "Outcome unknown";
    case Code::kConflict: return "Conflict";
  }
  return "Unknown";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  return std::string(CodeName(code_)) + ": " + message_;
}

}  // namespace moeedb
