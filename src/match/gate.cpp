// The scan-first gate (see firstfault/gate.hpp).
#include "firstfault/gate.hpp"

#include "db_cache.hpp"

#include <hs/hs.h>
#include <re2/filtered_re2.h>
#include <re2/re2.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <set>

namespace ff::match {

std::vector<std::string> required_atoms(const std::string& pattern, int min_len, bool* filtered) {
  re2::FilteredRE2 f(min_len);
  re2::RE2::Options o;
  o.set_log_errors(false);
  int id = 0;
  std::vector<std::string> atoms;
  *filtered = false;
  if (f.Add(pattern, o, &id) != re2::RE2::NoError) return atoms;
  f.Compile(&atoms);
  // FilteredRE2 evaluates the pattern's AND/OR tree of atoms: `passes(S)` says whether the pattern can
  // match a text holding only the atoms S. With none, only an unfiltered pattern passes.
  auto passes = [&](const std::vector<int>& present) {
    std::vector<int> out;
    f.AllPotentials(present, &out);
    return std::find(out.begin(), out.end(), id) != out.end();
  };
  if (atoms.empty() || passes({})) return {};
  // The gate needs a set G of atoms such that the pattern cannot match without one of them: take atoms
  // out of the full set, longest (rarest) first, until the rest no longer lets the pattern pass. For an
  // AND of atoms this is its longest atom alone; for an OR, one atom of each branch.
  std::vector<int> order(atoms.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return atoms[static_cast<std::size_t>(a)].size() > atoms[static_cast<std::size_t>(b)].size(); });
  std::vector<bool> taken(atoms.size(), false);
  std::vector<std::string> gate;
  for (int a : order) {
    taken[static_cast<std::size_t>(a)] = true;
    gate.push_back(atoms[static_cast<std::size_t>(a)]);
    std::vector<int> rest;
    for (std::size_t i = 0; i < atoms.size(); ++i)
      if (!taken[i]) rest.push_back(static_cast<int>(i));
    if (!passes(rest)) break;
  }
  // Drop the atoms that turned out not to be needed (an earlier long atom of a branch that a later one
  // also covers): each is kept only if the pattern could pass without it and the others.
  for (std::size_t k = 0; k + 1 < gate.size();) {
    std::vector<int> rest;
    for (std::size_t i = 0; i < atoms.size(); ++i) {
      bool in_gate = false;
      for (std::size_t j = 0; j < gate.size(); ++j) in_gate |= j != k && atoms[i] == gate[j];
      if (!in_gate) rest.push_back(static_cast<int>(i));
    }
    if (!passes(rest)) gate.erase(gate.begin() + static_cast<long>(k));
    else ++k;
  }
  *filtered = true;
  return gate;
}

std::string within_line(std::string_view re) {
  std::string out;
  out.reserve(re.size() + 16);
  bool in_class = false;
  for (std::size_t i = 0; i < re.size(); ++i) {
    const char c = re[i];
    if (c == '\\' && i + 1 < re.size()) {
      const char e = re[i + 1];
      ++i;
      if (e == 's') {
        out += in_class ? "\\t\\x0b\\x0c\\r " : "[\\t\\x0b\\x0c\\r ]";
      } else if (!in_class && (e == 'W' || e == 'D')) {
        out += e == 'W' ? "[^\\w\\n]" : "[^\\d\\n]";
      } else {
        out += c;
        out += e;
        // \x{...}, \p{...}: the braces with it
        if ((e == 'x' || e == 'p' || e == 'P') && i + 1 < re.size() && re[i + 1] == '{')
          while (i + 1 < re.size() && re[i] != '}') out += re[++i];
      }
      continue;
    }
    if (!in_class && c == '[') {
      in_class = true;
      out += c;
      if (i + 1 < re.size() && re[i + 1] == '^') {
        out += "^\\n";
        ++i;
      }
      if (i + 1 < re.size() && re[i + 1] == ']') out += re[++i];  // a ']' first in a class is a literal
      continue;
    }
    if (in_class && c == '[' && i + 1 < re.size() && re[i + 1] == ':') {  // a POSIX class, [:alpha:]
      if (auto e = re.find(":]", i + 2); e != std::string_view::npos) {
        out.append(re.substr(i, e + 2 - i));
        i = e + 1;
        continue;
      }
    }
    if (in_class && c == ']') in_class = false;
    out += c;
  }
  return out;
}

