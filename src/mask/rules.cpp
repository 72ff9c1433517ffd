// The masker's rule table (rules.hpp) and the secret formats of kb/_tables/secret_formats.tsv.
#include "rules.hpp"

#include "firstfault/mask.hpp"

#include "kb_data/tables.hpp"

#include <algorithm>
#include <cctype>
#include <set>
#include <utility>

namespace ff::mask {
namespace detail {

namespace {

// "NAME: " at the start of a console line, NAME holding a host word (kb/_tables/host_words.tsv, prefix).
const std::string& console_prefix_host_rule() {
  static const std::string re =
      R"(^((?:[a-z0-9]+-)*(?:)" + kb::detail::words_where(kb::detail::embedded_table("host_words"), "prefix") + R"()-?[a-z0-9]+): )";
  return re;
}

}  // namespace

// Order matters: secrets before the generic identity rules that could eat part of them.
std::span<const rule_def> rules() {
  static const rule_def kRules[] = {
      // the secret formats of kb/_tables/secret_formats.tsv, in the file's order (secret_formats())
      {"secret_formats", "", true, nullptr},
      // key = value in every quoting, built from the key words of kb/_tables/secret_keys.tsv
      {"secret_assignment", "secret", true, nullptr},
      {"email", "email", false, R"(\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b)"},
      {"mac", "mac", false, R"(\b(?:[0-9a-fA-F]{2}:){5}[0-9a-fA-F]{2}\b)"},
      {"mac", "mac", false, R"(\b(?:[0-9a-fA-F]{2}-){5}[0-9a-fA-F]{2}\b)"},
      {"ipv6", "ip6", false, R"((?i)(?:\b(?:[0-9a-f]{1,4}:){7}[0-9a-f]{1,4}\b|\b[0-9a-f]{1,4}(?::[0-9a-f]{1,4}){1,6}::(?:[0-9a-f]{1,4}(?::[0-9a-f]{1,4})*)?\b(?:%\w+)?|\b[0-9a-f]{1,4}::[0-9a-f]{1,4}(?::[0-9a-f]{1,4})+\b(?:%\w+)?|::ffff:\d{1,3}(?:\.\d{1,3}){3}\b|\b[0-9a-f]{0,3}\d[0-9a-f]{0,3}::[0-9a-f]{1,4}\b(?:%\w+)?))"},
      {"ipv4", "ip", false, R"(\b(?:25[0-5]|2[0-4]\d|1?\d?\d)(?:\.(?:25[0-5]|2[0-4]\d|1?\d?\d)){3}\b)"},
      // host names in known positions: NCCL "host:pid:tid [dev]", syslog, pdsh, torchelastic, Slurm, TCPStore
      {"hostname", "node", false, R"((?:^|[\s\]>:])([A-Za-z][\w.-]*):\d+:\d+ \[\d+\])"},
      {"hostname", "node", false, R"(^(?:[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d|\d{4}-\d\d-\d\dT\S+) ([A-Za-z][\w.-]*) [\w./@-]+(?:\[\d+\])?: )"},
      // the host words are data: kb/_tables/host_words.tsv, column prefix
      {"hostname", "node", false, console_prefix_host_rule().c_str()},
      // "host: name" (torchrun's ChildFailedError table) and "host=name" (DeepSpeed's launcher: "but
      // host=... was not reachable via ssh", deepspeed/launcher/runner.py; also --host=name)
      {"hostname", "node", false, R"(\bhost\s*[:=]\s*([A-Za-z][\w.-]*))"},
      {"hostname", "node", false, R"(^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] ([A-Za-z][\w.-]*) \[\d+\] )"},
      {"hostname", "node", false, R"(srun: error: ([A-Za-z][\w.-]*[\w]):)"},
      {"hostname", "node", false, R"((?:\bON |Node failure on |NodeList=|[Nn]odelist[=:] ?|hostname[=:] ?)([A-Za-z][\w.-]*[\w])\b)"},
      {"hostname", "node", false, R"((?:addr|remote)=\[([A-Za-z][\w.-]*)\])"},
      // MASTER_ADDR=host, c10d "[host]:29500" and "(host, 29500)", Kubernetes pod/NAME
      {"hostname", "node", false, R"(\b(?:MASTER_ADDR|MASTER_HOST|RDZV_ENDPOINT|PET_MASTER_ADDR)=([A-Za-z][\w.-]*[\w]))"},
      // c10d "[host]:29500" (not a launcher tag before a time, "[default1]:2026-12-01")
      {"hostname", "node", false, kBracketHostPort},
      {"hostname", "node", false, R"(connect to \(([A-Za-z][\w.-]*[\w]), \d{2,5}\))"},
      {"hostname", "node", false, R"(\bpods?/([a-z0-9][a-z0-9.-]*[a-z0-9]))"},
      {"hostname", "node", false, R"((?i)\b((?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+(?:com|net|org|io|edu|gov|ai|internal|local|lan|cluster|corp|cloud|compute))\b)"},
      {"home_user", "user", false, R"((?:/home/|/Users/|/scratch/|/gpfs/home/)([^/\s:'"]+))"},
      // GPU UUIDs (nvidia-smi -L, NVML, DCGM), serial numbers beside their name (nvidia-smi -q "Serial Number",
      // "serial=..."), cloud account ids in ARNs (arn:aws:iam::123456789012:role/x) and beside their name
      {"gpu_uuid", "gpu", false, R"((?i)\b(?:GPU|MIG)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b)"},
      {"serial", "serial", false, R"((?i)\bserial(?:[ _-]?(?:number|no))?\s*[:=]\s*([A-Za-z0-9-]{6,40}))"},
      {"account_id", "account", false, R"(\barn:aws[\w-]*:[\w-]*:[\w-]*:(\d{12}):)"},
      {"account_id", "account", false, R"((?i)\b(?:account[ _-]?id|aws_account_id|subscription[ _-]?id|project[ _-]?number)["']?\s*[:=]\s*["']?([\w-]{6,64}))"},
      // user names beside their keyword: USER=alice, 'user': 'svc', SLURM_JOB_USER=bob, UserId=bob(1001)
      // (Slurm's scontrol), "for user alice", and user@host of ssh/scp (an email was masked before this)
      {"user_assignment", "user", false,
       R"((?i)\b(?:user(?:name)?|login|logname|slurm_job_user|job_user|userid|owner)["']?\s*[=:]\s*["']?([A-Za-z_][\w.-]{0,31}[\w]|[A-Za-z_]))"},
      {"user_phrase", "user", false, R"((?i)\b(?:for|by|as|of) user ([A-Za-z_][\w.-]{0,31}[\w]))"},
      {"user_option", "user", false, R"(\b(?:squeue|sacct|scancel|sshare|sprio|scontrol)\b[^\n]*?\s(?:-u|--user[= ]|--uid[= ])\s*([A-Za-z_][\w.-]{0,31}))"},
      {"user_at_host", "user", false, R"((?:^|[\s'"(=,\[<])([a-z_][a-z0-9_.-]{0,31})@[A-Za-z][\w-]*)"},
  };
  return kRules;
}

