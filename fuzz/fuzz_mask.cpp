// libFuzzer target: the masker (line rules, key-word table, host learning, the second pass, paths).
//
// Besides "no crash", it checks the property the masker exists for: a value planted after a secret key
// word, in any of the syntaxes the key table covers, never comes out. The value is taken from the fuzz
// input (its first run of 8+ alphanumerics), the surrounding lines are the fuzz input itself.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cctype>
#include <cstdlib>
#include <string>
#include <string_view>

#include "firstfault/mask.hpp"

namespace {

std::string planted_value(std::string_view in) {
  std::string run;
  for (char c : in) {
    bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (alnum) {
      run += c;
      if (run.size() == 24) break;
    } else if (run.size() >= 8) {
      break;
    } else {
      run.clear();
    }
  }
  return run.size() >= 8 ? run : std::string();
}

void leak(const std::string& syntax, const std::string& value, const std::string& out) {
  std::fprintf(stderr, "LEAK: %s kept %s in: %s\n", syntax.c_str(), value.c_str(), out.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  ff::mask::options opt;
  ff::mask::masker m(opt);
  std::string shown;
  std::size_t lines = 0;
  while (!in.empty() && lines < 2000) {
    auto nl = in.find('\n');
    std::string_view line = in.substr(0, nl);
    shown += m.apply(line);
    shown += '\n';
    (void)m.apply_path(line);
    ++lines;
    if (nl == std::string_view::npos) break;
    in.remove_prefix(nl + 1);
  }
  (void)m.rescan(shown);

  std::string v = planted_value(std::string_view(reinterpret_cast<const char*>(data), size));
  if (v.empty()) return 0;
  // A value that looks like a masker token or a word the masker keeps by design is not a planted secret.
  const std::string forms[] = {
      "password=" + v,
      "export PGPASSWORD=" + v,
      "{\"SecretAccessKey\": \"" + v + "\"}",
      "{'password': b'" + v + "'}",
      "['--password', '" + v + "']",
      "Authorization: Bearer " + v,
      "AccountKey=" + v + ";EndpointSuffix=core.windows.net",
      "https://b.example/x?X-Amz-Signature=" + v + "&a=1",
  };
  auto lower = [](std::string s) {
    for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  for (const auto& f : forms) {
    // Skip a value that is part of the syntax around it ("Authorization" in "Authorization: Bearer").
    std::string around = f;
    around.erase(around.find(v), v.size());
    if (lower(around).find(lower(v)) != std::string::npos) continue;
    ff::mask::masker fresh(opt);
    std::string out = fresh.apply(f);
    if (out.find(v) != std::string::npos) leak(f, v, out);
  }
  return 0;
}
