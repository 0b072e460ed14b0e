// Status and Result<T>: errors as values at module boundaries (LevelDB style).
//
// A Status is either OK or carries a code and a human-readable message that
// names what went wrong (the file, the tensor, the line). Functions that can
// fail return Status or Result<T>; exceptions never cross a module boundary.
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace moeedb {

class Status {
 public:
  enum class Code {
    kOk = 0,
    kInvalidArgument,  // bad input from the caller (text, ids, options)
    kNotFound,         // a file, tensor or key that does not exist
    kCorruption,       // a file whose bytes contradict its own format
    kNotSupported,     // a valid request this build cannot serve
    kIOError,          // the operating system refused
    kInternal,         // a bug or an unexpected library error
    kResourceExhausted,  // a queue or limit is full: retry later
    kUnavailable,      // the store cannot take the write now (no primary, no
                       // synchronous standby): nothing was written, retry later
    kOutcomeUnknown,   // the answer to a commit was lost and could not be
                       // resolved: the write may or may not be stored
    kConflict,         // a conditional write found the data changed since it
                       // was read: nothing was written, read again
  };

  Status() = default;
  static Status OK() { return Status(); }
  static Status InvalidArgument(std::string msg) { return Status(Code::kInvalidArgument, std::move(msg)); }
  static Status NotFound(std::string msg) { return Status(Code::kNotFound, std::move(msg)); }
  static Status Corruption(std::string msg) { return Status(Code::kCorruption, std::move(msg)); }
  static Status NotSupported(std::string msg) { return Status(Code::kNotSupported, std::move(msg)); }
  static Status IOError(std::string msg) { return Status(Code::kIOError, std::move(msg)); }
  static Status Internal(std::string msg) { return Status(Code::kInternal, std::move(msg)); }
  static Status ResourceExhausted(std::string msg) { return Status(Code::kResourceExhausted, std::move(msg)); }
  static Status Unavailable(std::string msg) { return Status(Code::kUnavailable, std::move(msg)); }
  static Status OutcomeUnknown(std::string msg) { return Status(Code::kOutcomeUnknown, std::move(msg)); }
  static Status Conflict(std::string msg) { return Status(Code::kConflict, std::move(msg)); }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // "OK", or "<code name>: <message>".
  std::string ToString() const;
  static const char* CodeName(Code code);

 private:
  Status(Code code, std::string msg) : code_(code), message_(std::move(msg)) {}
  Code code_ = Code::kOk;
  std::string message_;
};

// Either a value or a non-OK Status.
template <typename T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {  // NOLINT
    if (status_.ok()) status_ = Status::Internal("Result constructed from an OK status without a value");
  }
  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() { return *value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace moeedb

#define MOEEDB_RETURN_IF_ERROR(expr)          \
  do {                                        \
    ::moeedb::Status _st = (expr);            \
    if (!_st.ok()) return _st;                \
  } while (0)

#define MOEEDB_CONCAT_INNER(a, b) a##b
#define MOEEDB_CONCAT(a, b) MOEEDB_CONCAT_INNER(a, b)
#define MOEEDB_ASSIGN_OR_RETURN(lhs, expr)                                   \
  auto MOEEDB_CONCAT(_res_, __LINE__) = (expr);                              \
  if (!MOEEDB_CONCAT(_res_, __LINE__).ok()) return MOEEDB_CONCAT(_res_, __LINE__).status(); \
  lhs = std::move(MOEEDB_CONCAT(_res_, __LINE__)).value()
