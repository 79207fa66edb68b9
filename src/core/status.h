// Status and Expected<T>: the one error channel of qdeploy. No exceptions cross module boundaries.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace qd {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // the user's input (file, flag, model) is wrong: CLI exit 2
  kUnsupported,      // valid input that qdeploy cannot handle (yet): CLI exit 2
  kNotFound,         // a file or name the user gave does not exist: CLI exit 2
  kInternal,         // a bug in qdeploy or a failing system call: CLI exit 1
};

class Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return {}; }
  bool is_ok() const { return code_ == StatusCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  const std::string& node() const { return node_; }
  const std::string& op() const { return op_; }

  // Attach the node that caused the error (only the innermost call sets it).
  Status& at_node(const std::string& node_name, const std::string& op_type) {
    if (node_.empty() && op_.empty()) {
      node_ = node_name;
      op_ = op_type;
    }
    return *this;
  }
  // Prefix the message with context, e.g. the file being read.
  Status& prefix(const std::string& context) {
    message_ = context + ": " + message_;
    return *this;
  }
  // "node 'conv1' (Conv): kernel larger than padded input"
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  std::string node_;
  std::string op_;
};

inline Status invalid(std::string msg) { return {StatusCode::kInvalidArgument, std::move(msg)}; }
inline Status unsupported(std::string msg) { return {StatusCode::kUnsupported, std::move(msg)}; }
inline Status not_found(std::string msg) { return {StatusCode::kNotFound, std::move(msg)}; }
inline Status internal(std::string msg) { return {StatusCode::kInternal, std::move(msg)}; }

// Exit code the CLI uses for a status: 0 ok, 2 bad input/usage, 1 internal error.
int exit_code(const Status& s);

template <typename T>
class Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}                              // NOLINT
  Expected(Status status) : v_(std::move(status)) { assert(!std::get<Status>(v_).is_ok()); }  // NOLINT

  bool has_value() const { return v_.index() == 0; }
  explicit operator bool() const { return has_value(); }
  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  const Status& status() const {
    static const Status kOk;
    return has_value() ? kOk : std::get<1>(v_);
  }
  Status take_status() && { return has_value() ? Status() : std::get<1>(std::move(v_)); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace qd

#define QD_CONCAT_INNER(a, b) a##b
#define QD_CONCAT(a, b) QD_CONCAT_INNER(a, b)

// Return the status if it is an error.
#define QD_RETURN_IF_ERROR(expr)            \
  do {                                      \
    ::qd::Status qd_status_ = (expr);       \
    if (!qd_status_.is_ok()) return qd_status_; \
  } while (0)

// auto x = QD_TRY(expected_expr);  -- GCC/Clang statement expression; returns the error status.
#define QD_TRY(expr)                                              \
  ({                                                              \
    auto qd_expected_ = (expr);                                   \
    if (!qd_expected_.has_value()) return std::move(qd_expected_).take_status(); \
    std::move(qd_expected_).value();                              \
  })