const std::vector<std::string>& public_hosts() {
  static const std::vector<std::string> hosts = [] {  // kb/_tables/public_hosts.tsv
    std::vector<std::string> out;
    const auto& t = kb::detail::embedded_table("public_hosts");
    if (const int w = t.column("word"); w >= 0)
      for (const auto& r : t.rows) out.push_back(r[static_cast<std::size_t>(w)]);
    return out;
  }();
  return hosts;
}

const std::string& secret_key_words() {
  // kb/_tables/secret_keys.tsv, column regex, in file order
  static const std::string words = kb::detail::regex_alternation(kb::detail::embedded_table("secret_keys"));
  return words;
}

// The RE2 rules for "a key that ends in a secret word, then its value", from secret_key_words().
// Group 1 is the value. A quoted value may hold spaces; a bare value ends at white space, a quote, a
// backslash (escaped JSON), or a separator of connection strings and URLs (, ; & }).
std::vector<std::string> secret_key_rules() {
  const std::string& words = secret_key_words();
  const std::string q = R"((?:\\?["']))";                       // a quote, or a backslash-escaped one
  // the name ends in a key word, or in a key word and a format suffix (GOOGLE_CREDENTIALS_JSON)
  const std::string key = R"([-\w.]*(?:)" + words + R"()(?:[_-](?:json|b64|base64|data|value))?)";
  // after the key: a closing quote then = : , or => (JSON, dict reprs, argv lists), or = : => unquoted
  const std::string sep = "(?:" + q + R"(\s*(?:=>|[:=,])|\s*(?:=>|[:=]))\s*)";
  const std::string bare = R"(((?:\\/|[^\s"'\\,;&{}\[])+))";  // "key": {...} is a nested object, not a value
  return {
      "(?i)" + key + sep + R"((?:[bBrRuU]{0,2}\\?"([^"\\\n]{1,256})\\?"))",  // "a value with spaces"
      "(?i)" + key + sep + R"((?:[bBrRuU]{0,2}\\?'([^'\\\n]{1,256})\\?'))",  // 'a value' / b'a value'
      "(?i)" + key + sep + "(?:[bBrRuU]{0,2}" + q + ")?" + bare,
      "(?i)--" + key + R"((?:\s+|=))" + bare,                        // --password X
      "(?i)" + key + R"(\s+\.{3,}\s+)" + bare,                      // DeepSpeed's config print: key ...... v
  };
}

