// Masking of identifying values and secrets (see firstfault/mask.hpp). Every pattern is RE2.
// The secret formats of issuers (token prefixes and lengths, command-line password flags, headers) are data:
// kb/_tables/secret_formats.tsv, compiled into the binary with the knowledge base, one row per format with
// the page that documents it and a made-up sample the unit tests mask.
#include "firstfault/mask.hpp"

#include "firstfault/limits.hpp"

#include "rules.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <re2/re2.h>
#include <re2/set.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstring>
#include <array>
#include <bitset>
#include <cmath>
#include <cstdint>
#include <deque>
#include <mutex>
#include <set>
#include <unordered_map>

namespace ff::mask {

using detail::rule_def;
using detail::kBracketHostPort;
using detail::learnable;
using detail::expand_hostlist;
using detail::secret_key_rules;

namespace {
// The compiled rules: immutable once built, so one set is shared by every masker that has no custom rules
// (RE2 objects are safe to match from several threads). The set is compiled at once; each rule's own RE2
// (for the replacement) on the first line that fires it, which takes ~10 ms off every start-up.
// The set holds each rule with its counted repetitions made unbounded (relax_counted_repeats): the secret
// key rules' [^"\\\n]{1,256} alone made the set's program cost 6 ms of every start (15 ms cold for the
// whole set, 2.4 ms relaxed). A relaxed rule the set names is confirmed with its exact regexp on the same
// text, so the rules applied to a line are exactly those whose exact regexp matches it. Repetitions with
// small bounds ({2}, {1,4}, {7}) stay exact: relaxed, the MAC and IPv6 rules fired on every timestamp and
// NCCL header, and their confirmation cost ~4,000 instructions on each line masked (a per-rank file's first
// 256 lines are all masked).
constexpr int kKeepCountedRepeat = 8;
struct compiled_rules {
  struct rule {
    std::string kind, token;
    bool secret;
    bool relaxed = false;  // the set holds a looser form: confirm with re() before applying
    std::string regex;
    mutable std::once_flag once;
    mutable std::unique_ptr<re2::RE2> compiled;
    const re2::RE2& re() const {
      std::call_once(once, [&] {
        if (compiled) return;
        re2::RE2::Options ro;
        ro.set_log_errors(false);
        compiled = std::make_unique<re2::RE2>(regex, ro);
      });
      return *compiled;
    }
  };
  std::deque<rule> rules;  // not moved once built (std::once_flag)
  std::unique_ptr<re2::RE2::Set> set;
  bool set_ok = false;  // Compile() succeeded (it fails when the set's program is past RE2's memory budget)
  std::string bad_rule;
};

// The identity rules: left out unless --redact.
bool identity_kind(std::string_view kind) {
  return kind == "mac" || kind == "ipv6" || kind == "ipv4" || kind == "hostname" || kind == "home_user" ||
         kind == "gpu_uuid" || kind == "serial" || kind == "account_id" || kind.rfind("user_", 0) == 0;
}

std::shared_ptr<const compiled_rules> compile_rules(const std::vector<custom_rule>& extra, bool identity) {
  auto c = std::make_shared<compiled_rules>();
  re2::RE2::Options ro;
  ro.set_log_errors(false);
  c->set = std::make_unique<re2::RE2::Set>(ro, re2::RE2::UNANCHORED);
  // A custom rule is compiled at once, so that a bad one is reported in RE2's words before any line is
  // read; a built-in rule (tested to compile) when it first fires. The set's parse checks both.
  auto add = [&](const std::string& kind, const std::string& token, bool secret, const std::string& regex, bool now) {
    std::unique_ptr<re2::RE2> re = now ? std::make_unique<re2::RE2>(regex, ro) : nullptr;
    std::string err;
    if (re && !re->ok()) {
      if (c->bad_rule.empty()) c->bad_rule = kind + ": " + re->error() + ": " + regex;
      return;
    }
    // A built-in rule is tested to compile; a custom one was just compiled above. The set takes the relaxed
    // text, or the exact one if the relaxed text does not parse (then no confirmation is needed).
    bool relaxed = false;
    std::string loose = relax_counted_repeats(regex, &relaxed, kKeepCountedRepeat);
    if (!relaxed || c->set->Add(loose, nullptr) < 0) {
      relaxed = false;
      if (c->set->Add(regex, &err) < 0) {
        if (c->bad_rule.empty()) c->bad_rule = kind + ": " + err + ": " + regex;
        return;
      }
    }
    auto& r = c->rules.emplace_back();
    r.kind = kind;
    r.token = token;
    r.secret = secret;
    r.relaxed = relaxed;
    r.regex = regex;
    r.compiled = std::move(re);
  };
  for (const auto& r : detail::rules()) {
    if (!identity && identity_kind(r.kind)) continue;
    if (r.regex) add(r.kind, r.token, r.secret, r.regex, false);
    else if (std::string_view(r.kind) == "secret_formats") for (const auto& f : secret_formats()) add(f.name, f.token, true, f.regex, false);
    else for (const auto& g : secret_key_rules()) add(r.kind, r.token, r.secret, g, false);
  }
  for (const auto& x : extra) {
    // A rule name from a config file is printed in reports and tokens: letters, digits, '.', '_' and '-' only.
    std::string name = x.name.empty() ? "custom" : x.name.substr(0, 40);
    for (auto& ch : name)
      if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '_' && ch != '-' && ch != '.') ch = '_';
    add(name, x.name.empty() ? "masked" : name, true, x.regex, true);
  }
  c->set_ok = c->set->Compile();
  return c;
}

}  // namespace

// HMAC-SHA256 as lower-case hex (OpenSSL's one-shot HMAC(): https://www.openssl.org/docs/man3.0/man3/HMAC.html).
static std::string hmac_hex(const std::string& key, const std::string& message, std::size_t hex_digits) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (!HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(message.data()),
            message.size(), md, &len))
    return std::string(hex_digits, '0');
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < len && out.size() < hex_digits; ++i) {
    out += hex[md[i] >> 4];
    out += hex[md[i] & 15];
  }
  out.resize(std::min(out.size(), hex_digits));
  return out;
}