std::vector<std::string> top_level_elements(std::string_view re, std::string* flags) {
  flags->clear();
  std::size_t i = 0;
  // a leading inline flag group, "(?i)", applies to every element
  if (re.size() >= 4 && re[0] == '(' && re[1] == '?') {
    std::size_t j = 2;
    while (j < re.size() && std::strchr("imsU-", re[j]) && re[j] != '\0') ++j;
    if (j < re.size() && re[j] == ')' && j > 2) {
      *flags = std::string(re.substr(0, j + 1));
      i = j + 1;
    }
  }
  std::vector<std::string> out;
  bool last_literal = false;
  auto skip_class = [&](std::size_t k) -> std::size_t {  // k at '['; returns the index after its ']'
    ++k;
    if (k < re.size() && re[k] == '^') ++k;
    if (k < re.size() && re[k] == ']') ++k;
    while (k < re.size() && re[k] != ']') {
      if (re[k] == '\\') k += 2;
      else if (re[k] == '[' && k + 1 < re.size() && re[k + 1] == ':') {
        auto e = re.find(":]", k + 2);
        if (e == std::string_view::npos) return std::string_view::npos;
        k = e + 2;
      } else ++k;
    }
    return k < re.size() ? k + 1 : std::string_view::npos;
  };
  while (i < re.size()) {
    std::size_t start = i;
    char c = re[i];
    if (c == '|' || c == ')') return {};  // a top-level alternation (or unbalanced): not a concatenation
    if (c == '\\') {
      if (i + 1 >= re.size()) return {};
      char e = re[i + 1];
      if (e == 'Q' || e == 'E' || (e >= '1' && e <= '9')) return {};
      if ((e == 'p' || e == 'P' || e == 'x') && i + 2 < re.size() && re[i + 2] == '{') {
        auto close = re.find('}', i + 3);
        if (close == std::string_view::npos) return {};
        i = close + 1;
      } else if (e == 'x') {
        i += 4;
      } else {
        i += 2;
      }
    } else if (c == '[') {
      i = skip_class(i);
      if (i == std::string_view::npos) return {};
    } else if (c == '(') {
      int depth = 0;
      std::size_t k = i;
      for (; k < re.size(); ++k) {
        if (re[k] == '\\') {
          ++k;
        } else if (re[k] == '[') {
          k = skip_class(k);
          if (k == std::string_view::npos) return {};
          --k;
        } else if (re[k] == '(') {
          ++depth;
        } else if (re[k] == ')' && --depth == 0) {
          break;
        }
      }
      if (k >= re.size()) return {};
      i = k + 1;
    } else {
      ++i;
      while (i < re.size() && (static_cast<unsigned char>(re[i]) & 0xC0) == 0x80) ++i;  // the rest of a UTF-8 character
    }
    if (i > re.size()) return {};
    // its quantifier, if any: * + ? {n} {n,} {n,m}, then a lazy or possessive mark
    std::size_t body_end = i;
    if (i < re.size() && (re[i] == '*' || re[i] == '+' || re[i] == '?')) {
      ++i;
    } else if (i < re.size() && re[i] == '{') {
      auto close = re.find('}', i);
      if (close != std::string_view::npos && re.substr(i + 1, close - i - 1).find_first_not_of("0123456789,") == std::string_view::npos) i = close + 1;
    }
    if (i > body_end && i < re.size() && (re[i] == '?' || re[i] == '+')) ++i;
    std::string_view e = re.substr(start, i - start);
    // Literal characters (and escaped punctuation) in a row make one element: "Xid \(" not five.
    bool literal = i == body_end && ((c != '\\' && c != '[' && c != '(' && !std::strchr(".^$", c)) ||
                                     (c == '\\' && e.size() == 2 && !std::isalnum(static_cast<unsigned char>(e[1]))));
    if (literal && last_literal) out.back() += e;
    else out.emplace_back(e);
    last_literal = literal;
  }
  return out;
}

