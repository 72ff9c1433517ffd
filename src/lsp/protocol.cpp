// The pure parts of the language server (lsp.hpp): framing, URIs, line widths, a run's diagnostics, hovers.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <istream>
#include <set>

#include <fmt/format.h>

#include "firstfault/lsp.hpp"
#include "firstfault/text.hpp"

namespace ff::lsp {

namespace {
// A header line longer than this is not an LSP header (the stream is not LSP or is corrupt).
constexpr std::size_t kMaxHeaderLine = 1024;
// How many lines of a document looks_like_log() reads, and how much text at most.
constexpr std::size_t kSniffLines = 200, kSniffBytes = 1u << 20;

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string base_name(std::string_view uri) {
  auto q = uri.find_first_of("?#");
  if (q != std::string_view::npos) uri = uri.substr(0, q);
  auto slash = uri.rfind('/');
  return lower(slash == std::string_view::npos ? uri : uri.substr(slash + 1));
}

nlohmann::json range_of(std::uint64_t line0, std::uint32_t width) {
  return {{"start", {{"line", line0}, {"character", 0}}}, {"end", {{"line", line0}, {"character", width}}}};
}

std::string rank_words(const std::vector<int>& ranks) {
  if (ranks.empty()) return "";
  return (ranks.size() == 1 ? "rank " : "ranks ") + text::rank_ranges(ranks);
}

// The width of the line `from` starts with (up to its line end) in UTF-16 units or bytes.
std::uint32_t line_width(std::string_view from, bool utf8) {
  auto end = from.find_first_of("\r\n");
  std::string_view l = from.substr(0, end);
  if (utf8) return static_cast<std::uint32_t>(std::min<std::size_t>(l.size(), UINT32_MAX));
  // UTF-16: a whole 4-byte UTF-8 sequence is two units (a surrogate pair), a whole 2- or 3-byte one is one,
  // and every byte of an invalid sequence is one (editors show each as U+FFFD): never more units than bytes.
  std::uint64_t units = 0;
  auto cont = [&l](std::size_t i) { return i < l.size() && (static_cast<unsigned char>(l[i]) & 0xC0) == 0x80; };
  for (std::size_t i = 0; i < l.size();) {
    auto c = static_cast<unsigned char>(l[i]);
    std::size_t len = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    bool whole = len > 0;
    for (std::size_t k = 1; whole && k < len; ++k) whole = cont(i + k);
    if (!whole) len = 1;
    units += (whole && len == 4) ? 2 : 1;
    i += len;
  }
  return static_cast<std::uint32_t>(std::min<std::uint64_t>(units, UINT32_MAX));
}
}  // namespace

read_status read_message(std::istream& in, std::string& body, std::string& err, std::uint64_t max_bytes) {
  std::optional<std::uint64_t> length;
  std::string line;
  bool any = false;
  for (;;) {
    line.clear();
    int c;
    while ((c = in.get()) != EOF && c != '\n') {
      if (line.size() >= kMaxHeaderLine) {
        err = "a header line longer than 1024 bytes (not an LSP stream)";
        return read_status::error;
      }
      line.push_back(static_cast<char>(c));
    }
    if (c == EOF) {
      if (!any && line.empty()) return read_status::eof;
      err = "the input ended inside a message header";
      return read_status::error;
    }
    any = true;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) break;  // end of the header
    auto colon = line.find(':');
    if (colon == std::string::npos) {
      err = "a header line without ':' (" + text::sanitize(text::prefix_utf8(line, 60)) + ")";
      return read_status::error;
    }
    if (lower(text::trim(std::string_view(line).substr(0, colon))) == "content-length") {
      std::string v(text::trim(std::string_view(line).substr(colon + 1)));
      if (v.empty() || v.size() > 19 || !std::all_of(v.begin(), v.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
        err = "Content-Length is not a number (" + text::sanitize(text::prefix_utf8(v, 40)) + ")";
        return read_status::error;
      }
      length = std::stoull(v);
    }
  }
  if (!length) {
    err = "a message without a Content-Length header";
    return read_status::error;
  }
  if (*length > max_bytes) {
    err = fmt::format("a message of {} bytes, over the {} byte limit", *length, max_bytes);
    return read_status::error;
  }
  // In pieces as the bytes arrive: a header that announces 512 MiB and sends two bytes costs two bytes.
  body.clear();
  constexpr std::size_t kPiece = 1u << 20;
  while (body.size() < *length) {
    std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(kPiece, *length - body.size()));
    std::size_t have = body.size();
    body.resize(have + want);
    in.read(body.data() + have, static_cast<std::streamsize>(want));
    body.resize(have + static_cast<std::size_t>(in.gcount()));
    if (static_cast<std::size_t>(in.gcount()) != want) {
      err = fmt::format("the input ended inside a message ({} of {} bytes)", body.size(), *length);
      return read_status::error;
    }
  }
  return read_status::message;
}