struct masker::impl {
  std::string key;  // options::key
  std::shared_ptr<const compiled_rules> compiled;
  std::unordered_map<std::string, std::unordered_map<std::string, std::string>> seen;  // kind -> value -> token
  std::unordered_map<std::string, std::size_t> next;                                  // token -> last number
  std::set<std::string> keep;
  // Learnt host name -> token, masked wherever it appears. Looked up with a string_view (no copy of each word
  // of each line); `host_first` and the length range rule out most words before any hashing.
  struct sv_hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, std::string, sv_hash, std::equal_to<>> hosts;
  std::bitset<256> host_first;
  std::size_t host_min = SIZE_MAX, host_max = 0;
  // Host names are case-insensitive (RFC 4343): a learnt host is kept lower-cased and found in any
  // capitals ("Gpu-A" after "gpu-a"), with the token of its first spelling.
  static char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c | 0x20) : c; }
  void learn_host(const std::string& host, const std::string& token) {
    if (host.empty()) return;
    std::string key = host;
    for (auto& c : key) c = ascii_lower(c);
    hosts.try_emplace(std::move(key), token);
    const char first = ascii_lower(host[0]);
    host_first.set(static_cast<unsigned char>(first));
    if (first >= 'a' && first <= 'z') host_first.set(static_cast<unsigned char>(first - 'a' + 'A'));
    host_min = std::min(host_min, host.size());
    host_max = std::max(host_max, host.size());
  }
  std::set<std::string> produced;  // every replacement token handed out
  // The state one line leaves for the next of its stream (reset_stream() clears it; apply_detached()
  // neither reads nor changes it).
  struct stream_state {
    bool in_key_block = false;
    int key_block_lines = 0;
    bool secret_at_eol = false;  // the last line ended inside a secret: its next line may continue the value
    bool value_next = false;     // the last line ended in a secret's name or flag (--password, -p): the
                                 // next line's first word is its value
    int nest_indent = -1;        // a "credentials:" / "password:" line opened a nested block at this indent
    int nest_lines = 0;          // lines read in it (the block ends after kMaxNestLines)
  };
  static constexpr int kMaxNestLines = 64;
  stream_state st;
  static constexpr std::size_t kMaxLearned = 100000;  // bound memory on hostile input
  // Every replacement kept for consistency costs about 200 bytes (value, token, reverse entry): 100,000 of
  // them stay near 20 MiB. Past the bound, new values are still masked, with one shared token per kind
  // (ip-x, <secret-x>), and the report's counts carry "over_table_bound".
  static constexpr std::size_t kMaxSeen = 100000;
  std::size_t seen_total = 0;
  bool bound_hit = false;
  std::string token(const std::string& kind, const std::string& prefix, bool secret, const std::string& value, bool* is_new) {
    *is_new = false;
    auto& m = seen[kind];
    if (auto it = m.find(value); it != m.end()) return it->second;
    std::string t;
    if (seen_total >= kMaxSeen) {
      bound_hit = true;
      t = secret ? "<" + prefix + "-x>" : prefix + "-x";
    } else if (!secret && !key.empty()) {
      t = prefix + "-" + hmac_hex(key, kind + std::string(1, '\0') + value, 10);
      m.emplace(value, t);
      ++seen_total;
      *is_new = true;
    } else {
      std::string n = std::to_string(++next[prefix]);
      t = secret ? "<" + prefix + "-" + n + ">" : prefix + "-" + n;
      m.emplace(value, t);
      ++seen_total;
      *is_new = true;
    }
    produced.insert(t);
    return t;
  }

  // Calls f(begin, end, token) for each word-like run of `line` (letters, digits, . _ -; a final '.' or '-'
  // left out: a sentence's end) that is a learnt host, left to right, until f returns true. Linear. A word
  // equal to `skip` (any capitals) is passed over unasked.
  template <class F>
  void each_learnt_host(std::string_view line, F&& f, std::string_view skip = {}) const {
    if (hosts.empty()) return;
    each_word(line, [&](std::size_t i, std::size_t k) {
      if (k - i >= host_min && k - i <= host_max && host_first.test(static_cast<unsigned char>(line[i])) &&
          (skip.empty() || k - i != skip.size() ||
           (std::memcmp(skip.data(), line.data() + i, skip.size()) != 0 &&  // (most often the same bytes)
            !std::equal(skip.begin(), skip.end(), line.begin() + static_cast<std::ptrdiff_t>(i), [](char a, char b) { return ascii_lower(a) == ascii_lower(b); })))) {
        thread_local std::string folded;
        folded.assign(line.substr(i, k - i));
        for (auto& c : folded) c = ascii_lower(c);
        if (auto it = hosts.find(std::string_view(folded)); it != hosts.end() && f(i, k, it->second)) return true;
      }
      return false;
    });
  }
  // Calls f(begin, end) for each word-like run of `line` (letters, digits, . _ -; a final '.' or '-' left out:
  // a sentence's end), left to right, until f returns true. Where the words are does not depend on which
  // digits the line holds.
  template <class F>
  static void each_word(std::string_view line, F&& f) {
    // isalnum() in the "C" locale, '.', '_' and '-' (a table: this runs over every byte of every masked line)
    static const auto word_table = [] {
      std::array<bool, 256> t{};
      for (int c = 0; c < 256; ++c) t[static_cast<std::size_t>(c)] = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' || c == '_' || c == '-';
      return t;
    }();
    auto is_word = [](char c) { return word_table[static_cast<unsigned char>(c)]; };
    for (std::size_t i = 0; i < line.size();) {
      if (!is_word(line[i])) { ++i; continue; }
      std::size_t j = i;
      while (j < line.size() && is_word(line[j])) ++j;
      std::size_t k = j;
      while (k > i && (line[k - 1] == '.' || line[k - 1] == '-')) --k;
      if (f(i, k)) return;
      i = j;
    }
  }
  bool names_learnt_host(std::string_view line) const {
    bool found = false;
    each_learnt_host(line, [&](std::size_t, std::size_t, const std::string&) { return found = true; });
    return found;
  }
  // Replaces every learnt host in `line` by its token; returns how many.
  std::size_t replace_learnt_hosts(std::string& line) {
    std::string out;
    std::size_t n = 0, last = 0;
    each_learnt_host(line, [&](std::size_t i, std::size_t k, const std::string& token) {
      out.append(line, last, i - last);
      out += token;
      last = k;
      ++n;
      return false;
    });
    if (n) {
      out.append(line, last, std::string::npos);
      line = std::move(out);
    }
    return n;
  }
};

