// The encyclopedia: the knowledge base as HTML or Markdown pages.
#include "firstfault/encyclopedia.hpp"
#include "firstfault/report.hpp"
#include "firstfault/text.hpp"

#include <re2/re2.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>
#include <set>

namespace ff::encyclopedia {

namespace {

std::string esc(const std::string& s) { return text::html_escape(s); }

std::string first_sentence(const std::string& s) {
  std::string t = s;
  std::replace(t.begin(), t.end(), '\n', ' ');
  auto dot = t.find(". ");
  return dot == std::string::npos ? t : t.substr(0, dot + 1);
}

std::string slug(const std::string& s) {
  std::string o;
  for (char c : s) o += (std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::tolower(static_cast<unsigned char>(c))) : '-');
  return o;
}

std::map<std::string, std::string> scale_texts(const kb::library& lib) {
  std::map<std::string, std::string> out;
  for (const auto& [name, text] : lib.encyclopedia_files) {
    try {
      YAML::Node d = YAML::Load(text);
      if (d["categories"])
        for (const auto& kv : d["categories"]) out[kv.first.as<std::string>()] = kv.second.as<std::string>();
    } catch (const YAML::Exception&) {
    }
  }
  return out;
}

// Environment variables named in an entry (NCCL_*, TORCH_*, CUDA_*, PYTORCH_*): what tells entries apart.
std::set<std::string> env_vars(const kb::signature& s) {
  static const re2::RE2 re(R"(\b((?:NCCL|TORCH|CUDA|PYTORCH|GLOO|TORCHELASTIC)_[A-Z0-9_]+))");
  std::set<std::string> out;
  std::string all = s.description;
  for (const auto* v : {&s.fix, &s.verify, &s.confirm, &s.prevention})
    for (const auto& x : *v) all += " " + x;
  for (const auto& c : s.fix_code) all += " " + c.code;
  re2::StringPiece in(all);
  std::string v;
  while (re2::RE2::FindAndConsume(&in, re, &v)) out.insert(v);
  return out;
}

bool is_nccl(const kb::signature& s) {
  return std::find(s.systems.begin(), s.systems.end(), "nccl") != s.systems.end() ||
         std::find(s.tags.begin(), s.tags.end(), "component.nccl") != s.tags.end() || s.name.rfind("nccl_", 0) == 0;
}

// A tiny writer that emits the same structure as HTML or Markdown.
struct writer {
  format f;
  std::string out;
  std::string title;
  std::size_t body_at = 0;  // where the body starts in `out` (HTML)
  std::string ext() const { return f == format::html ? ".html" : ".md"; }
  void h(int level, const std::string& text, const std::string& id = "") {
    if (f == format::html)
      out += "<h" + std::to_string(level) + (id.empty() ? "" : " id=\"" + id + "\"") + ">" + esc(text) + "</h" + std::to_string(level) + ">\n";
    else
      out += "\n" + std::string(static_cast<std::size_t>(level), '#') + " " + text + (id.empty() ? "" : " {#" + id + "}") + "\n\n";
  }
  void p(const std::string& text) { out += f == format::html ? "<p>" + esc(text) + "</p>\n" : text + "\n\n"; }
  void raw_p(const std::string& html, const std::string& md) { out += f == format::html ? "<p>" + html + "</p>\n" : md + "\n\n"; }
  std::string link(const std::string& href, const std::string& text) const {
    return f == format::html ? "<a href=\"" + esc(href) + "\">" + esc(text) + "</a>" : "[" + text + "](" + href + ")";
  }
  void list(const std::vector<std::string>& items, bool code = false, bool items_are_markup = false) {
    if (items.empty()) return;
    if (f == format::html) {
      out += "<ul>\n";
      for (const auto& i : items) {
        std::string body = items_are_markup ? i : esc(i);
        out += "<li>" + (code ? "<code>" + body + "</code>" : body) + "</li>\n";
      }
      out += "</ul>\n";
    } else {
      for (const auto& i : items) out += "- " + (code ? "`" + i + "`" : i) + "\n";
      out += "\n";
    }
  }
  void pre(const std::string& text, const std::string& lang = "") {
    out += f == format::html ? "<pre>" + esc(text) + "</pre>\n" : "```" + lang + "\n" + text + "\n```\n\n";
  }
  // The page's head and navigation; the body starts after them (page::body).
  void begin(const std::string& title_, const std::string& root) {
    title = title_;
    if (f == format::html) {
      out += "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\">"
             "<title>" + esc(title) + " - firstfault encyclopedia</title>\n<style>" + report::html_css() + "</style></head><body>\n"
             "<nav class=\"top\"><b>firstfault encyclopedia</b>" + link(root + "index.html", "Index") + link(root + "nccl.html", "NCCL errors") +
             "</nav>\n";
      body_at = out.size();
    } else {
      out += link(root + "index.md", "Index") + " · " + link(root + "nccl.md", "NCCL errors") + "\n\n";
    }
  }
  page finish(std::string path) {
    page p{std::move(path), {}, {}, {}};
    if (f == format::html) {
      p.title = title;
      p.body = out.substr(body_at);
      out += "</body></html>\n";
    }
    p.content = std::move(out);
    return p;
  }
};

}  // namespace