namespace {
// One element of a run, as left_context_literals() reads it: a set of bytes (a class, an escape, one
// literal byte) with its quantifier, a zero-width assertion, or a group of literal alternatives.
struct run_element {
  enum kind_t { bytes, assertion, alternatives, other } kind = other;
  std::string set;                // bytes: the bytes it matches (lower case under (?i))
  std::vector<std::string> alts;  // alternatives: each literal (lower case under (?i))
  char quant = 0;                 // 0 (once), '?', '*' or '+'
};

bool unescape_byte(std::string_view e, std::size_t& i, char* out) {  // e[i] == '\\'
  if (i + 1 >= e.size()) return false;
  char c = e[i + 1];
  if (std::isalnum(static_cast<unsigned char>(c))) return false;  // \d, \x41 ...: not one literal byte
  *out = c;
  i += 2;
  return true;
}

// The bytes a class or escape matches; empty when it is not a small, plain set (negated, \w, \S, ranges
// over 16 bytes).
std::string byte_set(std::string_view body) {
  static const std::string kSpace = " \t\n\v\f\r", kDigit = "0123456789";
  if (body == "\\s") return kSpace;
  if (body == "\\d") return kDigit;
  if (body.size() == 2 && body[0] == '\\') {
    std::size_t i = 0;
    char c;
    return unescape_byte(body, i, &c) ? std::string(1, c) : std::string();
  }
  if (body.size() < 3 || body.front() != '[' || body.back() != ']' || body[1] == '^') return {};
  std::string out;
  for (std::size_t i = 1; i + 1 < body.size();) {
    char c;
    if (body[i] == '\\') {
      std::string_view esc = body.substr(i, 2);
      if (esc == "\\s" || esc == "\\d") {
        out += byte_set(esc);
        i += 2;
        continue;
      }
      if (!unescape_byte(body, i, &c)) return {};
    } else if (body[i] == '[') {
      return {};  // [:alpha:] and the like
    } else {
      c = body[i++];
    }
    if (i + 2 < body.size() && body[i] == '-' && body[i + 1] != ']') {  // a range c-d
      char d = body[i + 1];
      if (d == '\\' || d < c || d - c > 16) return {};
      for (char x = c; x <= d; ++x) out += x;
      i += 2;
    } else {
      out += c;
    }
  }
  return out.size() <= 16 ? out : std::string();
}

std::vector<run_element> read_run(const std::vector<std::string>& el, bool caseless) {
  auto lower = [&](std::string x) {
    if (caseless) std::transform(x.begin(), x.end(), x.begin(), [](unsigned char c) { return std::tolower(c); });
    return x;
  };
  std::vector<run_element> out;
  for (const auto& e0 : el) {
    std::string_view e = e0;
    char q = 0;
    // a quantifier is the last byte unless a backslash escapes it ("\\+" is a literal plus)
    auto escaped_last = [](std::string_view x) {
      std::size_t n = 0;
      for (std::size_t k = x.size() - 1; k > 0 && x[k - 1] == '\\'; --k) ++n;
      return n % 2 == 1;
    };
    if (e.size() > 1 && std::strchr("?*+", e.back()) && !escaped_last(e)) {
      q = e.back();
      e.remove_suffix(1);
      if (e.size() > 1 && std::strchr("?*+", e.back()) && !escaped_last(e)) return {};  // lazy/possessive
    }
    if (!e.empty() && e.back() == '}' && e.find('{') != std::string_view::npos && e[0] != '\\') return {};  // {n,m}
    run_element r;
    r.quant = q;
    if (e == "\\b" || e == "\\B") {
      r.kind = run_element::assertion;
    } else if (e.substr(0, 3) == "(?:" || (e.size() > 2 && e[0] == '(' && e[1] != '?')) {
      // a group of literal alternatives, or nothing this reads
      std::string_view inner = e.substr(e[1] == '?' ? 3 : 1, e.size() - (e[1] == '?' ? 4 : 2));
      std::string cur;
      for (std::size_t i = 0; i < inner.size();) {
        char c;
        if (inner[i] == '|') {
          r.alts.push_back(lower(cur));
          cur.clear();
          ++i;
        } else if (inner[i] == '\\') {
          if (!unescape_byte(inner, i, &c)) return {};
          cur += c;
        } else if (std::strchr("()[].*+?{}^$", inner[i])) {
          return {};
        } else {
          cur += inner[i++];
        }
      }
      r.alts.push_back(lower(cur));
      if (std::any_of(r.alts.begin(), r.alts.end(), [](const std::string& a) { return a.empty(); })) return {};
      r.kind = run_element::alternatives;
      if (q) return {};  // an optional group: not an anchor, and not read as context
    } else if (e[0] == '[' || (e[0] == '\\' && e.size() == 2)) {
      r.set = lower(byte_set(e));
      if (r.set.empty()) return {};
      r.kind = run_element::bytes;
    } else if (!q) {
      // literal text ("Xid \(" merged by top_level_elements): one element per byte
      for (std::size_t i = 0; i < e.size();) {
        run_element b;
        b.kind = run_element::bytes;
        char c;
        if (e[i] == '\\') {
          if (!unescape_byte(e, i, &c)) return {};
        } else if (std::strchr(".^$|()[]{}", e[i])) {
          return {};
        } else {
          c = e[i++];
        }
        b.set = lower(std::string(1, c));
        out.push_back(b);
      }
      continue;
    } else if (e.size() == 1 && !std::strchr(".^$|()[]{}", e[0])) {
      r.set = lower(std::string(e));
      r.kind = run_element::bytes;
    } else {
      return {};
    }
    out.push_back(std::move(r));
  }
  return out;
}
}  // namespace

