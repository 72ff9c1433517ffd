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

/// What kind of failure an error is (as Hyperscan's hs_error_t or simdjson's error_code say it): callers
/// decide on the code, never on the message. The CLI's exit status follows it (exit_status).
enum class errc {
  failed = 0,      ///< anything else: a bad argument, an input or history problem
  knowledge_base,  ///< a signature, table or prefix file does not load or compile
  engine,          ///< Vectorscan or RE2 failed at run time (scratch allocation, scan): no diagnosis can be trusted
  cancelled,       ///< the caller asked to stop (a pipeline::sink returned false): no report was made
};

/// A user-facing error: `message` names the object (file, signature) and the reason, on one line.
struct error {
  std::string message;
  errc code = errc::failed;
};

/// The process exit status for an error: 2 usage or input, 4 engine failure, 5 knowledge base
/// (0, 1 and 3 are the verdicts: docs/cli.md).
inline int exit_status(const error& e) {
  switch (e.code) {
    case errc::engine: return 4;
    case errc::knowledge_base: return 5;
    default: return 2;
  }
}

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