bool masker::may_change(std::string_view text) const {
  int dots = 0, colons = 0, dashes = 0;
  for (char c : text) {
    if (c == '@' || c == '/' || c == '\\' || c == '=') return true;
    dots += c == '.';
    colons += c == ':';
    dashes += c == '-';
  }
  // IPv4 needs 3 dots; IPv6 2 colons ("::1"), a MAC 5 colons or 5 dashes; the user-name rules a keyword
  // ("user: alice", "for user bob", "owner=...")
  if (dots >= 3 || colons >= 2 || dashes >= 5) return true;
  for (std::size_t i = 0; i + 4 <= text.size(); ++i) {  // "logname" holds "login"'s "log": "user", "logi", "logn", "owne"
    char w[4];
    for (std::size_t k = 0; k < 4; ++k) w[k] = impl::ascii_lower(text[i + k]);
    const std::string_view v(w, 4);
    if (v == "user" || v == "owne" || (v.substr(0, 3) == "log" && (w[3] == 'i' || w[3] == 'n'))) return true;
  }
  return impl_->names_learnt_host(text);
}

bool masker::names_other_learnt_host(std::string_view text, std::string_view host) const {
  bool found = false;
  impl_->each_learnt_host(text, [&](std::size_t, std::size_t, const std::string&) { return found = true; }, host);
  return found;
}

std::size_t masker::learnt_host_count() const { return impl_->hosts.size(); }

void masker::words_that_may_be_learnt_hosts(std::string_view text, std::vector<std::pair<std::size_t, std::size_t>>& out) const {
  out.clear();
  const auto& im = *impl_;
  if (im.hosts.empty()) return;
  bool any_digit = false;
  for (char d = '0'; d <= '9'; ++d) any_digit |= im.host_first.test(static_cast<unsigned char>(d));
  impl::each_word(text, [&](std::size_t i, std::size_t k) {
    const char first = text[i];
    const bool first_fits = first >= '0' && first <= '9' ? any_digit : im.host_first.test(static_cast<unsigned char>(first));
    if (k - i >= im.host_min && k - i <= im.host_max && first_fits) out.emplace_back(i, k - i);
    return false;
  });
}

masker::masker(options opt) : opt_(std::move(opt)), impl_(std::make_unique<impl>()) {
  impl_->key = opt_.key;
  const bool identity = opt_.redact;
  if (opt_.extra.empty()) {
    if (identity) {  // (each set compiled on first use only)
      static const std::shared_ptr<const compiled_rules> all = compile_rules({}, true);
      impl_->compiled = all;
    } else {
      static const std::shared_ptr<const compiled_rules> secrets = compile_rules({}, false);
      impl_->compiled = secrets;
    }
  } else {
    impl_->compiled = compile_rules(opt_.extra, identity);
  }
  for (const auto& h : detail::public_hosts()) impl_->keep.insert(h);
  for (const auto& h : opt_.keep_hosts) impl_->keep.insert(h);
}

namespace {
// The host rules for prefix forms (NCCL's "host:pid:tid [dev]", syslog, pdsh, "[date] host [pid]"): the
// prefix catalogue peels the same hosts on every line and mask_host() learns them, so these rules are not
// in the scan gate; prefix_host_patterns() lets a line whose peel found no host be checked for them.
bool is_prefix_host_rule(const rule_def& r) {
  if (std::string(r.kind) != "hostname" || !r.regex) return false;
  std::string re = r.regex;
  return re[0] == '^' || re.find(R"(:\d+:\d+ \[\d+\])") != std::string::npos;
}
}  // namespace

std::vector<std::string> prefix_host_patterns() {
  std::vector<std::string> out;
  for (const auto& r : detail::rules())
    if (is_prefix_host_rule(r)) out.push_back(r.regex);
  return out;
}

namespace {
bool digit(char c) { return c >= '0' && c <= '9'; }
bool host_byte(char c) {  // [\w.-]
  return digit(c) || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') || c == '_' || c == '.' || c == '-';
}
// What each prefix host rule needs before its regexp is worth running, by hand (the rules as written in
// kRules; prefix_host_form_rules_are_known, a unit test, fails when one changes). A superset each.
// NCCL "host:pid:tid [dev]": a " [" with digits and ']' after it, ":digits:digits" before it and a [\w.-]
// byte before that. Calls f(host) with the run of [\w.-] bytes before ":pid" for each such place, left to
// right, until f returns true; returns whether it did.
template <class F>
bool each_nccl_header_candidate(std::string_view l, F&& f) {
  for (auto q = l.find('[', 2); q != std::string_view::npos; q = l.find('[', q + 1)) {
    if (l[q - 1] != ' ') continue;
    const std::size_t p = q - 1;
    std::size_t e = p + 2;
    if (e >= l.size() || !digit(l[e])) continue;
    while (e < l.size() && digit(l[e])) ++e;
    if (e >= l.size() || l[e] != ']') continue;
    std::size_t b = p;
    bool ok = true;
    for (int k = 0; k < 2 && ok; ++k) {  // ":tid" then ":pid", read backwards
      std::size_t d = b;
      while (d > 0 && digit(l[d - 1])) --d;
      ok = d < b && d > 0 && l[d - 1] == ':';
      b = d - 1;
    }
    if (!ok || b == 0 || !host_byte(l[b - 1])) continue;
    std::size_t h = b;
    while (h > 0 && host_byte(l[h - 1])) --h;
    if (f(l.substr(h, b - h))) return true;
  }
  return false;
}
bool nccl_header_candidate(std::string_view l) {
  return each_nccl_header_candidate(l, [](std::string_view) { return true; });
}
}  // namespace

