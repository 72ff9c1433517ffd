// libFuzzer target: the language server's pure parts (lsp.hpp) on arbitrary bytes.
//
// The input is read as a stream of LSP frames until the first error or the end; every body is parsed
// as JSON without exceptions, as the server does. Properties checked besides "no crash, no hang":
// a path (no NUL, starting with '/') goes to a file: URI and back unchanged; a line's width never
// exceeds its bytes; looks_like_log() answers for any text.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "firstfault/lsp.hpp"
#include "firstfault/normalize.hpp"
#include "firstfault/kb.hpp"

namespace {
const ff::normalize::prefix_catalog& catalogue() {
  static const ff::normalize::prefix_catalog cat = [] {
    auto lib = ff::kb::library::load(true, {});
    if (!lib) std::abort();
    auto c = ff::normalize::prefix_catalog::load(lib.value().prefix_files);
    if (!c) std::abort();
    return std::move(c).value();
  }();
  return cat;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string in(reinterpret_cast<const char*>(data), size);
  std::istringstream frames(in);
  std::string body, err;
  for (int i = 0; i < 64; ++i) {
    auto st = ff::lsp::read_message(frames, body, err, 1 << 16);
    if (st != ff::lsp::read_status::message) break;
    auto j = nlohmann::json::parse(body, nullptr, false);
    if (!j.is_discarded()) (void)ff::lsp::frame(j);
  }
  std::string path = "/" + in.substr(0, 256);
  if (path.find('\0') == std::string::npos) {
    auto back = ff::lsp::uri_to_path(ff::lsp::path_to_uri(path));
    if (!back || *back != path) {
      std::fprintf(stderr, "path -> URI -> path changed the path\n");
      std::abort();
    }
  }
  (void)ff::lsp::uri_to_path(in.substr(0, 512));
  for (std::uint64_t line = 0; line < 3; ++line) {
    if (ff::lsp::line_length(in, line, false) > in.size() || ff::lsp::line_length(in, line, true) > in.size()) {
      std::fprintf(stderr, "a line wider than the text\n");
      std::abort();
    }
  }
  (void)ff::lsp::looks_like_log("untitled:x", "plaintext", in, catalogue());
  return 0;
}
