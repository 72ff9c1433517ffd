// The per-rank timeline (timeline.hpp) drawn as SVG for the HTML report and the web page, and as text rows
// for `diagnose --timeline`; its JSON form. The model is built in src/correlate/timeline_model.cpp.
#include "firstfault/timeline.hpp"

#include <climits>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <map>
#include <set>

#include "firstfault/text.hpp"

namespace ff::timeline {
namespace {

std::string esc(std::string_view s) { return text::html_escape(s); }

const char* colour(mark w) {
  switch (w) {
    case mark::root: return "#c0161b";
    case mark::cause: return "#8a1538";
    case mark::collateral: return "#e08a00";
    case mark::node: return "#6b3fa0";
  }
  return "#666";
}

std::string where(const event& e) {
  return e.source.empty() ? std::string() : e.source + ":" + std::to_string(e.line_no);
}

}  // namespace

std::string axis_label(const model& m, double at) {
  if (m.axis == axis::position) return fmt::format("{:.0f}%", std::clamp(at, 0.0, 1.0) * 100);
  std::time_t t = static_cast<std::time_t>(std::floor(at));
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  double span = m.end - m.start;
  if (span >= 2 * 86400) std::strftime(buf, sizeof buf, "%m-%d %H:%M", &tm);
  else std::strftime(buf, sizeof buf, "%H:%M:%S", &tm);
  std::string s = buf;
  if (span < 10) s += fmt::format(".{:03d}", static_cast<int>((at - std::floor(at)) * 1000));
  return s;
}

std::string tick_label(const model& m, double at) {
  if (m.axis == axis::position || at <= m.start) return axis_label(m, at);
  double d = at - m.start;
  if (d < 10) return fmt::format("+{:.2f}s", d);
  if (d < 120) return fmt::format("+{:.0f}s", d);
  if (d < 7200) return fmt::format("+{}m{:02d}s", static_cast<long>(d) / 60, static_cast<int>(static_cast<long>(d) % 60));
  return fmt::format("+{}h{:02d}m", static_cast<long>(d) / 3600, static_cast<int>((static_cast<long>(d) % 3600) / 60));
}

namespace {

std::string axis_title(const model& m) {
  if (m.axis == axis::position)
    return "position in each input (the lines carry no times): 0% first line, 100% last line";
  std::string t = "time (UTC";
  if (m.yearless) t += "; some logs give no year";
  t += ")";
  if (m.untimed) t += fmt::format("; {} error line(s) without a time are not drawn", m.untimed);
  if (m.run_start) {
    model whole = m;
    whole.start = *m.run_start;
    t += "; zoomed to the failure: the run began at " + axis_label(whole, *m.run_start) + ", " +
         tick_label(whole, m.start).substr(1) + " earlier";
  }
  return t;
}

// Where a lane's rank(s) say their first line was, for the tooltip.
std::string span_text(const model& m, const lane& l) {
  std::string s = l.label;
  if (l.first && l.last) s += ": writes from " + axis_label(m, *l.first) + " to " + axis_label(m, *l.last);
  s += fmt::format(", {} line(s)", l.lines);
  if (l.gap_from && l.gap_to) s += ", silent from " + axis_label(m, *l.gap_from) + " to " + axis_label(m, *l.gap_to);
  return s;
}

std::string event_text(const model& m, const event& e, const lane& l) {
  const char* what = e.what == mark::root ? "ROOT CAUSE" : e.what == mark::cause ? "cause" : e.what == mark::node ? "node event" : "collateral";
  std::string s = fmt::format("{} at {}: {} [{}]", what, axis_label(m, e.at), e.title, e.kind);
  if (e.seq) s += fmt::format(", SeqNum {}", *e.seq);
  if (e.count > 1) s += fmt::format(" (x{})", e.count);
  s += " on " + l.label;
  if (!e.source.empty()) s += " - " + where(e);
  return s;
}

}  // namespace

std::string to_svg(const model& m, int width) {
  const int left = 200, right = 56, top = 46, lane_h = 18, host_h = 18, legend_h = 34;
  const double plot = std::max(200, width - left - right);
  auto x = [&](double at) { return left + (std::max(at, m.start) - m.start) / (m.end - m.start) * plot; };
  int rows_h = 0;
  for (const auto& g : m.hosts) rows_h += host_h + static_cast<int>(g.lanes.size()) * lane_h;
  const int height = top + rows_h + 12 + legend_h;
  std::string o = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"timeline\" width=\"{}\" height=\"{}\" viewBox=\"0 0 {} {}\" role=\"img\" "
      "aria-label=\"per-rank timeline\" font-family=\"system-ui,sans-serif\" font-size=\"11\" data-lanes=\"{}\" data-ranks=\"{}\">\n",
      width, height, width, height, m.lanes, m.ranks);
  o += fmt::format("<text x=\"{}\" y=\"14\" font-size=\"12\" fill=\"#333\">{}</text>\n", left, esc(axis_title(m)));
  // axis: 6 ticks
  for (int i = 0; i <= 5; ++i) {
    double at = m.start + (m.end - m.start) * i / 5.0;
    double px = x(at);
    o += fmt::format("<line x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\" stroke=\"#ddd\"/>", px, top - 8, px, top + rows_h);
    o += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"{}\" fill=\"#555\">{}</text>\n", px, top - 12,
                     i == 0 ? "start" : i == 5 ? "end" : "middle", esc(tick_label(m, at)));
  }
  int y = top;
  for (const auto& g : m.hosts) {
    o += fmt::format("<g class=\"host\" data-host=\"{}\">", esc(g.host));
    o += fmt::format("<rect x=\"0\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#f1f3f6\"/>", y, width, host_h);
    o += fmt::format("<text x=\"6\" y=\"{}\" font-weight=\"bold\" fill=\"#223\">{}</text>\n", y + 13,
                     esc(g.host.empty() ? std::string("host not known") : g.host));
    y += host_h;
    for (const auto& l : g.lanes) {
      const int mid = y + lane_h / 2;
      o += fmt::format("<g class=\"lane{}\" data-ranks=\"{}\" data-label=\"{}\">", l.initiating ? " initiating" : "",
                       esc(text::rank_ranges(l.ranks)), esc(l.label));
      o += fmt::format("<title>{}</title>", esc(span_text(m, l)));
      o += fmt::format("<text x=\"14\" y=\"{}\" fill=\"{}\"{}>{}{}</text>", mid + 4, l.initiating ? "#c0161b" : "#222",
                       l.initiating ? " font-weight=\"bold\"" : "", l.initiating ? "&#9658; " : "", esc(l.label));
      if (l.first && l.last) {
        double x1 = x(*l.first), x2 = std::max(x(*l.last), x1 + 2);
        o += fmt::format("<rect class=\"active\" x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"8\" rx=\"2\" fill=\"{}\"/>", x1, mid - 4,
                         x2 - x1, l.folded ? "#8fa6c4" : "#5b7fae");
        if (l.gap_from && l.gap_to) {
          double g1 = x(*l.gap_from), g2 = x(*l.gap_to);
          o += fmt::format("<rect class=\"gap\" x=\"{:.1f}\" y=\"{}\" width=\"{:.1f}\" height=\"8\" fill=\"#fff\" stroke=\"#5b7fae\" "
                           "stroke-dasharray=\"2 2\"><title>silent from {} to {}</title></rect>",
                           g1, mid - 4, std::max(1.0, g2 - g1), esc(axis_label(m, *l.gap_from)), esc(axis_label(m, *l.gap_to)));
        }
        if (x(m.end) - x2 > 4)  // silent until the end of the logs
          o += fmt::format("<line class=\"silent\" x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\" stroke=\"#b0b0b0\" stroke-dasharray=\"3 3\">"
                           "<title>{}: no line after {}</title></line>",
                           x2, mid, x(m.end), mid, esc(l.label), esc(axis_label(m, *l.last)));
      }
      long last_seq = -1;
      for (const auto& e : l.events) {
        double px = x(e.at);
        std::string tip = "<title>" + esc(event_text(m, e, l)) + "</title>";
        const char* c = colour(e.what);
        if (e.what == mark::root)
          o += fmt::format("<path class=\"ev root\" d=\"M{0:.1f} {1} l7 7 l-7 7 l-7 -7 z\" fill=\"{2}\" stroke=\"#fff\">{3}</path>", px,
                           mid - 7, c, tip);
        else if (e.what == mark::node)
          o += fmt::format("<path class=\"ev node\" d=\"M{0:.1f} {1} l5 9 l-10 0 z\" fill=\"{2}\">{3}</path>", px, mid - 5, c, tip);
        else if (e.what == mark::cause)
          o += fmt::format("<circle class=\"ev cause\" cx=\"{:.1f}\" cy=\"{}\" r=\"4\" fill=\"{}\">{}</circle>", px, mid, c, tip);
        else
          o += fmt::format("<rect class=\"ev collateral\" x=\"{:.1f}\" y=\"{}\" width=\"3\" height=\"12\" fill=\"{}\">{}</rect>", px - 1.5,
                           mid - 6, c, tip);
        if (e.seq && *e.seq != last_seq) {
          o += fmt::format("<text class=\"seq\" x=\"{:.1f}\" y=\"{}\" font-size=\"9\" fill=\"#7a4a00\">#{}</text>", px + 4, mid - 1, *e.seq);
          last_seq = *e.seq;
        }
      }
      o += "</g>\n";
      y += lane_h;
    }
    o += "</g>\n";
  }
  if (m.root_at)
    o += fmt::format("<line class=\"root-line\" x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#c0161b\" stroke-dasharray=\"4 3\"/>\n",
                     x(*m.root_at), top - 6, top + rows_h);
  // legend
  int ly = top + rows_h + 22;
  o += fmt::format(
      "<g class=\"legend\"><path d=\"M{0} {1} l6 6 l-6 6 l-6 -6 z\" fill=\"#c0161b\"/><text x=\"{2}\" y=\"{3}\">root cause</text>"
      "<circle cx=\"{4}\" cy=\"{5}\" r=\"4\" fill=\"#8a1538\"/><text x=\"{6}\" y=\"{3}\">other cause</text>"
      "<rect x=\"{7}\" y=\"{8}\" width=\"3\" height=\"12\" fill=\"#e08a00\"/><text x=\"{9}\" y=\"{3}\">collateral error (#N: SeqNum)</text>"
      "<path d=\"M{10} {8} l5 9 l-10 0 z\" fill=\"#6b3fa0\"/><text x=\"{11}\" y=\"{3}\">node event</text>"
      "<rect x=\"{12}\" y=\"{13}\" width=\"24\" height=\"8\" fill=\"#5b7fae\"/><text x=\"{14}\" y=\"{3}\">writing</text>"
      "<line x1=\"{15}\" y1=\"{5}\" x2=\"{16}\" y2=\"{5}\" stroke=\"#b0b0b0\" stroke-dasharray=\"3 3\"/><text x=\"{17}\" y=\"{3}\">silent</text></g>\n",
      left + 6, ly - 6, left + 16, ly + 4, left + 100, ly, left + 108, left + 200, ly - 6, left + 208, left + 396, left + 406, left + 490,
      ly - 4, left + 518, left + 580, left + 610, left + 616);
  o += "</svg>\n";
  return o;
}