namespace {
// prefix_host_patterns() compiled, each with the hand check of what its regexp needs first, in its order
// (prefix_host_form_rules_are_known, a unit test, fails when a rule changes; each check is a superset).
struct host_form_rule {
  bool (*candidate)(std::string_view);
  std::unique_ptr<re2::RE2> re;
};
const std::vector<host_form_rule>& host_form_rules() {
  static bool (*const kCandidate[])(std::string_view) = {
      nccl_header_candidate,
      [](std::string_view l) {  // syslog "Mon dd hh:mm:ss host tag: " or ISO "yyyy-mm-ddT... host tag: "
        return l.size() > 16 && ((l[0] >= 'A' && l[0] <= 'Z' && l[1] >= 'a' && l[1] <= 'z' && l[3] == ' ') ||
                                 (digit(l[0]) && digit(l[3]) && l[4] == '-' && l[10] == 'T'));
      },
      [](std::string_view l) {  // pdsh "node-1: ": the first token is [a-z0-9-]+, then ": "
        std::size_t i = 0;
        while (i < l.size() && (digit(l[i]) || (l[i] >= 'a' && l[i] <= 'z') || l[i] == '-')) ++i;
        return i >= 3 && i + 1 < l.size() && l[i] == ':' && l[i + 1] == ' ';
      },
      [](std::string_view l) { return l.size() > 22 && l[0] == '[' && digit(l[1]) && l[20] == ']'; },  // "[date] host [pid] "
  };
  static const std::vector<host_form_rule> rules = [] {
    std::vector<host_form_rule> v;
    for (const auto& p : prefix_host_patterns()) {
      const std::size_t i = v.size();
      v.push_back({i < std::size(kCandidate) ? kCandidate[i] : nullptr, std::make_unique<re2::RE2>(p)});
    }
    return v;
  }();
  return rules;
}
}  // namespace

bool nccl_header_hosts_are(std::string_view l, std::string_view host) {
  // A match of the NCCL header rule captures exactly a candidate's run (the byte before the run is none of
  // [\w.-], so a capture can neither start inside it nor reach past it); a candidate the rule does not
  // match (a run starting with a digit) only makes the answer false.
  return !each_nccl_header_candidate(l, [&](std::string_view run) { return run != host; });
}

bool prefix_host_form(std::string_view line, bool line_start_only) {
  const auto& rules = host_form_rules();
  for (std::size_t i = line_start_only ? 1 : 0; i < rules.size(); ++i)  // (rule 0: the NCCL header)
    if ((!rules[i].candidate || rules[i].candidate(line)) &&
        re2::RE2::PartialMatch(re2::StringPiece(line.data(), line.size()), *rules[i].re))
      return true;
  return false;
}

void prefix_host_spans(std::string_view line, std::vector<std::pair<std::size_t, std::size_t>>& out) {
  out.clear();
  const re2::StringPiece in(line.data(), line.size());
  re2::StringPiece g[2];
  for (const auto& r : host_form_rules()) {
    if (r.candidate && !r.candidate(line)) continue;
    // every match, left to right, as masker::apply() runs a rule (the line-start rules match once)
    for (std::size_t pos = 0; pos <= line.size() && r.re->Match(in, pos, line.size(), re2::RE2::UNANCHORED, g, 2);) {
      if (g[1].data() != nullptr) out.emplace_back(static_cast<std::size_t>(g[1].data() - line.data()), g[1].size());
      const std::size_t end = static_cast<std::size_t>(g[0].data() - line.data()) + g[0].size();
      pos = end > pos ? end : pos + 1;
    }
  }
}

namespace {
std::vector<std::string> context_gate_patterns();
}  // namespace

std::vector<std::string> gate_patterns(const options& opt) {
  std::vector<std::string> out = {R"(-----BEGIN)"};
  if (opt.redact) out.push_back(R"(NODELIST=|NodeList=)");
  static const std::set<std::string> context_free = {"email", "mac", "ipv6", "ipv4", "home_user", "user_assignment", "user_phrase", "user_option", "user_at_host"};
  for (const auto& r : detail::rules()) {
    if (!r.regex && std::string_view(r.kind) == "secret_formats") {
      for (const auto& f : secret_formats()) out.push_back(f.regex);
      continue;
    }
    if (!r.regex) {
      for (const auto& g : secret_key_rules()) out.push_back(g);
      continue;
    }
    if (!opt.redact && identity_kind(r.kind)) continue;
    std::string re = r.regex;
    bool fqdn = std::string(r.kind) == "hostname" && re.find("(?:com|net|org") != std::string::npos;
    if (!context_free.count(r.kind) && !fqdn && !is_prefix_host_rule(r) && r.regex != kBracketHostPort) out.push_back(re);
  }
  for (auto& c : context_gate_patterns()) out.push_back(std::move(c));
  for (const auto& c : opt.extra) out.push_back(c.regex);
  return out;
}

bool bracket_host_port_candidate(std::string_view line) {
  // A superset of kBracketHostPort: a word character, "]:", 2 to 5 digits, then the end of the line or one
  // of [\s,);] (the regexp's own '[' and host letters are not checked; the full path decides).
  auto is_word = [](char c) {
    char l = static_cast<char>(c | 0x20);
    return (c >= '0' && c <= '9') || (l >= 'a' && l <= 'z') || c == '_';
  };
  for (std::size_t i = line.find("]:"); i != std::string_view::npos; i = line.find("]:", i + 1)) {
    if (i == 0 || !is_word(line[i - 1])) continue;
    std::size_t j = i + 2, d = 0;
    while (j < line.size() && line[j] >= '0' && line[j] <= '9' && d < 6) ++j, ++d;
    if (d < 2 || d > 5) continue;
    if (j == line.size()) return true;
    char c = line[j];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r' || c == '\v' || c == ',' || c == ')' || c == ';') return true;
  }
  return false;
}

bool masker::line_state_open() const {
  const auto& st = impl_->st;
  return st.in_key_block || st.secret_at_eol || st.value_next || st.nest_indent >= 0;
}

masker::~masker() = default;
masker::masker(masker&&) noexcept = default;
masker& masker::operator=(masker&&) noexcept = default;

status masker::check() const {
  if (!impl_->compiled->bad_rule.empty()) return error{"mask rule does not compile: " + impl_->compiled->bad_rule};
  return ok();
}

std::string masker::apply_detached(std::string_view line) {
  auto& im = *impl_;
  const auto saved = im.st;
  reset_stream();
  std::string out = apply(line);
  im.st = saved;
  return out;
}

