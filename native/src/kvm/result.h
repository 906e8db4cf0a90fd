// Result<T>: the error type of the core C++ layers (no exceptions). An error names the failed operation and the
// errno it returned, e.g. {op: "KVM_CREATE_VM", err: EMFILE}; napi/errors.cc turns it into a JS VmmError.
#pragma once

#include <string>
#include <utility>

namespace kvmts {

struct Error {
  int err = 0;         // errno value (positive), or 0 for a non-errno failure
  std::string op;      // the ioctl or syscall that failed, verbatim: "KVM_SET_USER_MEMORY_REGION"
  std::string detail;  // optional extra context
};

template <typename T>
class Result {
 public:
  Result(T value) : ok_(true), value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Error error) : ok_(false), error_(std::move(error)) {}  // NOLINT
  bool ok() const { return ok_; }
  const T& value() const { return value_; }
  T& value() { return value_; }
  const Error& error() const { return error_; }

 private:
  bool ok_;
  T value_{};
  Error error_{};
};

// The value of a Result that carries nothing but success: `Status` is `Result<Unit>`.
struct Unit {};
using Status = Result<Unit>;

// The success Status: `return OkStatus();`.
inline Status OkStatus() { return Status(Unit{}); }

// An error from the current errno: `return ErrnoError("KVM_RUN");`.
Error ErrnoError(const char* op, std::string detail = "");

}  // namespace kvmts