std::vector<std::string> left_context_literals(const std::string& run, const std::function<bool(const std::string&)>& usable,
                                               std::size_t max_context, std::size_t max_literals) {
  std::string fl;
  auto el = top_level_elements(run, &fl);
  if (el.empty()) return {};
  auto rs = read_run(el, fl.find('i') != std::string::npos && fl.find('-') == std::string::npos);
  if (rs.empty()) return {};
  // Each element, from the right: a literal ending at element j's right edge needs the bytes that can
  // stand before it. expand() grows `lit` one byte to the left at a time, over every way the elements
  // left of it can end, until `usable` accepts it; it fails (false) when a way reaches the run's first
  // element (the byte before is anything) or more than max_context bytes were needed.
  std::vector<std::string> out;
  // A bound on the work: a long run of optional classes (a --kb pattern) could branch at every element.
  std::size_t calls = 0;
  constexpr std::size_t kMaxCalls = 100000;
  std::function<bool(int, char, const std::string&, std::size_t)> expand = [&](int j, char q, const std::string& lit,
                                                                            std::size_t added) -> bool {
    if (++calls > kMaxCalls) return false;
    if (usable(lit)) {
      if (std::find(out.begin(), out.end(), lit) == out.end()) out.push_back(lit);
      return out.size() <= max_literals;
    }
    if (j < 0 || added >= max_context) return false;
    const auto& e = rs[static_cast<std::size_t>(j)];
    if (e.kind == run_element::assertion) return expand(j - 1, j > 0 ? rs[static_cast<std::size_t>(j - 1)].quant : 0, lit, added);
    if (e.kind != run_element::bytes) return false;
    const char prev_q = j > 0 ? rs[static_cast<std::size_t>(j - 1)].quant : 0;
    if ((q == '?' || q == '*') && !expand(j - 1, prev_q, lit, added)) return false;  // the element matched nothing
    for (char c : e.set) {
      std::string l = std::string(1, c) + lit;
      // after one byte: `?` and once are used up, `*` and `+` may take more
      bool ok = (q == '*' || q == '+') ? expand(j, '*', l, added + 1) : expand(j - 1, prev_q, l, added + 1);
      if (!ok) return false;
    }
    return true;
  };
  std::vector<std::string> best;
  for (std::size_t a = 0; a < rs.size(); ++a) {
    if (rs[a].kind != run_element::alternatives && !(rs[a].kind == run_element::bytes && !rs[a].quant && rs[a].set.size() == 1))
      continue;
    // the anchor: a group of alternatives, or the longest run of single literal bytes ending here
    std::vector<std::string> anchors;
    std::size_t left = a;
    if (rs[a].kind == run_element::alternatives) {
      anchors = rs[a].alts;
    } else {
      if (a + 1 < rs.size() && rs[a + 1].kind == run_element::bytes && !rs[a + 1].quant && rs[a + 1].set.size() == 1) continue;
      std::string lit;
      while (left < rs.size() && rs[left].kind == run_element::bytes && !rs[left].quant && rs[left].set.size() == 1) {
        lit.insert(lit.begin(), rs[left].set[0]);
        if (left == 0) break;
        --left;
      }
      if (!(rs[left].kind == run_element::bytes && !rs[left].quant && rs[left].set.size() == 1)) ++left;
      anchors = {lit};
    }
    out.clear();
    bool ok = true;
    const int j = static_cast<int>(left) - 1;
    for (const auto& an : anchors) ok = ok && expand(j, j >= 0 ? rs[static_cast<std::size_t>(j)].quant : 0, an, 0);
    if (ok && !out.empty() && (best.empty() || out.size() < best.size())) best = out;
  }
  return best;
}

namespace {
std::string escape_literal(const std::string& s) {
  std::string out;
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) || c == ' ' || c == '_') out += c;
    else {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[u >> 4];
      out += hex[u & 15];
    }
  }
  return out;
}
}  // namespace

gate::gate() = default;
gate::~gate() {
  if (db_) hs_free_database(static_cast<hs_database_t*>(db_));
}
gate::gate(gate&& o) noexcept
    : db_(o.db_),
      unfiltered_(std::move(o.unfiltered_)),
      stage_regexps_(std::move(o.stage_regexps_)),
      expressions_(std::move(o.expressions_)),
      literals_(o.literals_),
      from_cache_(o.from_cache_) {
  o.db_ = nullptr;
}
gate& gate::operator=(gate&& o) noexcept {
  if (this != &o) {
    if (db_) hs_free_database(static_cast<hs_database_t*>(db_));
    db_ = o.db_;
    o.db_ = nullptr;
    unfiltered_ = std::move(o.unfiltered_);
    stage_regexps_ = std::move(o.stage_regexps_);
    expressions_ = std::move(o.expressions_);
    literals_ = o.literals_;
    from_cache_ = o.from_cache_;
  }
  return *this;
}

