// Status and StatusOr: expected failures (bad input, I/O errors, lost links) are values, in the
// manner of LevelDB's Status. Exceptions are not used for control flow. A caller may rely on:
// ok() is true exactly when code() == Code::kOk, and message() names the file, field or key.
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace dv {

class Status {
 public:
  enum class Code {
    kOk,
    kInvalidArgument,
    kNotFound,
    kCorruption,
    kIoError,
    kUnavailable,
    kOutOfRange
  };

  Status() = default;
  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string msg) {
    return {Code::kInvalidArgument, std::move(msg)};
  }
  static Status NotFound(std::string msg) { return {Code::kNotFound, std::move(msg)}; }
  static Status Corruption(std::string msg) { return {Code::kCorruption, std::move(msg)}; }
  static Status IoError(std::string msg) { return {Code::kIoError, std::move(msg)}; }
  static Status Unavailable(std::string msg) { return {Code::kUnavailable, std::move(msg)}; }
  static Status OutOfRange(std::string msg) { return {Code::kOutOfRange, std::move(msg)}; }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // "corruption: foo.bin: truncated record" -- the form printed by the CLI.
  std::string ToString() const;
  // Prefixes the message with context ("file.bin: "), keeping the code.
  Status WithContext(const std::string& context) const;

 private:
  Status(Code code, std::string msg) : code_(code), message_(std::move(msg)) {}
  Code code_ = Code::kOk;
  std::string message_;
};

const char* CodeName(Status::Code code);

template <typename T>
class StatusOr {
 public:
  StatusOr(Status status) : status_(std::move(status)) {}  // NOLINT: implicit by design
  StatusOr(T value) : value_(std::move(value)) {}          // NOLINT: implicit by design

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace dv

#define DV_CONCAT_INNER(a, b) a##b
#define DV_CONCAT(a, b) DV_CONCAT_INNER(a, b)

#define DV_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::dv::Status dv_status_ = (expr);        \
    if (!dv_status_.ok()) return dv_status_; \
  } while (0)

#define DV_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()

#define DV_ASSIGN_OR_RETURN(lhs, expr) \
  DV_ASSIGN_OR_RETURN_IMPL(DV_CONCAT(dv_statusor_, __LINE__), lhs, expr)