void masker::reset_stream() {
  impl_->st = impl::stream_state{};
}

std::string masker::mask_host(const std::string& host, bool count) {
  if (!masks_identity() || host.empty()) return host;
  auto& im = *impl_;
  std::string lower = host;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  if (im.produced.count(host) || im.keep.count(lower)) return host;
  bool is_new = false;
  std::string tok = im.token("hostname", "node", false, host, &is_new);
  if (is_new && learnable(host) && im.hosts.size() < impl::kMaxLearned) im.learn_host(host, tok);
  if (im.bound_hit) counts_["over_table_bound"] = 1;
  if (count) ++counts_["hostname"];
  return tok;
}

std::string masker::apply_path(std::string_view path) {
  if (!opt_.enabled) return std::string(path);
  if (!masks_identity()) return apply_detached(path);
  // user names in home directories, with or without a leading slash (archive members have none)
  static const re2::RE2 home(R"((?:^|/)(?:home|Users|scratch|gpfs/home)/([^/\s:'"]+))");
  std::string out(path);
  re2::StringPiece in(out);
  re2::StringPiece g[2];
  std::string res;
  std::size_t pos = 0;
  while (pos < out.size() && home.Match(in, pos, out.size(), re2::RE2::UNANCHORED, g, 2)) {
    std::size_t b = static_cast<std::size_t>(g[1].data() - out.data());
    res.append(out, pos, b - pos);
    std::string user(g[1].data(), g[1].size());
    bool is_new = false;
    res += impl_->token("home_user", "user", false, user, &is_new);
    ++counts_["home_user"];
    pos = b + g[1].size();
  }
  res.append(out, pos, std::string::npos);
  // host names in file names (node-b.log, job-worker-2.log) were learnt from the path hint already;
  // addresses, e-mail and known hosts anywhere in the path go through the line rules.
  return apply_detached(res);
}

