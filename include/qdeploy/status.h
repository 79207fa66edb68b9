// qdeploy's public error channel: Status and Expected<T>. No function of the public API throws; each returns one of
// these, and a failed one says what went wrong and how to fix it.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace qdeploy {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // the caller's input (file, option, model) is wrong
  kUnsupported,      // valid input that this build or engine cannot handle (e.g. a GPU feature on the CPU engine)
  kNotFound,         // a file or name the caller gave does not exist
  kInternal,         // a bug in qdeploy or a failing system call
};

class Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return {}; }
  bool is_ok() const { return code_ == StatusCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  StatusCode code() const { return code_; }
  // The whole message, with the model node it concerns where there is one ("node 'conv1' (Conv): ...").
  const std::string& message() const { return message_; }
  const std::string& to_string() const { return message_; }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// A value or the Status saying why there is none.
template <typename T>
class Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}         // NOLINT(google-explicit-constructor)
  Expected(Status status) : v_(std::move(status)) {   // NOLINT(google-explicit-constructor)
    if (std::get<1>(v_).is_ok()) v_ = Status(StatusCode::kInternal, "an error status without an error");
  }

  bool has_value() const { return v_.index() == 0; }
  explicit operator bool() const { return has_value(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  // Status::ok() when there is a value.
  Status status() const { return has_value() ? Status() : std::get<1>(v_); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace qdeploy