namespace {

// Text known from healthy runs: the lines of kb/_tables/healthy_lines.tsv (progress lines, NCCL start-up
// chatter, framework info: what a healthy run prints by the thousand) and the benign signatures'
// samples. An atom found in one of them is too common to gate on (it would send most lines the full
// way), so that fingerprint goes into the gate as its own regexp. A signature's own samples do not
// count (a benign signature's atoms are in them by construction), and negative examples do not either:
// a negative is a near miss of some failure (same words, other numbers), about as rare in a healthy log
// as the failure, and the gate only decides which lines are read in full, never what they match.
// (Counting own samples and negatives put 161 fingerprints into the gate as prefilter regexps, about
// half of its cost on the bench console; `\b(?:eth|ib|en|...)\w*: Lost carrier` alone cost 3x the
// other 160 together.)
class healthy_text {
 public:
  explicit healthy_text(const kb::library& lib) : table_(lib.signatures.size()), stage_(table_ + 1) {
    if (auto t = lib.tables.find("healthy_lines"); t != lib.tables.end())
      for (const auto& [line, _] : t->second.rows) add(table_, line);
    for (std::size_t i = 0; i < lib.signatures.size(); ++i)
      if (lib.signatures[i].is_benign())
        for (const auto& e : lib.signatures[i].positive) add(i, e.line);
  }
  /// The pseudo-signature of a stage's pattern: only the table counts against it.
  std::size_t stage() const { return stage_; }
  /// Whether some healthy text that counts against pattern `sig` holds `atom` (lower case).
  bool common_for(std::size_t sig, const std::string& atom) const {
    return std::any_of(lower_.begin(), lower_.end(), [&](const auto& h) {
      return counts(sig, h.first) && h.second.find(atom) != std::string::npos;
    });
  }
  /// Whether some healthy text that counts against pattern `sig` matches `re`.
  bool matched_by(std::size_t sig, const re2::RE2& re) const {
    return std::any_of(raw_.begin(), raw_.end(), [&](const auto& h) {
      return counts(sig, h.first) && re2::RE2::PartialMatch(h.second, re);
    });
  }

 private:
  void add(std::size_t sig, std::string h) {
    raw_.emplace_back(sig, h);
    std::transform(h.begin(), h.end(), h.begin(), [](unsigned char c) { return std::tolower(c); });
    lower_.emplace_back(sig, std::move(h));
  }
  // Whether healthy text h (a sample of signature `from`, or a table row) counts against pattern `sig`.
  bool counts(std::size_t sig, std::size_t from) const { return from != sig && (sig != stage_ || from == table_); }
  std::size_t table_, stage_;
  std::vector<std::pair<std::size_t, std::string>> lower_;  // (signature whose sample it is, or table_; lower case)
  std::vector<std::pair<std::size_t, std::string>> raw_;    // the same, as written (for regexps)
};

// A fingerprint without a rare literal is gated by a regexp: the shortest run of its top-level
// concatenation that no healthy text matches (a match of the whole contains a match of every run, so
// the run is a superset gate), else the fingerprint itself. `\bloss\s*[:=]\s*[-+]?(?:nan|inf)\b` hits
// every progress line on "loss" and cost Vectorscan 0.24 s per 100 MB; its run `[-+]?(?:nan|inf)\b`
// is found on none of them.
// `atom_min`: the shortest atom FilteredRE2 may count; `longest_min`: the run's longest atom must be at
// least this long to be taken (else the whole pattern stays).
std::string narrowed(const healthy_text& healthy, std::size_t si, const std::string& fp, int atom_min, std::size_t longest_min) {
  std::string fl;
  auto el = top_level_elements(fp, &fl);
  re2::RE2::Options o;
  o.set_log_errors(false);
  for (std::size_t len = 1; len <= std::min<std::size_t>(el.size(), 6); ++len) {
    std::string best;
    std::size_t best_atom = 0, best_repeats = 0;
    auto assertion = [](const std::string& e) { return e == "\\b" || e == "\\B" || e == "$" || e == "^"; };
    for (std::size_t st = 0; st + len <= el.size(); ++st) {
      // The zero-width assertions next to the run come with it: they cost nothing to keep and let
      // Vectorscan drop most candidates at once ("inf" in INFO fails the \b after it).
      std::size_t b0 = st, b1 = st + len;
      while (b0 > 0 && assertion(el[b0 - 1])) --b0;
      while (b1 < el.size() && assertion(el[b1])) ++b1;
      std::string w = fl;
      for (std::size_t k = b0; k < b1; ++k) w += el[k];
      bool filtered = false;
      auto a = required_atoms(w, atom_min, &filtered);
      if (!filtered) continue;  // no literal for Vectorscan to look for: not cheaper than the whole
      re2::RE2 wre(w, o);
      if (!wre.ok() || re2::RE2::PartialMatch("", wre)) continue;
      if (healthy.matched_by(si, wre)) continue;
      std::size_t longest = 0;
      for (const auto& x : a) longest = std::max(longest, x.size());
      // Ties go to the run with fewer unbounded repeats (`x*`, `x+`): `KW(?:\s+|=)` over `--[-\w.]*KW`,
      // whose `[-\w.]*` before the keywords cost Vectorscan 0.7x the 742 literals' own scan time.
      std::size_t repeats = 0;
      for (std::size_t k = st; k < st + len; ++k) repeats += !el[k].empty() && (el[k].back() == '*' || el[k].back() == '+');
      if (longest >= longest_min && (longest > best_atom || (longest == best_atom && repeats < best_repeats))) {
        best = w;
        best_atom = longest;
        best_repeats = repeats;
      }
    }
    if (!best.empty()) {
      // it must compile where it will run
      const char* c = best.c_str();
      unsigned f = HS_FLAG_PREFILTER | HS_FLAG_MULTILINE, id = 0;
      hs_database_t* db = nullptr;
      hs_compile_error_t* err = nullptr;
      if (hs_compile_multi(&c, &f, &id, 1, HS_MODE_BLOCK, nullptr, &db, &err) == HS_SUCCESS) {
        hs_free_database(db);
        return best;
      }
      hs_free_compile_error(err);
    }
  }
  return fp;
}

// The atoms as caseless literals for the gate. An atom that holds another atom adds nothing (all are
// caseless): every line it would hit, the shorter one hits already. Fewer literals make Vectorscan's
// literal matcher's pass cheaper. Returns how many were added.
std::size_t add_literals(const std::set<std::string>& atoms, std::vector<std::string>& exprs, std::vector<unsigned>& flags) {
  std::size_t literals = 0;
  for (const auto& a : atoms) {
    const bool holds_another = std::any_of(atoms.begin(), atoms.end(), [&](const std::string& b) {
      return b.size() < a.size() && a.find(b) != std::string::npos;
    });
    if (holds_another) continue;
    exprs.push_back(escape_literal(a));
    flags.push_back(HS_FLAG_CASELESS | HS_FLAG_MULTILINE);
    ++literals;
  }
  return literals;
}

}  // namespace