namespace {

// What every page of the site needs: the format, the entries by name, the link to an entry.
struct site {
  format f;
  std::vector<const kb::signature*> sigs;  // by name
  std::map<std::string, std::string> scale;
  std::string ext;
  std::string entry_href(const kb::signature& s, const std::string& root) const { return root + "entries/" + s.name + ext; }
};

// One entry: what it is, what you will observe, symptoms (or what it follows), how to confirm, root cause,
// fix, verification, prevention, false positives, scaling, related entries and references.
page entry_page(const site& site_, const kb::signature& s) {
  const format f = site_.f;
  const auto& sigs = site_.sigs;
  auto entry_href = [&](const kb::signature& e, const std::string& root) { return site_.entry_href(e, root); };
  const auto* sp = &s;  // this entry, to leave it out of its own related list
  auto& scale = site_.scale;
  writer w{f, {}};
  w.begin(s.title, "../");
  w.h(1, s.title);
  w.raw_p("<span class=\"muted\">" + esc(s.name) + " &middot; kind " + esc(s.kind) + " (" + esc(s.category) + ") &middot; " +
              esc(std::string(kb::to_string(s.role))) + (s.is_cause() ? " &middot; priority " + std::to_string(s.priority) : "") + " &middot; level " +
              esc(s.level) + " &middot; status " + esc(s.status) + "</span>",
          "`" + s.name + "` · kind `" + s.kind + "` (" + s.category + ") · " + std::string(kb::to_string(s.role)) +
              (s.is_cause() ? " · priority " + std::to_string(s.priority) : "") + " · level " + s.level + " · status " + s.status);
  w.h(2, "What it is", "what");
  w.p(s.description);
  if (!s.inferred_by.empty())
    w.p("This verdict is not printed by any single line: firstfault reasons it across ranks (rule " + s.inferred_by + ").");
  w.h(2, "What you will observe", "observe");
  for (const auto& e : s.positive) w.pre(e.line);
  if (!s.fingerprints.empty()) {
    w.p("Patterns that recognise it (RE2 syntax):");
    w.list(s.fingerprints, true);
  }
  w.h(2, "Symptoms and what they mean", "symptoms");
  if (s.is_cause()) {
    std::vector<std::string> items;
    for (const auto* o : sigs)
      if (!o->is_cause() && std::find(o->collateral_of.begin(), o->collateral_of.end(), s.kind) != o->collateral_of.end())
        items.push_back(w.link(entry_href(*o, "../"), o->title) + (f == format::html ? " &mdash; " + esc(first_sentence(o->description)) : " - " + first_sentence(o->description)));
    if (items.empty()) w.p("No collateral signature is recorded for this kind yet.");
    else {
      w.p("Other ranks usually print these after this failure; they are collateral, not causes:");
      w.list(items, false, f == format::html);
    }
  } else {
    std::vector<std::string> items;
    for (const auto& k : s.collateral_of) {
      const kb::signature* cause = nullptr;
      for (const auto* o : sigs)
        if (o->is_cause() && o->kind == k && (!cause || o->priority > cause->priority)) cause = o;
      items.push_back(cause ? w.link(entry_href(*cause, "../"), k) : (f == format::html ? esc(k) : k));
    }
    w.p("This line is a symptom: it is printed because something else failed. It usually follows:");
    w.list(items, false, f == format::html);
  }
  w.h(2, "How to confirm", "confirm");
  w.list(s.confirm);
  w.h(2, "Root cause", "root-cause");
  w.p(s.root_cause);
  w.h(2, "Fix", "fix");
  w.list(text::with_fallbacks(s.fix));
  for (const auto& c : s.fix_code) {
    w.p(c.stack + ":");
    w.pre(c.code, c.stack == "shell" || c.stack == "slurm" ? "sh" : "python");
  }
  w.h(2, "Verification", "verify");
  w.list(text::with_fallbacks(s.verify), true);
  if (!s.prevention.empty()) {
    w.h(2, "Prevention", "prevention");
    w.list(s.prevention);
  }
  if (!s.falsepositives.empty()) {
    w.h(2, "When this is not the cause", "false-positives");
    w.list(s.falsepositives);
  }
  w.h(2, "How it scales from 1 to 1,000 GPUs", "scale");
  w.p(scale.count(s.category) ? scale.at(s.category) : "No scaling notes for this category yet.");
  w.h(2, "Related entries", "related");
  std::vector<std::string> rel;
  for (const auto* o : sigs)
    if (o != sp && (o->kind == s.kind || std::find(s.related.begin(), s.related.end(), o->name) != s.related.end()))
      rel.push_back(w.link(entry_href(*o, "../"), o->title + " (" + o->name + ")"));
  if (rel.empty()) w.p("None.");
  else w.list(rel, false, f == format::html);
  w.h(2, "References", "references");
  std::vector<std::string> refs;
  for (const auto& r : s.references) refs.push_back(f == format::html ? "<a href=\"" + esc(r) + "\">" + esc(r) + "</a>" : r);
  w.list(refs, false, f == format::html);
  return w.finish("entries/" + s.name + site_.ext);
}

// The index: every entry by category, severity, system and tag.
page index_page(const site& site_) {
  const format f = site_.f;
  const auto& sigs = site_.sigs;
  auto entry_href = [&](const kb::signature& e, const std::string& root) { return site_.entry_href(e, root); };
  writer w{f, {}};
  w.begin("Index", "");
  w.h(1, "firstfault encyclopedia of training failures");
  w.p(std::to_string(sigs.size()) + " entries. Causes name a root cause; symptoms are what the other ranks print afterwards.");
  auto section = [&](const std::string& title, const std::string& id, auto key_fn) {
    w.h(2, title, id);
    std::map<std::string, std::vector<const kb::signature*>> groups;
    for (const auto* s : sigs)
      for (const auto& k : key_fn(*s)) groups[k].push_back(s);
    for (const auto& [k, list] : groups) {
      w.h(3, k + " (" + std::to_string(list.size()) + ")", id + "-" + slug(k));
      std::vector<std::string> items;
      for (const auto* s : list) items.push_back(w.link(entry_href(*s, ""), s->title) + (f == format::html ? " <span class=\"muted\">" + esc(std::string(kb::to_string(s->role))) + "</span>" : " *" + std::string(kb::to_string(s->role)) + "*"));
      w.list(items, false, f == format::html);
    }
  };
  section("By category", "category", [](const kb::signature& s) { return std::vector<std::string>{s.category}; });
  section("By severity", "severity", [](const kb::signature& s) { return std::vector<std::string>{s.level}; });
  section("By system", "system", [](const kb::signature& s) { return s.systems; });
  section("By tag", "tag", [](const kb::signature& s) { return s.tags; });
  return w.finish("index" + site_.ext);
}

// The NCCL hub: every NCCL entry side by side, with what it indicates and the variables that tell it apart.
page nccl_page(const site& site_) {
  const format f = site_.f;
  const auto& sigs = site_.sigs;
  auto entry_href = [&](const kb::signature& e, const std::string& root) { return site_.entry_href(e, root); };
  writer w{f, {}};
  w.begin("NCCL errors", "");
  w.h(1, "NCCL errors side by side");
  w.p("NCCL reports every failure through a few result codes, so very different faults look alike. The final "
      "\"-> N\" in an NCCL return chain is the ncclResult_t: 1 unhandled CUDA error, 2 system error (socket, "
      "memory, external library), 3 internal error, 4 invalid argument, 5 invalid usage, 6 remote error (a peer "
      "died or the network failed), 7 in progress. The WARN line printed just before it says which fault it is. "
      "NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS are diagnostics that make those lines appear; they never fix anything.");
  if (f == format::html) {
    // The long words of this table are variable and kind names (TORCH_NCCL_HEARTBEAT_TIMEOUT_SEC, 32
    // characters): a line may break after each _ or =, or their five columns are wider than a 1,400 px window.
    auto breakable = [](const std::string& text) {
      std::string o;
      for (char c : esc(text)) o += c == '_' || c == '=' ? std::string(1, c) + "<wbr>" : std::string(1, c);
      return o;
    };
    w.out += "<div class=\"table-box\"><table id=\"nccl\" class=\"cards\"><tr><th>Entry</th><th>Role</th><th>Kind</th><th>What it really indicates</th><th>Variables that tell it apart</th></tr>\n";
    for (const auto* s : sigs) {
      if (!is_nccl(*s)) continue;
      std::string vars;
      for (const auto& v : env_vars(*s)) vars += (vars.empty() ? "" : ", ") + std::string("<code>") + breakable(v) + "</code>";
      w.out += "<tr><td><a href=\"" + esc(entry_href(*s, "")) + "\">" + breakable(s->title) + "</a></td><td data-label=\"role\">" +
               esc(std::string(kb::to_string(s->role))) + "</td><td data-label=\"kind\">" + breakable(s->kind) + "</td><td>" +
               breakable(first_sentence(s->description)) + "</td><td data-label=\"variables\">" + vars + "</td></tr>\n";
    }
    w.out += "</table></div>\n";
  } else {
    w.out += "| Entry | Role | Kind | What it really indicates | Variables that tell it apart |\n|---|---|---|---|---|\n";
    for (const auto* s : sigs) {
      if (!is_nccl(*s)) continue;
      std::string vars;
      for (const auto& v : env_vars(*s)) vars += (vars.empty() ? "" : ", ") + std::string("`") + v + "`";
      std::string what = first_sentence(s->description);
      std::replace(what.begin(), what.end(), '|', '/');
      w.out += "| " + w.link(entry_href(*s, ""), s->title) + " | " + std::string(kb::to_string(s->role)) + " | " + s->kind + " | " + what + " | " + vars + " |\n";
    }
  }
  return w.finish("nccl" + site_.ext);
}

}  // namespace

