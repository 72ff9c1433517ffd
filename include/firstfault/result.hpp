// firstfault/result.hpp: value-or-error without exceptions across stage APIs.
//
// Every stage function that can fail returns ff::result<T>. Check it like simdjson's results:
//
//   ff::result<ff::kb::library> lib = ff::kb::library::load_builtin();
//   if (!lib) { std::fprintf(stderr, "%s\n", lib.error().message.c_str()); return 2; }
//   use(lib.value());
//
// An error carries a one-line message meant for the user, already naming the file and the reason.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace ff {

/// A user-facing error: `message` names the object (file, signature) and the reason, on one line.
struct error {
  std::string message;
};

template <class T>
class [[nodiscard]] result {
 public:
  result(T value) : v_(std::move(value)) {}          // NOLINT: implicit by design
  result(ff::error err) : v_(std::move(err)) {}      // NOLINT: implicit by design
  explicit operator bool() const { return v_.index() == 0; }
  T& value() & { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  const T& value() const& { return std::get<0>(v_); }
  const ff::error& error() const { return std::get<1>(v_); }

 private:
  std::variant<T, ff::error> v_;
};

/// A result with no value: success or an error.
struct ok_t {};
using status = result<ok_t>;
inline status ok() { return ok_t{}; }

}  // namespace ff