std::string to_text(const model& m, int width, bool color) {
  std::string o;
  if (m.empty()) return o;
  width = std::clamp(width, 10, 400);
  const double span = m.end - m.start;
  auto bucket = [&](double at) {
    return std::clamp(static_cast<int>(std::floor((at - m.start) / span * width)), 0, width - 1);
  };
  std::size_t label_w = 10;
  for (const auto& g : m.hosts)
    for (const auto& l : g.lanes) label_w = std::max(label_w, l.label.size() + 3);
  label_w = std::min<std::size_t>(label_w, 28);
  o += fmt::format("TIMELINE  {} ranks in {} lane(s); {}\n", m.ranks, m.lanes, axis_title(m));
  std::string head(label_w + 1, ' ');
  std::string a = axis_label(m, m.start), b = tick_label(m, m.end);
  std::string scale = a + std::string(static_cast<std::size_t>(std::max<int>(1, width - static_cast<int>(a.size() + b.size()))), ' ') + b;
  o += head + scale + "\n";
  for (const auto& g : m.hosts) {
    o += (g.host.empty() ? std::string("(host not known)") : g.host) + "\n";
    for (const auto& l : g.lanes) {
      std::string cells(static_cast<std::size_t>(width), ' ');
      if (l.first && l.last)
        for (int i = bucket(*l.first); i <= bucket(*l.last); ++i) cells[static_cast<std::size_t>(i)] = '=';
      if (l.gap_from && l.gap_to)
        for (int i = bucket(*l.gap_from) + 1; i < bucket(*l.gap_to); ++i) cells[static_cast<std::size_t>(i)] = '.';
      // marks: the root wins a cell over a cause, a cause over a node event, a node event over collateral
      auto rank_of = [](char c) { return c == 'X' ? 4 : c == 'C' ? 3 : c == '!' ? 2 : c == 'x' ? 1 : 0; };
      for (const auto& e : l.events) {
        char c = e.what == mark::root ? 'X' : e.what == mark::cause ? 'C' : e.what == mark::node ? '!' : 'x';
        auto& cell = cells[static_cast<std::size_t>(bucket(e.at))];
        if (rank_of(c) > rank_of(cell)) cell = c;
      }
      std::string label = (l.initiating ? "> " : "  ") + l.label;
      if (label.size() > label_w) label = label.substr(0, label_w);
      label.resize(label_w, ' ');
      if (color) {
        std::string painted;
        for (char c : cells) {
          if (c == 'X') painted += "\033[1;31mX\033[0m";
          else if (c == 'x') painted += "\033[33mx\033[0m";
          else if (c == '!') painted += "\033[35m!\033[0m";
          else painted += c;
        }
        cells = painted;
      }
      o += label + "|" + cells + "|\n";
    }
  }
  o += std::string(label_w + 1, ' ') + "X root cause  C other cause  x collateral  ! node event  = writing  . silent\n";
  return o;
}