namespace {
// A launcher's prefix at a line's start, as the context rules skip it: "0: ", "[1,0]<stdout>:",
// "[rank3]:", "[default0]:", two of them, after an ISO time.
constexpr const char* kLauncherPrefix =
    R"((?:\d{4}-\d\d-\d\d[T ][\d:.,]+(?:Z|[+-]\d\d:?\d\d)?\s+)?(?:(?:\[[^\]\s]{1,40}\](?:<\w{1,10}>)?|\d{1,6}|rank\d{1,6}):[ \t]?){0,2})";
const re2::RE2& launcher_prefix() {
  static const re2::RE2 re(kLauncherPrefix);
  return re;
}
// The first word of a line after a launcher prefix: what a wrapped secret or a flag's value continues with.
const re2::RE2& continuation() {
  static const re2::RE2 re(std::string("(?:") + kLauncherPrefix + R"()[ \t]*([A-Za-z0-9+/=_.~%!@#$^&*?-]+)(\s|$))");
  return re;
}
// The secret key words (kb/_tables/secret_keys.tsv) as an alternation.
std::string key_word_alternation() { return detail::secret_key_words(); }
// A name that ends in a secret key word (plural too: "secrets", "credentials"), with a format suffix.
const re2::RE2& secret_name() {
  static const re2::RE2 re("(?i)(?:" + key_word_alternation() + ")s?(?:[_-](?:json|b64|base64|data|value))?$");
  return re;
}
// The regexps of the context rules in masker::mask_context() that need a gate of their own.
std::vector<std::string> context_gate_patterns() {
  const std::string words = key_word_alternation();
  return {
      // a nested block under a secret's name ("credentials:", "password: |")
      "(?i)[\\w.-]*(?:" + words + R"()s?["']?[ \t]*:[ \t]*[|>]?[ \t]*$)",
      // a secret's flag or name at the end of a line, its value on the next
      "(?i)--[-\\w.]*(?:" + words + R"()[ \t]*\\?[ \t]*$)",
      "(?i)[-\\w.]*(?:" + words + R"()=[ \t]*\\?[ \t]*$)",
      R"((?:sshpass|mysql|docker)[^\n]*\s-p[ \t]*\\?[ \t]*$)",
      // better_exceptions / loguru variable pointers
      "\xe2\x94\x94",
      // a URL-encoded key name
      R"(%[0-9A-Fa-f]{2}[\w.%-]*(?:[=:]|%3[Dd]))",
      // a long token beside a secret word (the entropy rule): the rule needs has_secret_word(), a run of
      // letters that is one of its exact words or ends in one of its suffixes, so the gate is such a word
      // at a run's end. (It was a 20-character value run on either side of a secret word as a substring:
      // those two regexps cost Vectorscan 70% more than every other gate pattern together on the
      // generated 1 GB console, callgrind of bench/floor.cpp on its first 10 MB, and hit every line with
      // a long name and "passed" or "keys" in it.)
      R"((?i)(?:pass|pwd|key|auth|sig|cookie|session|bearer|secrets|password|passwd|passphrase|secret|token|credentials?)(?:[^A-Za-z]|$))",
  };
}

// True when a maximal run of letters of `line` (any capitals) is a secret word, or ends in one of the
// longer ones: "API_KEY", "apiKey", "SecretAccessKey", "X-Auth-Token"; not "tokens" or "tokenizer".
bool has_secret_word(std::string_view line) {
  static constexpr std::string_view exact[] = {"pass", "pwd", "key", "auth", "sig", "cookie", "session", "bearer", "secrets"};
  static constexpr std::string_view suffix[] = {"password", "passwd", "passphrase", "secret", "token", "apikey", "accesskey",
                                                "secretkey", "privatekey", "credential", "credentials"};
  char w[64];
  for (std::size_t i = 0; i < line.size();) {
    auto letter = [&](std::size_t k) { return ((line[k] | 0x20) >= 'a' && (line[k] | 0x20) <= 'z'); };
    if (!letter(i)) { ++i; continue; }
    std::size_t j = i;
    while (j < line.size() && letter(j)) ++j;
    const std::size_t n = j - i;
    if (n >= 3 && n <= sizeof w) {
      for (std::size_t k = 0; k < n; ++k) w[k] = static_cast<char>(line[i + k] | 0x20);
      const std::string_view v(w, n);
      for (auto e : exact)
        if (v == e) return true;
      for (auto x : suffix)
        if (v.size() >= x.size() && v.substr(v.size() - x.size()) == x) return true;
    }
    i = j;
  }
  return false;
}

// Shannon entropy of `s` in bits per character.
double shannon_entropy(std::string_view s) {
  std::array<int, 256> n{};
  for (unsigned char c : s) ++n[c];
  double h = 0;
  for (int c : n)
    if (c) {
      const double p = static_cast<double>(c) / static_cast<double>(s.size());
      h -= p * std::log2(p);
    }
  return h;
}

// A run of 20 characters or more that looks random (the approach of detect-secrets' and gitleaks' entropy
// checks): letters and digits mixed, 3.5 bits a character or more; all-hex runs count from 32 characters
// (W&B keys, hex digests). Dotted lower-case names (hosts, modules) and paths are not taken.
bool looks_random(std::string_view r) {
  if (r.size() < 20) return false;
  bool upper = false, lower = false, digit = false, hex = true;
  int slashes = 0, dots = 0;
  for (char c : r) {
    upper |= c >= 'A' && c <= 'Z';
    lower |= c >= 'a' && c <= 'z';
    digit |= c >= '0' && c <= '9';
    hex &= (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    slashes += c == '/';
    dots += c == '.';
  }
  if (!digit || !(upper || lower)) return false;
  if (dots && !upper) return false;            // gpu-a17.cluster.example.com, torch.distributed.x
  if (dots && slashes) return false;           // a path with a file name
  if (hex) return r.size() >= 32 && shannon_entropy(r) >= 3.0;
  if (!(upper && lower) && r.size() < 32) return false;
  return shannon_entropy(r) >= 3.5;
}
}  // namespace

void masker::mask_context(std::string& line) {
  auto& im = *impl_;
  auto& st = im.st;
  // replaces line[b, b + n) by a secret token; returns the token's length (0 when nothing was replaced)
  auto mask_span = [&](std::size_t b, std::size_t n, const char* kind) -> std::size_t {
    std::string v = line.substr(b, n);
    if (v.empty() || im.produced.count(v) || v.find('<') != std::string::npos) return 0;
    bool is_new = false;
    std::string tok = im.token(kind, "secret", true, v, &is_new);
    if (im.bound_hit) counts_["over_table_bound"] = 1;
    line.replace(b, n, tok);
    ++counts_[kind];
    return tok.size();
  };
  re2::StringPiece g[4];
  // A URL-encoded key name (pass%77ord=, api%5Fkey=, a key in an encoded query: password%3Dv): decoded
  // (twice: %2577 is %77 encoded), then asked whether it ends in a secret word.
  if (line.find('%') != std::string::npos) {
    static const re2::RE2 enc(R"(([\w.%-]*%[0-9A-Fa-f]{2}[\w.%-]*?)(?:\s*[=:]\s*|%3[Dd]|%3[Aa])([^\s&;,"'<>]+))");
    auto decode = [](std::string_view k) {
      std::string out;
      for (std::size_t i = 0; i < k.size(); ++i) {
        auto hexv = [](char c) { return c >= '0' && c <= '9' ? c - '0' : (c | 0x20) >= 'a' && (c | 0x20) <= 'f' ? (c | 0x20) - 'a' + 10 : -1; };
        if (k[i] == '%' && i + 2 < k.size() + 0 && hexv(k[i + 1]) >= 0 && hexv(k[i + 2]) >= 0) {
          out += static_cast<char>(hexv(k[i + 1]) * 16 + hexv(k[i + 2]));
          i += 2;
        } else {
          out += k[i];
        }
      }
      return out;
    };
    for (std::size_t pos = 0; pos < line.size() && enc.Match(line, pos, line.size(), re2::RE2::UNANCHORED, g, 3);) {
      const std::string key = decode(decode(std::string_view(g[1].data(), g[1].size())));
      const std::size_t vb = static_cast<std::size_t>(g[2].data() - line.data()), vn = g[2].size();
      std::size_t next = vb + vn;
      if (re2::RE2::PartialMatch(key, secret_name())) next = vb + std::max<std::size_t>(mask_span(vb, vn, "encoded_key"), 1);
      pos = next;
    }
  }
  // better_exceptions / loguru's diagnose: "│     └ 'value'" points at a variable of the line above; a
  // string value is masked (the variable's name is on a line the masker may not have read).
  if (line.find("\xe2\x94\x94") != std::string::npos) {
    static const re2::RE2 ptr(R"(\x{2514}[\x{2500}\s]*((?:[bBrRuUfF]{1,2})?(?:'[^']+'?|"[^"]+"?)))");
    for (std::size_t pos = 0; pos < line.size() && ptr.Match(line, pos, line.size(), re2::RE2::UNANCHORED, g, 2);) {
      const std::size_t vb = static_cast<std::size_t>(g[1].data() - line.data());
      pos = vb + std::max<std::size_t>(mask_span(vb, g[1].size(), "variable_value"), 1);
    }
  }
  // A nested block under a secret's name (YAML config dumps of Hydra, OmegaConf, DeepSpeed):
  //   credentials:          every line indented deeper is the secret's: "key: v" has v masked, a list
  //     user: svc            item or a block scalar's line has all of it masked; the first line indented
  //     key: AbC...          no deeper ends the block (so does a 64th line)
  // (only inside a block, or on a line whose last character can end a parent: "name:", "name: |")
  const std::size_t last_nonblank = line.find_last_not_of(" \t");
  const char tail = last_nonblank == std::string::npos ? '\0' : line[last_nonblank];
  if (st.nest_indent >= 0 || tail == ':' || tail == '|' || tail == '>' || tail == '-') {
    static const re2::RE2 kv(std::string("(?:") + kLauncherPrefix + R"()([ \t]*)(?:-[ \t]+)?["']?([\w.-]+)["']?[ \t]*:(?:[ \t]+(.*?))?[ \t]*$)");
    static const re2::RE2 any(std::string("(?:") + kLauncherPrefix + R"()([ \t]*)(\S.*?)[ \t]*$)");
    const bool is_kv = kv.Match(line, 0, line.size(), re2::RE2::ANCHOR_BOTH, g, 4);
    const int indent = is_kv ? static_cast<int>(g[1].size()) : -1;
    // (decided before a value is masked: the replacement moves the line, and g[] points into it)
    const bool parent = is_kv && (!g[3].data() || g[3].empty() || g[3] == "|" || g[3] == ">" || g[3] == "|-" || g[3] == ">-") &&
                        re2::RE2::PartialMatch(re2::StringPiece(g[2].data(), g[2].size()), secret_name());
    if (st.nest_indent >= 0) {
      re2::StringPiece a[3];
      if (is_kv && indent > st.nest_indent) {
        if (g[3].data() && !g[3].empty()) mask_span(static_cast<std::size_t>(g[3].data() - line.data()), g[3].size(), "nested_secret");
      } else if (!is_kv && any.Match(line, 0, line.size(), re2::RE2::ANCHOR_BOTH, a, 3) && static_cast<int>(a[1].size()) > st.nest_indent) {
        mask_span(static_cast<std::size_t>(a[2].data() - line.data()), a[2].size(), "nested_secret");
      } else if (!is_kv && line.find_first_not_of(" \t") == std::string::npos) {
        // a blank line does not end the block
      } else {
        st.nest_indent = -1;
      }
      if (st.nest_indent >= 0 && ++st.nest_lines >= impl::kMaxNestLines) st.nest_indent = -1;
    }
    if (parent) {
      st.nest_indent = indent;
      st.nest_lines = 0;
    }
  }
  // A long random-looking token anywhere on a line that names a secret word.
  if (line.size() >= 20 && has_secret_word(line)) {
    auto value_char = [](char c) {
      return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') || c == '+' || c == '/' || c == '=' ||
             c == '_' || c == '.' || c == '~' || c == '-';
    };
    for (std::size_t i = 0; i < line.size();) {
      if (!value_char(line[i])) { ++i; continue; }
      std::size_t j = i;
      while (j < line.size() && value_char(line[j])) ++j;
      std::size_t b = i, e = j;
      while (e > b && (line[e - 1] == '.' || line[e - 1] == '-')) --e;  // a sentence's end
      const bool in_token = b > 0 && line[b - 1] == '<';
      if (!in_token && looks_random(std::string_view(line).substr(b, e - b))) {
        const std::size_t n = mask_span(b, e - b, "high_entropy");
        i = n ? b + n : j;
      } else {
        i = j;
      }
    }
  }
  // A secret's flag or name ends the line: its value is the next line's first word.
  if (!line.empty()) {
    static const re2::RE2 flag_at_end("(?i)(?:--[-\\w.]*(?:" + key_word_alternation() +
                                      R"()|\b(?:sshpass|mysql\w*|docker\s+login)\b.*\s-p|[-\w.]*(?:)" + key_word_alternation() +
                                      R"()=)[ \t]*\\?[ \t]*$)");
    // (the three forms need a '=' at the end, a "--" or a " -p" somewhere: most lines have none)
    const std::size_t end = line.find_last_not_of(" \t\\");
    const char last = end == std::string::npos ? '\0' : line[end];
    if ((last == '=' || line.find("--") != std::string::npos || line.find(" -p") != std::string::npos) &&
        re2::RE2::PartialMatch(line, flag_at_end))
      st.value_next = true;
  }
}