bool gate::run_fact_only(const kb::signature& s) {
  if (!s.is_benign() || !s.has_tag("fact.run")) return false;
  // a tag that makes the pipeline's full path do more than keep a fact line (work lines, success ends,
  // handled exceptions, restarts) leaves it an ordinary benign signature
  return std::none_of(s.tags.begin(), s.tags.end(), [](const std::string& t) {
    return t.starts_with("activity.") || t.starts_with("event.") || t.starts_with("outcome.");
  });
}

result<gate> gate::build(const kb::library& lib, const std::vector<std::string>& extra, bool use_cache) {
  gate g;
  // Building the gate (atoms of every fingerprint, then the Vectorscan compile) costs about a second, so
  // like the matcher's database it is cached on disk, keyed by the library's content hash, the stages'
  // gate patterns and this code's version (bump kVersion when the atom selection changes).
  constexpr const char* kVersion = "gate-v10";  // v10: regexps within a line (within_line); v3: MULTILINE, every match reported; v4: own samples not common; v5: runs; v6: stage runs; v7: left-context literals; v8: no literal holding another; v9: run-fact atoms
  std::string key_text = kVersion + std::string("\n") + lib.content_hash;
  for (const auto& e : extra) key_text += "\n" + e;
  std::string cache =
      use_cache ? detail::cache_path("gate-" + std::to_string(std::hash<std::string>{}(key_text)) + "-" + std::to_string(key_text.size())) : "";
  hs_database_t* cached = nullptr;
  if (!cache.empty() && detail::load_cached(cache, &cached)) {
    g.db_ = cached;
    g.from_cache_ = true;
    return g;
  }
  const healthy_text healthy(lib);
  const std::size_t kStage = healthy.stage();
  auto common_for = [&](std::size_t sig, const std::string& atom) { return healthy.common_for(sig, atom); };
  std::set<std::string> atoms;
  std::vector<std::string> exprs;
  std::vector<unsigned> flags;
  for (std::size_t si = 0; si < lib.signatures.size(); ++si) {
    const auto& s = lib.signatures[si];
    for (const auto& fp : s.fingerprints) {
      bool filtered = false;
      auto a = required_atoms(fp, kMinAtom, &filtered);
      // A run-fact signature reads healthy lines by design (a tqdm bar, Megatron's iteration line): its
      // atoms are common, and so is every run of it, so the common-atom rule put the whole fingerprint in
      // as a regexp, which the gate must still hit on every such line: it added about a fifth to the
      // gate's scan of the bench console (callgrind, bench/floor.cpp). Its own atoms gate it instead; the
      // pipeline tells such hits apart with a second gate (pipeline::engine::fact_free_gate).
      const bool fact = run_fact_only(s);
      if (!filtered || (!fact && std::any_of(a.begin(), a.end(), [&](const std::string& x) { return common_for(si, x); }))) {
        // No rare literal: a regexp goes into the gate (Vectorscan prefilter, a superset).
        std::string n = narrowed(healthy, si, fp, kMinStageAtom, 0);
        // ... unless the run's literal, with the bytes that can stand before it, makes literals that
        // healthy text does not hold: `[:=]\s*[-+]?(?:nan|inf)\b` is found by "inf" in every "INFO",
        // and that candidate check cost Vectorscan half as much as the 742 literals' whole scan; "=inf",
        // ": inf", "-inf" ... are rare.
        auto lits = left_context_literals(n, [&](std::string x) {
          std::transform(x.begin(), x.end(), x.begin(), [](unsigned char c) { return std::tolower(c); });
          return x.size() >= static_cast<std::size_t>(kMinAtom) && !common_for(si, x);
        });
        if (!lits.empty()) {
          g.unfiltered_.push_back(s.name + ": " + n + (n == fp ? "" : "  (a run of: " + fp + ")") + "  as " +
                                  std::to_string(lits.size()) + " literals with the bytes before them");
          for (auto& x : lits) {
            std::transform(x.begin(), x.end(), x.begin(), [](unsigned char c) { return std::tolower(c); });
            atoms.insert(x);
          }
          continue;
        }
        g.unfiltered_.push_back(s.name + ": " + n + (n == fp ? "" : "  (a run of: " + fp + ")"));
        exprs.push_back(n);
        flags.push_back(HS_FLAG_PREFILTER | HS_FLAG_MULTILINE);
        continue;
      }
      atoms.insert(a.begin(), a.end());
    }
  }
  // The stages' patterns (record anchors, error words, mask rules) are gated the same way, by their
  // required literals, down to 3 bytes (a token prefix such as "hf_" or "sk-" is all some secrets have);
  // those without such literals, or with one found in the healthy-lines table, stay regexps. (Benign
  // samples do not count here: they hold error words by design, and the error words are needed anyway.)
  std::vector<std::string> extra_regexps;
  for (const auto& e : extra) {
    bool filtered = false;
    auto a = required_atoms(e, kMinStageAtom, &filtered);
    if (!filtered || std::any_of(a.begin(), a.end(), [&](const std::string& x) { return common_for(kStage, x); })) {
      // Narrowed like a fingerprint, to a run with an atom of kMinAtom bytes at least: the command-line
      // secret rule `--[-\w.]*(?:password|...|token|...)` whole cost Vectorscan as much as the 742
      // literals together on the bench console (its leading `--[-\w.]*` keeps the keywords from being
      // the literals it looks for); its run of keywords costs nothing measurable. The table holds line
      // bodies, not prefixes, so a run of short atoms (`\d\] ` of a host prefix rule) would pass it and
      // hit every NCCL line: hence the kMinAtom floor. Atoms are counted down to 2 bytes here because
      // RE2 factors alternations (`secret|sig|session` becomes `s(?:ecret|ig|ession)`) and, past 16
      // strings, keeps the 2-byte remainder `ig` as an atom, which a 3-byte floor would treat as "no
      // literal" for the whole keyword list.
      extra_regexps.push_back(narrowed(healthy, kStage, e, 2, kMinAtom));
      continue;
    }
    atoms.insert(a.begin(), a.end());
  }
  g.literals_ = add_literals(atoms, exprs, flags);
  std::sort(extra_regexps.begin(), extra_regexps.end());  // narrowed runs of several rules may coincide
  extra_regexps.erase(std::unique(extra_regexps.begin(), extra_regexps.end()), extra_regexps.end());
  g.stage_regexps_ = extra_regexps;
  for (const auto& e : extra_regexps) {
    exprs.push_back(e);
    flags.push_back(HS_FLAG_PREFILTER | HS_FLAG_MULTILINE);
  }
  // The regexps read a block of lines at once (hit_lines): a class holding '\n' let `\s+(?:\S*/)?python`
  // (a ps process list's D state) run from the end of one line into the next "[default1]:/usr/lib/
  // python3/..." and hit every Python warning line of a console after a torchrun tag (found when the
  // run-fact gate read such lines as a block too: 1,720 more lines took the full path on 175,000).
  for (std::size_t i = 0; i < exprs.size(); ++i)
    if (flags[i] & HS_FLAG_PREFILTER) exprs[i] = within_line(exprs[i]);
  std::vector<const char*> c;
  std::vector<unsigned> ids;
  for (std::size_t i = 0; i < exprs.size(); ++i) {
    c.push_back(exprs[i].c_str());
    ids.push_back(static_cast<unsigned>(i));
    g.expressions_.emplace_back(exprs[i], flags[i]);
  }
  if (c.empty()) return g;
  hs_database_t* db = nullptr;
  hs_compile_error_t* err = nullptr;
  if (hs_compile_multi(c.data(), flags.data(), ids.data(), static_cast<unsigned>(c.size()), HS_MODE_BLOCK, nullptr, &db, &err) !=
      HS_SUCCESS) {
    std::string msg = err && err->message ? err->message : "compile failed";
    std::string which = err && err->expression >= 0 ? exprs[static_cast<std::size_t>(err->expression)] : "";
    hs_free_compile_error(err);
    return error{"the scan gate does not compile in Vectorscan: " + msg + (which.empty() ? "" : ": " + which), errc::knowledge_base};
  }
  if (!cache.empty()) detail::store_cached(cache, db);
  g.db_ = db;
  return g;
}