// ---- the report's "timeline" object ---------------------------------------------------------------------

namespace {

// --- the JSON form: one field list per type --------------------------------------------------------------
// Each type's fields are listed once, for both directions (schemas/report-v1.schema.json, "timeline"):
// fields(v, x) calls v(key, member) for each. The writer writes every field, an empty optional as null. The
// reader is lenient, as a stored report may be hand-edited or cut short and must not throw: a member keeps
// its value when its key is missing or holds another type, a count is at least `min`, lists skip entries
// that are not objects and are bounded, and an event's time defaults to the axis' start.
template <class R, class T>
using only = std::enable_if_t<std::is_same_v<std::remove_const_t<R>, T>>;

template <class V, class R>
only<R, event> fields(V&& v, R& e) {
  v("at", e.at), v("mark", e.what), v("kind", e.kind), v("title", e.title), v("seq", e.seq), v("source", e.source);
  v("line", e.line_no), v("count", e.count, 1);
}
template <class V, class R>
only<R, lane> fields(V&& v, R& l) {
  v("label", l.label), v("ranks", l.ranks), v("folded", l.folded), v("initiating", l.initiating), v("node_lane", l.node_lane);
  v("first", l.first), v("last", l.last), v("gap_from", l.gap_from), v("gap_to", l.gap_to), v("lines", l.lines);
  v("events", l.events);
}
template <class V, class R>
only<R, host_group> fields(V&& v, R& h) {
  v("host", h.host), v("lanes", h.lanes);
}
template <class V, class R>
only<R, model> fields(V&& v, R& m) {  // `lanes` is read back as the lanes the reader kept
  v("axis", m.axis), v("yearless", m.yearless), v("start", m.start), v("end", m.end), v("ranks", m.ranks);
  v("lanes", m.lanes), v("untimed", m.untimed), v("root_at", m.root_at), v("run_start", m.run_start), v("hosts", m.hosts);
}

const char* mark_word(mark w) {
  switch (w) {
    case mark::root: return "root";
    case mark::cause: return "cause";
    case mark::node: return "node";
    case mark::collateral: break;
  }
  return "collateral";
}

mark mark_of(const std::string& w) {
  if (w == "root") return mark::root;
  if (w == "cause") return mark::cause;
  if (w == "node") return mark::node;
  return mark::collateral;
}

struct to_json_fields {
  nlohmann::json& j;
  template <class T>
  void operator()(const char* k, const T& x, int = 0) const { j[k] = value(x); }
  static nlohmann::json value(axis a) { return a == axis::wall ? "wall" : "position"; }
  static nlohmann::json value(mark w) { return mark_word(w); }
  template <class T>
  static nlohmann::json value(const std::optional<T>& x) { return x ? nlohmann::json(*x) : nlohmann::json(nullptr); }
  template <class T>
  static nlohmann::json value(const std::vector<T>& xs) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& x : xs) a.push_back(value(x));
    return a;
  }
  static nlohmann::json value(const std::vector<int>& xs) { return xs; }
  template <class T>
  static nlohmann::json value(const T& x) {
    if constexpr (std::is_class_v<T> && !std::is_same_v<T, std::string>) {
      nlohmann::json o = nlohmann::json::object();
      fields(to_json_fields{o}, x);
      return o;
    } else {
      return x;
    }
  }
};