std::string masker::apply(std::string_view line_in) {
  std::string line(line_in);
  if (!opt_.enabled) return line;
  auto& im = *impl_;
  auto& st = im.st;
  // private-key blocks: the BEGIN line, everything up to END, and the END line (at most 200 lines; the
  // state is reset for every new stream). Any BEGIN but a certificate's or a public key's opens one, so a
  // header cut by a wrap ("-----BEGIN OPENSSH PRIV" / "ATE KEY-----") still does. The line's launcher
  // prefix ("0: ", "[1,0]<stdout>:", "[rank3]:") is kept: the rank is still known, the key is not.
  const bool begins = line.find("-----BEGIN") != std::string::npos && line.find("CERTIFICATE") == std::string::npos &&
                      line.find("PUBLIC KEY") == std::string::npos;
  if (st.in_key_block || begins) {
    const bool ends = line.find("-----END") != std::string::npos;
    if (!st.in_key_block) {
      ++counts_["private_key"];
      st.key_block_lines = 0;
    }
    st.in_key_block = !ends && ++st.key_block_lines < 200;
    re2::StringPiece g[1];
    const bool prefixed = launcher_prefix().Match(line, 0, line.size(), re2::RE2::ANCHOR_START, g, 1);
    return (prefixed ? std::string(g[0].data(), g[0].size()) : std::string()) + "<private-key>";
  }
  // A secret that ran to the end of the line may go on at the start of the next (a wrapped line): the
  // leading run of value characters is masked when it makes up the whole line or holds a digit. After a
  // secret's flag or name at the end of a line (--password, sshpass -p, PASSWORD=), the run is its value.
  if (st.secret_at_eol || st.value_next) {
    const bool value = std::exchange(st.value_next, false);
    st.secret_at_eol = false;
    re2::StringPiece g[3];
    if (continuation().Match(line, 0, line.size(), re2::RE2::ANCHOR_START, g, 3)) {
      std::string run(g[1].data(), g[1].size());
      std::size_t after = static_cast<std::size_t>(g[1].data() - line.data()) + g[1].size();
      bool whole = line.find_first_not_of(" \t\\", after) == std::string::npos;
      bool digit = std::any_of(run.begin(), run.end(), [](unsigned char c) { return std::isdigit(c); });
      if ((whole || digit || (value && run[0] != '-')) && !im.produced.count(run)) {
        std::size_t b = static_cast<std::size_t>(g[1].data() - line.data());
        std::string tok = "<secret-" + std::to_string(++im.next["secret"]) + ">";
        im.produced.insert(tok);
        line.replace(b, run.size(), tok);
        ++counts_["secret_continued"];
      }
    }
  }
  // Slurm host lists name every node of the job, in ranges: learn each name, show the masked list.
  if (masks_identity() && (line.find("NODELIST=") != std::string::npos || line.find("NodeList=") != std::string::npos)) {
    static const re2::RE2 nodelist(R"((?:SLURM_(?:JOB_|STEP_)?NODELIST|NodeList)=([A-Za-z][\w.\-\[\],]*))");
    re2::StringPiece g[2];
    std::size_t pos = 0;
    while (pos < line.size() && nodelist.Match(line, pos, line.size(), re2::RE2::UNANCHORED, g, 2)) {
      std::size_t b = static_cast<std::size_t>(g[1].data() - line.data());
      std::string shown;
      std::size_t shown_n = 0;
      for (const auto& h : expand_hostlist(std::string_view(g[1].data(), g[1].size()), limits::kMaxHostlistHosts)) {
        std::string tok = mask_host(h);
        if (shown_n++ < 16) shown += (shown.empty() ? "" : ",") + tok;
      }
      if (shown_n > 16) shown += ",...";
      line.replace(b, g[1].size(), shown);
      pos = b + shown.size();
    }
  }
  // host names learnt from earlier lines, wherever they appear now
  if (std::size_t n = im.replace_learnt_hosts(line)) counts_["hostname"] += n;
  bool learnt_now = false;
  std::vector<int> fired;
  // RE2::Set::Match answers false with kOutOfMemory when its DFA gives up (its state cache filled too
  // fast: https://github.com/google/re2/blob/main/re2/set.cc); then no rule would run on the line and its
  // secrets would be shown. Each rule is asked on its own instead.
  // So is a set that did not compile (a very large custom rule set): Match would fail on every line.
  re2::RE2::Set::ErrorInfo set_error{};
  if (!im.compiled->set_ok ||
      (!im.compiled->set->Match(line, &fired, &set_error) && set_error.kind != re2::RE2::Set::kNoError)) {
    fired.clear();
    for (std::size_t i = 0; i < im.compiled->rules.size(); ++i)
      if (re2::RE2::PartialMatch(line, im.compiled->rules[i].re())) fired.push_back(static_cast<int>(i));
  }
  std::sort(fired.begin(), fired.end());
  // A relaxed rule fired on its looser form: it applies only if its exact regexp matches the same text.
  fired.erase(std::remove_if(fired.begin(), fired.end(), [&](int idx) {
                const auto& r = im.compiled->rules[static_cast<std::size_t>(idx)];
                return r.relaxed && !re2::RE2::PartialMatch(line, r.re());
              }), fired.end());
  for (int idx : fired) {
    const auto& r = im.compiled->rules[static_cast<std::size_t>(idx)];
    std::string out;
    re2::StringPiece in(line);
    std::size_t pos = 0;
    const re2::RE2& rule_re = r.re();
    if (!rule_re.ok()) continue;  // (the set parsed it with the same options; only memory could fail here)
    int ngroups = std::min(1, rule_re.NumberOfCapturingGroups());
    re2::StringPiece g[2];
    while (pos <= line.size() &&
           rule_re.Match(in, pos, line.size(), re2::RE2::UNANCHORED, g, ngroups + 1)) {
      re2::StringPiece target = (ngroups == 1 && g[1].data() != nullptr) ? g[1] : g[0];
      std::size_t t_begin = static_cast<std::size_t>(target.data() - line.data());
      std::size_t m_end = static_cast<std::size_t>(g[0].data() - line.data()) + g[0].size();
      std::string value(target.data(), target.size());
      out.append(line, pos, t_begin - pos);
      std::string lower = value;
      std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
      // Loopback and unspecified addresses identify nobody, and signatures need them ("Using lo:127.0.0.1").
      bool keep = (r.kind == "hostname" && im.keep.count(lower)) ||
                  (r.kind == "ipv4" && (value.rfind("127.", 0) == 0 || value == "0.0.0.0"));
      bool already = im.produced.count(value) > 0;  // a replacement made earlier (this line or before)
      if (keep || already || value.empty()) {
        out += value;
      } else {
        bool is_new = false;
        std::string tok = im.token(r.kind, r.token, r.secret, value, &is_new);
        if (is_new && r.kind == "hostname" && learnable(value) && im.hosts.size() < impl::kMaxLearned) {
          im.learn_host(value, tok);
          learnt_now = true;
        }
        if (im.bound_hit) counts_["over_table_bound"] = 1;
        out += tok;
        ++counts_[r.kind];
      }
      if (r.secret && !keep && t_begin + target.size() == line.size() && value.size() >= 4) st.secret_at_eol = true;
      out.append(line, t_begin + target.size(), m_end - (t_begin + target.size()));
      std::size_t m_begin = static_cast<std::size_t>(g[0].data() - line.data());
      if (m_end == m_begin) {  // an empty match: copy one character and move on
        if (m_end < line.size()) out += line[m_end];
        pos = m_end + 1;
      } else {
        pos = m_end;
      }
    }
    if (pos < line.size()) out.append(line, pos, std::string::npos);
    line = std::move(out);
  }
  // a host learnt on this very line may be mentioned again later in it
  if (learnt_now)
    if (std::size_t n = im.replace_learnt_hosts(line)) counts_["hostname"] += n;
  mask_context(line);
  return line;
}

