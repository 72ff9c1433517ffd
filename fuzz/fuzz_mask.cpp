// libFuzzer target: the masker (line rules, key-word table, the secret formats' table, the context rules,
// host learning, the second pass, paths), in the default setting and with --redact (the input's first
// byte chooses).
//
// Besides "no crash", it checks the property the masker exists for: a value planted after a secret key
// word, in any of the syntaxes the key table covers, in the place of each secret_formats.tsv row's sample
// value, and in the context forms (a flag at a line's end, a nested block, a URL-encoded key), never comes
// out, after lines the fuzzer wrote. The value is taken from the fuzz input (its first run of 8+
// alphanumerics).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cctype>
#include <algorithm>
#include <cstdlib>
#include <string>
#include <string_view>

#include <re2/re2.h>

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
  opt.redact = size > 0 && (data[0] & 1);
  if (size > 0 && (data[0] & 2)) opt.key = "fuzz-key";
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
    // the same form after the fuzzer's lines, on the stream that read them (unless one of them left the
    // stream inside a block: a private key, a nested block, which mask the form whole anyway)
    std::string after = m.apply(f);
    if (after.find(v) != std::string::npos && after.find(f) != std::string::npos) leak("(after the input) " + f, v, after);
  }
  // Context forms: the value on the line after its flag, under a secret's nested block, behind an encoded key.
  const std::string contexts[][2] = {
      {"ERROR: mysql -u svc --password \\", "    " + v + " -e 'select 1'"},
      {"0: credentials:", "0:   token: " + v},
      {"ERROR: GET /v1?pass%77ord=" + v + "&x=1", ""},
  };
  for (const auto& c : contexts) {
    std::string around = c[0] + "\n" + c[1];
    around.erase(around.find(v), v.size());
    if (lower(around).find(lower(v)) != std::string::npos) continue;
    ff::mask::masker fresh(opt);
    std::string out = fresh.apply(c[0]) + "\n" + (c[1].empty() ? "" : fresh.apply(c[1]));
    if (out.find(v) != std::string::npos) leak(c[0] + " / " + c[1], v, out);
  }
  // Each secret format's sample with its value replaced by the planted one, where the row's regexp still
  // takes the planted value as what it replaces (the value fits the format: letters and digits).
  const auto& rows = ff::mask::secret_formats();
  const auto& row = rows[static_cast<std::size_t>(data[0]) % rows.size()];
  re2::RE2 re(row.regex);
  re2::StringPiece g[2];
  const int groups = std::min(1, re.NumberOfCapturingGroups());
  if (re.ok() && re.Match(row.sample, 0, row.sample.size(), re2::RE2::UNANCHORED, g, groups + 1)) {
    const re2::StringPiece target = groups == 1 && g[1].data() ? g[1] : g[0];
    const std::size_t at = static_cast<std::size_t>(target.data() - row.sample.data());
    // keep the value's length (formats count characters): v repeated or cut to it, after the value's first
    // 8 characters (a prefix such as "ghp_" or "AKIA" stays)
    std::string value(target.data(), target.size());
    if (value.size() > 16) {
      std::string fill;
      while (fill.size() < value.size() - 8) fill += v;
      value = value.substr(0, 8) + fill.substr(0, value.size() - 8);
      std::string line = row.sample;
      line.replace(at, target.size(), value);
      re2::StringPiece h[2];
      if (re.Match(line, 0, line.size(), re2::RE2::UNANCHORED, h, groups + 1) &&
          std::string((groups == 1 && h[1].data() ? h[1] : h[0]).data(), (groups == 1 && h[1].data() ? h[1] : h[0]).size()) == value) {
        ff::mask::masker fresh(opt);
        const std::string out = fresh.apply(line);
        if (out.find(value.substr(8)) != std::string::npos) leak(row.name + ": " + line, value, out);
      }
    }
  }
  return 0;
}