struct from_json_fields {
  const nlohmann::json& j;
  double& start;           // the axis' start: an event's time when it has none
  std::size_t& lanes_left;  // lanes still read, over all hosts: bounded whatever the entry says
  const nlohmann::json* at(const char* k) const {
    auto it = j.find(k);
    return it == j.end() ? nullptr : &*it;
  }
  std::optional<double> number(const char* k) const {
    auto* x = at(k);
    return x && x->is_number() ? std::optional<double>(x->get<double>()) : std::nullopt;
  }
  void operator()(const char* k, std::string& x, int = 0) const {
    if (auto* v = at(k); v && v->is_string()) x = v->get<std::string>();
    else x.clear();
  }
  void operator()(const char* k, bool& x, int = 0) const {
    auto* v = at(k);
    x = v && v->is_boolean() && v->get<bool>();
  }
  void operator()(const char* k, axis& x, int = 0) const {
    auto* v = at(k);
    x = v && v->is_string() && v->get<std::string>() == "wall" ? axis::wall : axis::position;
  }
  void operator()(const char* k, mark& x, int = 0) const {
    auto* v = at(k);
    x = mark_of(v && v->is_string() ? v->get<std::string>() : std::string());
  }
  void operator()(const char* k, double& x, int = 0) const { x = number(k).value_or(x); }
  void operator()(const char* k, std::optional<double>& x, int = 0) const { x = number(k); }
  void operator()(const char* k, std::optional<long>& x, int = 0) const {
    if (auto n = number(k)) x = static_cast<long>(*n);
  }
  template <class T, class = std::enable_if_t<std::is_integral_v<T>>>
  void operator()(const char* k, T& x, int min = 0) const {
    x = static_cast<T>(std::max(static_cast<double>(min), number(k).value_or(static_cast<double>(x))));
  }
  void operator()(const char* k, std::vector<int>& xs, int = 0) const {
    if (auto* v = at(k); v && v->is_array())
      for (const auto& r : *v)
        if (r.is_number_integer()) xs.push_back(r.get<int>());
  }
  template <class T>
  void operator()(const char* k, std::vector<T>& xs, int = 0) const {
    auto* v = at(k);
    if (!v || !v->is_array()) return;
    for (const auto& o : *v) {
      if (!o.is_object()) continue;
      T x;
      if constexpr (std::is_same_v<T, event>) {
        if (xs.size() >= kMaxEventsPerLane) continue;
        x.at = start;
      } else if constexpr (std::is_same_v<T, lane>) {
        if (lanes_left == 0) continue;
        --lanes_left;
      }
      fields(from_json_fields{o, start, lanes_left}, x);
      xs.push_back(std::move(x));
    }
  }
};

}  // namespace

nlohmann::json to_json(const model& m) { return to_json_fields::value(m); }

model from_json(const nlohmann::json& j) {
  model m;
  if (!j.is_object()) return m;
  // The start first: it is the default time of the events read with the hosts.
  m.start = from_json_fields{j, m.start, m.lanes}.number("start").value_or(0);
  std::size_t lanes_left = 4 * kMaxLanes;
  fields(from_json_fields{j, m.start, lanes_left}, m);
  if (!(m.end > m.start)) m.end = m.start + 1;  // to_svg divides by the range
  m.lanes = 4 * kMaxLanes - lanes_left;
  return m;
}

}  // namespace ff::timeline