gate_scratch::gate_scratch(const gate& g) {
  if (!g.db_) return;
  hs_scratch_t* s = nullptr;
  alloc_rc_ = hs_alloc_scratch(static_cast<hs_database_t*>(g.db_), &s);
  hs_ = alloc_rc_ == HS_SUCCESS ? s : nullptr;
}

gate_scratch::~gate_scratch() {
  if (hs_) hs_free_scratch(static_cast<hs_scratch_t*>(hs_));
}

result<bool> gate::hit(std::string_view line, gate_scratch& s) const {
  if (!db_) return true;
  if (!s.hs_) return error{"Vectorscan could not allocate the gate's scratch space (hs_alloc_scratch returned " + std::to_string(s.alloc_rc_) + ")", errc::engine};
  bool any = false;
  auto on_match = [](unsigned, unsigned long long, unsigned long long, unsigned, void* ctx) -> int {
    *static_cast<bool*>(ctx) = true;
    return 1;  // one hit is enough: stop the scan
  };
  hs_error_t rc = hs_scan(static_cast<hs_database_t*>(db_), line.data(),
                          static_cast<unsigned>(std::min<std::size_t>(line.size(), 0xFFFFFFFFu)), 0,
                          static_cast<hs_scratch_t*>(s.hs_), on_match, &any);
  if (rc != HS_SUCCESS && rc != HS_SCAN_TERMINATED) return error{"Vectorscan gate scan failed (hs_scan returned " + std::to_string(rc) + ")", errc::engine};
  return any;
}