std::vector<page> render_site(const kb::library& lib, format f) {
  site s{f, {}, scale_texts(lib), f == format::html ? ".html" : ".md"};
  for (const auto& sig : lib.signatures) s.sigs.push_back(&sig);
  std::sort(s.sigs.begin(), s.sigs.end(), [](auto* a, auto* b) { return a->name < b->name; });
  std::vector<page> pages;
  for (const auto* sig : s.sigs) pages.push_back(entry_page(s, *sig));
  pages.push_back(index_page(s));
  pages.push_back(nccl_page(s));
  return pages;
}

std::vector<std::string> broken_links(const std::vector<page>& pages) {
  std::map<std::string, const page*> by_path;
  for (const auto& p : pages) by_path[p.path] = &p;
  static const re2::RE2 href(R"re(href="([^"]*)")re");
  std::vector<std::string> bad;
  for (const auto& p : pages) {
    re2::StringPiece in(p.content);
    std::string target;
    while (re2::RE2::FindAndConsume(&in, href, &target)) {
      if (target.rfind("http://", 0) == 0 || target.rfind("https://", 0) == 0) continue;  // references
      std::string file = target, anchor;
      if (auto h = target.find('#'); h != std::string::npos) {
        file = target.substr(0, h);
        anchor = target.substr(h + 1);
      }
      // resolve relative to the page's directory
      std::string dir = p.path.find('/') == std::string::npos ? "" : p.path.substr(0, p.path.rfind('/') + 1);
      std::string path = file.empty() ? p.path : dir + file;
      while (path.find("../") != std::string::npos) {
        auto pos = path.find("../");
        auto prev = pos >= 2 ? path.rfind('/', pos - 2) : std::string::npos;
        path = (prev == std::string::npos ? "" : path.substr(0, prev + 1)) + path.substr(pos + 3);
      }
      auto it = by_path.find(path);
      if (it == by_path.end()) bad.push_back(p.path + " -> " + target);
      else if (!anchor.empty() && it->second->content.find("id=\"" + anchor + "\"") == std::string::npos)
        bad.push_back(p.path + " -> " + target + " (no such anchor)");
    }
  }
  return bad;
}

}  // namespace ff::encyclopedia
