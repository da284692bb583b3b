// Status and Result<T>: the one error type of format/, reader/ and convert/.
//
// Library code below the CLI and trainer boundaries never throws; every fallible
// function returns a Status or a Result<T>. A Status is cheap when ok (no allocation).
// Messages say what was expected, what was found, and where (file, sample, field).
#pragma once

#include <cassert>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>

namespace shardify {

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument = 1,    // the caller passed something unusable (bad option, bad shape)
  kNotFound = 2,           // a file, field, split or sample that does not exist
  kAlreadyExists = 3,      // refusing to overwrite
  kIOError = 4,            // the operating system said no (open, read, write, mmap, rename)
  kCorruption = 5,         // bytes on disk disagree with the format or their checksum
  kUnsupported = 6,        // valid input this version cannot handle (version too new, codec)
  kOutOfRange = 7,         // an index past the end
  kResourceExhausted = 8,  // a configured limit would be exceeded
  kCancelled = 9,          // work stopped on request
  kInternal = 10,          // a bug in this library
  kBusy = 11,              // held by another process (a destination being written)
};

// Stable lower-case name of a code, e.g. "corruption".
const char* StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // ok
  Status(StatusCode code, std::string message);

  static Status Ok() { return Status(); }

  bool ok() const { return state_ == nullptr; }
  StatusCode code() const { return state_ ? state_->code : StatusCode::kOk; }
  // Empty when ok.
  const std::string& message() const;
  // "corruption: <message>" or "ok".
  std::string ToString() const;

  // Returns a copy whose message is "<prefix>: <message>"; ok stays ok.
  Status WithContext(const std::string& prefix) const;

  // Explicitly drops an error the caller has decided not to act on.
  void IgnoreError() const {}

 private:
  struct State {
    StatusCode code;
    std::string message;
  };
  std::shared_ptr<const State> state_;
};

inline Status InvalidArgument(std::string m) { return Status(StatusCode::kInvalidArgument, std::move(m)); }
inline Status NotFound(std::string m) { return Status(StatusCode::kNotFound, std::move(m)); }
inline Status AlreadyExists(std::string m) { return Status(StatusCode::kAlreadyExists, std::move(m)); }
inline Status IOError(std::string m) { return Status(StatusCode::kIOError, std::move(m)); }
inline Status Corruption(std::string m) { return Status(StatusCode::kCorruption, std::move(m)); }
inline Status Unsupported(std::string m) { return Status(StatusCode::kUnsupported, std::move(m)); }
inline Status OutOfRange(std::string m) { return Status(StatusCode::kOutOfRange, std::move(m)); }
inline Status ResourceExhausted(std::string m) { return Status(StatusCode::kResourceExhausted, std::move(m)); }
inline Status Cancelled(std::string m) { return Status(StatusCode::kCancelled, std::move(m)); }
inline Status Internal(std::string m) { return Status(StatusCode::kInternal, std::move(m)); }
inline Status Busy(std::string m) { return Status(StatusCode::kBusy, std::move(m)); }

// Either a value or a non-ok Status. Constructing from an ok Status is a programmer error.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}        // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!std::get<Status>(v_).ok() && "Result built from an ok Status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  // The error; an ok Status when a value is held.
  Status status() const { return ok() ? Status() : std::get<Status>(v_); }

  // Preconditions: ok().
  T& value() & {
    assert(ok());
    return std::get<T>(v_);
  }
  const T& value() const& {
    assert(ok());
    return std::get<T>(v_);
  }
  T&& value() && {
    assert(ok());
    return std::get<T>(std::move(v_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::variant<Status, T> v_;
};

// Runs fn() (returning a Status or a Result) where nothing may throw: a failed allocation
// (std::bad_alloc, std::length_error) becomes ResourceExhausted(what()), so an input too
// large for the memory at hand is an error naming it, never an abort. `what` is called
// only then, so the happy path allocates nothing.
template <typename Fn, typename What>
auto CatchAllocationFailure(Fn&& fn, What&& what) -> decltype(fn()) {
  try {
    return fn();
  } catch (const std::bad_alloc&) {
  } catch (const std::length_error&) {
  }
  return ResourceExhausted(what());
}

}  // namespace shardify

#define SHARDIFY_CONCAT_INNER(a, b) a##b
#define SHARDIFY_CONCAT(a, b) SHARDIFY_CONCAT_INNER(a, b)

// Returns the Status of `expr` from the enclosing function when it is not ok.
#define RETURN_IF_ERROR(expr)                            \
  do {                                                   \
    ::shardify::Status shardify_status_ = (expr);        \
    if (!shardify_status_.ok()) return shardify_status_; \
  } while (0)

// `lhs = value of rexpr`, or returns its error from the enclosing function.
#define ASSIGN_OR_RETURN(lhs, rexpr) ASSIGN_OR_RETURN_IMPL(SHARDIFY_CONCAT(shardify_result_, __LINE__), lhs, rexpr)
#define ASSIGN_OR_RETURN_IMPL(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                          \
  if (!tmp.ok()) return tmp.status();          \
  lhs = std::move(tmp).value()