status gate::hit_lines(std::string_view block, const std::vector<std::uint32_t>& starts, std::vector<char>& hit,
                       gate_scratch& s) const {
  hit.assign(starts.size(), db_ ? 0 : 1);
  if (!db_ || starts.empty()) return ok();
  if (!s.hs_) return error{"Vectorscan could not allocate the gate's scratch space (hs_alloc_scratch returned " + std::to_string(s.alloc_rc_) + ")", errc::engine};
  if (block.size() > 0xFFFFFFFFu) return error{"gate block larger than 4 GiB", errc::engine};
  struct ctx_t {
    const std::vector<std::uint32_t>& starts;
    std::vector<char>& hit;
    std::size_t block_size;
    std::size_t line = 0, line_begin = 0, line_end = 0;  // the line of the last match (most matches repeat it)
  } ctx{starts, hit, block.size()};
  ctx.line_end = starts.size() > 1 ? starts[1] : block.size();
  // Matches are not reported in offset order (Vectorscan does not promise it): each end offset is placed
  // by binary search, with the last match's line as a shortcut.
  auto on_match = [](unsigned, unsigned long long, unsigned long long to, unsigned, void* p) -> int {
    auto& c = *static_cast<ctx_t*>(p);
    std::size_t at = to > 0 ? static_cast<std::size_t>(to - 1) : 0;  // the match's last byte
    if (at < c.line_begin || at >= c.line_end) {
      auto it = std::upper_bound(c.starts.begin(), c.starts.end(), static_cast<std::uint32_t>(at));
      c.line = it == c.starts.begin() ? 0 : static_cast<std::size_t>(it - c.starts.begin()) - 1;
      c.line_begin = c.starts[c.line];
      c.line_end = c.line + 1 < c.starts.size() ? c.starts[c.line + 1] : c.block_size;
    }
    c.hit[c.line] = 1;
    return 0;
  };
  hs_error_t rc = hs_scan(static_cast<hs_database_t*>(db_), block.data(), static_cast<unsigned>(block.size()), 0,
                          static_cast<hs_scratch_t*>(s.hs_), on_match, &ctx);
  if (rc != HS_SUCCESS) return error{"Vectorscan gate scan failed (hs_scan returned " + std::to_string(rc) + ")", errc::engine};
  return ok();
}

}  // namespace ff::match