std::string frame(const nlohmann::json& msg) {
  std::string body = msg.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

std::string path_to_uri(std::string_view abs_path) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out = "file://";
  for (unsigned char c : abs_path) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || c == '/') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    }
  }
  return out;
}

std::optional<std::string> uri_to_path(std::string_view uri) {
  constexpr std::string_view scheme = "file://";
  if (uri.size() < scheme.size() || lower(uri.substr(0, scheme.size())) != scheme) return std::nullopt;
  uri.remove_prefix(scheme.size());
  if (uri.substr(0, 9) == "localhost") uri.remove_prefix(9);
  if (uri.empty() || uri.front() != '/') return std::nullopt;  // file://otherhost/...: not a local file
  auto q = uri.find_first_of("?#");
  if (q != std::string_view::npos) uri = uri.substr(0, q);
  std::string out;
  for (std::size_t i = 0; i < uri.size(); ++i) {
    if (uri[i] == '%' && i + 2 < uri.size() && std::isxdigit(static_cast<unsigned char>(uri[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(uri[i + 2]))) {
      out.push_back(static_cast<char>(std::stoi(std::string(uri.substr(i + 1, 2)), nullptr, 16)));
      i += 2;
    } else {
      out.push_back(uri[i]);
    }
  }
  if (out.find('\0') != std::string::npos) return std::nullopt;
  return out;
}

bool looks_like_log(std::string_view uri, std::string_view language_id, std::string_view text,
                    const normalize::prefix_catalog& prefixes) {
  if (language_id == "log" || language_id == "firstfault-log") return true;
  std::string name = base_name(uri);
  for (std::string_view ext : {".log", ".out", ".err", ".stdout", ".stderr"})
    if (name.size() > ext.size() && name.compare(name.size() - ext.size(), ext.size(), ext) == 0) return true;
  for (std::string_view n : {"dmesg", "syslog", "messages", "kern.log"})
    if (name == n) return true;
  // Other names (a .txt paste, an untitled buffer): by content. Source code rarely starts its lines with
  // a time, rank or host prefix; a log usually does on most of them.
  std::string_view head = text.substr(0, std::min(text.size(), kSniffBytes));
  for (std::string_view anchor : {"Traceback (most recent call last):", "torch.distributed.elastic.multiprocessing.errors.ChildFailedError",
                                  "Root Cause (first observed failure)"})
    if (head.find(anchor) != std::string_view::npos) return true;
  std::size_t lines = 0, prefixed = 0, pos = 0;
  while (pos < head.size() && lines < kSniffLines) {
    auto nl = head.find_first_of("\r\n", pos);
    std::string_view l = head.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? head.size() : nl + 1;
    if (text::trim(l).empty()) continue;
    ++lines;
    normalize::line_meta meta;
    std::string clean = text::sanitize(l);
    prefixes.normalize(clean, meta);
    if (meta.n_prefixes > 0) ++prefixed;
  }
  return lines >= 2 && prefixed * 2 >= lines;
}

std::uint32_t line_length(std::string_view text, std::uint64_t line, bool utf8) {
  std::size_t pos = 0;
  for (std::uint64_t i = 0; i < line; ++i) {
    auto nl = text.find_first_of("\r\n", pos);
    if (nl == std::string_view::npos) return 0;
    pos = nl + ((text[nl] == '\r' && nl + 1 < text.size() && text[nl + 1] == '\n') ? 2 : 1);
  }
  return line_width(text.substr(pos), utf8);
}

line_index::line_index(std::string_view text) : text_(text) {
  starts_.push_back(0);
  for (auto nl = text.find_first_of("\r\n"); nl != std::string_view::npos; nl = text.find_first_of("\r\n", starts_.back()))
    starts_.push_back(nl + ((text[nl] == '\r' && nl + 1 < text.size() && text[nl + 1] == '\n') ? 2 : 1));
}

std::uint32_t line_index::width(std::uint64_t line, bool utf8) const {
  return line < starts_.size() ? line_width(text_.substr(starts_[line]), utf8) : 0;
}

std::map<std::string, std::vector<nlohmann::json>> to_diagnostics(const pipeline::run& r, const uri_fn& uri_of,
                                                                  const width_fn& width) {
  std::map<std::string, std::vector<nlohmann::json>> out;
  const auto& d = r.diag;
  auto place = [&](const std::string& source, std::uint64_t line_no) -> std::optional<std::pair<std::string, std::uint64_t>> {
    if (line_no == 0) return std::nullopt;
    auto uri = uri_of(source);
    if (!uri) return std::nullopt;
    return std::make_pair(*uri, line_no - 1);
  };
  auto data = [](std::string_view role, const std::string& sig, const std::string& kind) {
    return nlohmann::json{{"role", role}, {"signature", sig}, {"kind", kind}};
  };
  std::optional<std::pair<std::string, std::uint64_t>> root_at;
  if (d.verdict == correlate::verdict::failure) {
    std::string where;
    if (d.initiating_rank) where = " on rank " + std::to_string(*d.initiating_rank);
    if (d.initiating_host) where += (where.empty() ? " on " : " (") + *d.initiating_host + (where.empty() ? "" : ")");
    std::string msg = "root cause: " + d.title + (d.kind.empty() ? "" : " [" + d.kind + "]") + where;
    if (!d.fix.empty()) msg += "\nfix: " + d.fix.front();
    for (const auto& e : d.evidence_lines) {
      auto at = place(e.source, e.line_no);
      if (!at) continue;
      if (!root_at) root_at = at;
      out[at->first].push_back({{"range", range_of(at->second, width(at->first, at->second))},
                                {"severity", kSeverityError},
                                {"source", "firstfault"},
                                {"code", d.signature.empty() ? d.rule : d.signature},
                                {"message", msg},
                                {"data", data("root", d.signature, d.kind)}});
    }
  }
  for (const auto& g : d.collateral) {
    auto at = place(g.example.source, g.example.line_no);
    if (!at) continue;
    std::string msg = "collateral: " + g.title + (g.kind.empty() ? "" : " [" + g.kind + "]");
    if (!g.ranks.empty()) msg += " on " + rank_words(g.ranks);
    msg += fmt::format(", {} line{}", g.count, g.count == 1 ? "" : "s");
    if (!d.kind.empty()) msg += "; follows from the root cause " + d.kind;
    nlohmann::json diag{{"range", range_of(at->second, width(at->first, at->second))},
                        {"severity", kSeverityInformation},
                        {"source", "firstfault"},
                        {"code", g.signature},
                        {"message", msg},
                        {"data", data("collateral", g.signature, g.kind)}};
    if (root_at)
      diag["relatedInformation"] = nlohmann::json::array(
          {{{"location", {{"uri", root_at->first}, {"range", range_of(root_at->second, width(root_at->first, root_at->second))}}},
            {"message", "root cause: " + d.title}}});
    out[at->first].push_back(std::move(diag));
  }
  if (d.verdict == correlate::verdict::undetermined) {
    for (const auto& s : d.suspicious) {
      auto at = place(s.source, s.line_no);
      if (!at) continue;
      std::string msg = "looks wrong, and no signature explains it";
      if (s.count > 1) msg += fmt::format(" ({} similar lines", s.count) + (s.ranks.empty() ? ")" : " on " + rank_words(s.ranks) + ")");
      else if (s.rank) msg += " (rank " + std::to_string(*s.rank) + ")";
      msg += "; undetermined: " + d.initiating_rule;
      out[at->first].push_back({{"range", range_of(at->second, width(at->first, at->second))},
                                {"severity", kSeverityWarning},
                                {"source", "firstfault"},
                                {"code", "suspicious"},
                                {"message", msg},
                                {"data", data("suspicious", "", "")}});
    }
  }
  return out;
}

nlohmann::json verdict_params(const pipeline::run& r, const std::string& uri) {
  const auto& d = r.diag;
  nlohmann::json j{{"uri", uri}, {"verdict", correlate::to_string(d.verdict)}, {"kind", d.kind}, {"title", d.title},
                   {"signature", d.signature}, {"initiatingRank", nullptr}, {"initiatingHost", nullptr}};
  if (d.initiating_rank) j["initiatingRank"] = *d.initiating_rank;
  if (d.initiating_host) j["initiatingHost"] = *d.initiating_host;
  return j;
}

std::string fix_text(const correlate::diagnosis& d) {
  if (d.verdict != correlate::verdict::failure) return "";
  std::string out = "# " + d.title + (d.kind.empty() ? "" : " [" + d.kind + "]") + "\n";
  auto section = [&out](std::string_view head, const std::vector<std::string>& lines) {
    if (lines.empty()) return;
    out += "\n# ";
    out += head;
    out += "\n";
    for (const auto& l : lines) out += l + "\n";
  };
  section("fix", d.fix);
  section("verify", d.verify);
  section("where the verify commands need values", d.verify_where);
  section("confirm", d.confirm);
  return out;
}

namespace {
// Log-derived or free text in Markdown prose: no code spans, links, images or HTML come out of it.
std::string md_plain(std::string_view s) {
  std::string o;
  for (char c : s) {
    if (c == '\n' || c == '\r') o += ' ';
    else if (c == '`') o += '\'';
    else if (c == '<') o += "&lt;";
    else if (c == '[' || c == ']' || c == '*' || c == '_' || c == '!' || c == '#') {
      o += '\\';
      o += c;
    } else o += c;
  }
  return o;
}

// At most n bytes of s, cut at a character boundary with an ellipsis when it was longer.
std::string clip(std::string_view s, std::size_t n) {
  if (s.size() <= n) return std::string(s);
  std::string_view cut = text::prefix_utf8(s, n > 3 ? n - 3 : 0);
  while (!cut.empty() && cut.back() == '\\') cut.remove_suffix(1);  // never leave an escape dangling
  return std::string(cut) + "\u2026";
}

std::string first_sentence(std::string_view s) {
  auto dot = s.find(". ");
  return std::string(dot == std::string_view::npos ? s : s.substr(0, dot + 1));
}
}  // namespace

std::string entry_url(const kb::signature& s) {
  constexpr std::string_view kBuiltin = "builtin:";
  if (s.file.rfind(kBuiltin, 0) == 0) return std::string(kEntryBaseUrl) + s.file.substr(kBuiltin.size());
  std::error_code ec;
  auto abs = std::filesystem::absolute(s.file, ec);
  return path_to_uri(ec ? s.file : abs.lexically_normal().string());
}

root_facts facts_of(const correlate::diagnosis& d) {
  root_facts f;
  f.summary = d.summary;
  f.fix = d.fix;
  return f;
}

std::string hover_markdown(const nlohmann::json& diagnostic, const kb::signature* sig, const root_facts* root) {
  // The link goes first into the budget, so that whatever is cut it stays.
  std::string tail;
  if (sig) {
    tail = "\n\n[Full entry: " + md_plain(clip(sig->title, 200)) + "](" + clip(entry_url(*sig), 600) + ") \u00b7 `firstfault explain " +
           clip(sig->name, 100) + "`";
  }
  const std::size_t budget = kMaxHoverChars - tail.size();
  std::string md;
  bool full = false;
  auto add = [&](const std::string& piece) {  // whole pieces while they fit, then one cut piece, then nothing
    if (full) return;
    if (md.size() + piece.size() <= budget) return void(md += piece);
    md += clip(piece, budget - md.size());
    full = true;
  };
  std::string message = diagnostic.value("message", "");
  std::string verdict = message.substr(0, message.find('\n'));  // the fix line that follows is shown below
  add("**" + md_plain(clip(verdict, 400)) + "**");
  const std::string role = diagnostic.value("data", nlohmann::json::object()).value("role", "");
  if (sig && role == "root") {
    std::string why = root && !root->summary.empty() ? root->summary : sig->root_cause;
    if (!why.empty()) add("\n\n" + md_plain(clip(why, 500)));
    const auto& fix = root && !root->fix.empty() ? root->fix : sig->fix;
    if (!fix.empty()) {
      add("\n\n**Fix**");
      for (std::size_t i = 0; i < fix.size() && i < kHoverFixLines; ++i) add("\n- " + md_plain(clip(fix[i], 300)));
      if (fix.size() > kHoverFixLines) add(fmt::format("\n- ({} more in the entry)", fix.size() - kHoverFixLines));
    }
  } else if (sig && role == "collateral") {
    add("\n\n" + md_plain(clip(first_sentence(sig->description), 500)));
    add("\n\nThis line follows from the root cause: fix that, not this.");
  }
  return md + tail;
}

}  // namespace ff::lsp