// Words that host rules can capture but that are not host names.
bool learnable(const std::string& v) {
  static const std::set<std::string> stop = [] {  // kb/_tables/host_words.tsv, column not_a_host
    std::set<std::string> out;
    const auto& t = kb::detail::embedded_table("host_words");
    const int w = t.column("word"), f = t.column("not_a_host");
    for (const auto& r : t.rows)
      if (w >= 0 && f >= 0 && r[static_cast<std::size_t>(f)] == "yes") out.insert(r[static_cast<std::size_t>(w)]);
    return out;
  }();
  std::string l = v;
  std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return std::tolower(c); });
  return v.size() >= 3 && !stop.count(l);
}

// Expands a Slurm host list ("gpu[001-004,7],login1") into names, at most `max` of them.
std::vector<std::string> expand_hostlist(std::string_view list, std::size_t max) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < list.size() && out.size() < max) {
    std::size_t j = i;
    int depth = 0;
    while (j < list.size() && (depth > 0 || list[j] != ',')) {
      if (list[j] == '[') ++depth;
      if (list[j] == ']') --depth;
      ++j;
    }
    std::string_view item = list.substr(i, j - i);
    i = j + 1;
    auto lb = item.find('['), rb = item.find(']');
    if (lb == std::string_view::npos || rb == std::string_view::npos || rb < lb) {
      if (!item.empty()) out.emplace_back(item);
      continue;
    }
    std::string_view pre = item.substr(0, lb), ranges = item.substr(lb + 1, rb - lb - 1), post = item.substr(rb + 1);
    std::size_t k = 0;
    while (k <= ranges.size() && out.size() < max) {
      std::size_t e = ranges.find(',', k);
      if (e == std::string_view::npos) e = ranges.size();
      std::string_view r = ranges.substr(k, e - k);
      k = e + 1;
      auto dash = r.find('-');
      std::string_view a = r.substr(0, dash), b = dash == std::string_view::npos ? a : r.substr(dash + 1);
      if (a.empty() || b.empty() || a.size() > 9 || b.size() > 9 ||
          !std::all_of(a.begin(), a.end(), ::isdigit) || !std::all_of(b.begin(), b.end(), ::isdigit))
        continue;
      long lo = std::stol(std::string(a)), hi = std::stol(std::string(b));
      for (long n = lo; n <= hi && out.size() < max; ++n) {
        std::string num = std::to_string(n);
        if (num.size() < a.size()) num.insert(0, a.size() - num.size(), '0');
        out.push_back(std::string(pre) + num + std::string(post));
      }
    }
  }
  return out;
}

}  // namespace detail