std::size_t masker::rescan(std::string& text) {
  if (!opt_.enabled) return 0;
  std::size_t n = impl_->replace_learnt_hosts(text);
  if (n) counts_["hostname"] += n;
  return n;
}

std::string masker::original(const std::string& token) const {
  for (const auto& kv : impl_->seen)
    for (const auto& vt : kv.second)
      if (vt.second == token) return vt.first;
  return "";
}

std::string job_key(const std::string& site_key, const std::string& job_id) {
  if (job_id.empty()) return site_key;
  return hmac_hex(site_key, "firstfault-job:" + job_id, 64);
}

result<options> load_config(const std::string& path, options base) {
  try {
    YAML::Node d = YAML::LoadFile(path);
    if (d["enabled"]) base.enabled = d["enabled"].as<bool>();
    if (d["redact"]) base.redact = d["redact"].as<bool>();
    if (d["rules"])
      for (const auto& r : d["rules"]) base.extra.push_back({r["name"] ? r["name"].as<std::string>() : "custom", r["regex"].as<std::string>()});
    if (d["keep_hosts"])
      for (const auto& h : d["keep_hosts"]) base.keep_hosts.push_back(h.as<std::string>());
  } catch (const YAML::Exception& e) {
    return error{path + ": mask config: " + e.what()};
  }
  return base;
}

}  // namespace ff::mask