const std::vector<secret_format>& secret_formats() {
  static const std::vector<secret_format> rows = [] {
    std::vector<secret_format> out;
    const auto& t = kb::detail::embedded_table("secret_formats");  // (kb lint refuses rows of another width)
    const int c[6] = {t.column("name"), t.column("issuer"), t.column("token"), t.column("regex"), t.column("source"), t.column("sample")};
    if (std::any_of(std::begin(c), std::end(c), [](int i) { return i < 0; })) return out;
    for (const auto& r : t.rows) out.push_back({r[c[0]], r[c[1]], r[c[2]], r[c[3]], r[c[4]], r[c[5]]});
    return out;
  }();
  return rows;
}

std::string relax_counted_repeats(std::string_view re, bool* changed, int keep_up_to) {
  *changed = false;
  std::string out;
  out.reserve(re.size());
  std::size_t i = 0;
  auto copy_to = [&](std::size_t end) {  // copies re[i, end) and moves i there
    out.append(re.substr(i, end - i));
    i = end;
  };
  while (i < re.size()) {
    char c = re[i];
    if (c == '\\' && i + 1 < re.size()) {
      char e = re[i + 1];
      if (e == 'Q') {  // a literal run up to \E (or the end)
        auto end = re.find("\\E", i + 2);
        copy_to(end == std::string_view::npos ? re.size() : end + 2);
      } else if ((e == 'x' || e == 'p' || e == 'P') && i + 2 < re.size() && re[i + 2] == '{') {
        auto end = re.find('}', i + 3);
        copy_to(end == std::string_view::npos ? re.size() : end + 1);
      } else {
        copy_to(i + 2);
      }
    } else if (c == '[') {  // a class: ']' first (or after '^') is a member; [:name:] and escapes inside
      std::size_t k = i + 1;
      if (k < re.size() && re[k] == '^') ++k;
      if (k < re.size() && re[k] == ']') ++k;
      while (k < re.size() && re[k] != ']') {
        if (re[k] == '\\') k += 2;
        else if (re[k] == '[' && k + 1 < re.size() && re[k + 1] == ':' && re.find(":]", k + 2) != std::string_view::npos) k = re.find(":]", k + 2) + 2;
        else ++k;
      }
      copy_to(std::min(re.size(), k + 1));
    } else if (c == '{') {
      std::size_t k = i + 1, lo_end;
      while (k < re.size() && std::isdigit(static_cast<unsigned char>(re[k]))) ++k;
      lo_end = k;
      if (lo_end > i + 1 && k < re.size() && re[k] == ',') {
        ++k;
        while (k < re.size() && std::isdigit(static_cast<unsigned char>(re[k]))) ++k;
      }
      // every bound of {n}, {n,} or {n,m} at most keep_up_to (at most 9 digits each, so stol cannot overflow)
      auto small = [&](std::size_t b, std::size_t e) { return e > b && e - b <= 9 && std::stol(std::string(re.substr(b, e - b))) <= keep_up_to; };
      const bool closed = k > lo_end + 1 || lo_end == k;  // {n,m} or {n}: not {n,}
      if (lo_end > i + 1 && k < re.size() && re[k] == '}' && closed && small(i + 1, lo_end) &&
          (k == lo_end || small(lo_end + 1, k))) {
        copy_to(k + 1);
      } else if (lo_end > i + 1 && k < re.size() && re[k] == '}') {
        bool zero = re.substr(i + 1, lo_end - i - 1).find_first_not_of('0') == std::string_view::npos;
        out += zero ? '*' : '+';
        i = k + 1;
        *changed = true;
      } else {
        copy_to(i + 1);  // a literal '{'
      }
    } else {
      copy_to(i + 1);
    }
  }
  return out;
}

}  // namespace ff::mask
