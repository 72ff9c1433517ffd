// Timestamp formats seen in training logs (../shared/reference/log_formats.md §0).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>

#include "firstfault/normalize.hpp"

namespace ff::normalize {

namespace {

int month_index(std::string_view m) {
  static const char* names[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  for (int i = 0; i < 12; ++i)
    if (m.size() >= 3 && std::strncmp(m.data(), names[i], 3) == 0) return i;
  return -1;
}

double epoch(int y, int mon0, int d, int h, int mi, double s) {
  std::tm t{};
  t.tm_year = y - 1900;
  t.tm_mon = mon0;
  t.tm_mday = d;
  t.tm_hour = h;
  t.tm_min = mi;
  t.tm_sec = 0;
  return static_cast<double>(timegm(&t)) + s;
}

// Parses "SS[.,]frac" into seconds.
double seconds_field(const std::string& s) {
  std::string c = s;
  for (auto& ch : c)
    if (ch == ',') ch = '.';
  return std::strtod(c.c_str(), nullptr);
}

}  // namespace

std::optional<timestamp> parse_timestamp(std::string_view format, std::string_view text_in, int default_year) {
  std::string text(text_in);
  int y = 0, mo = 0, d = 0, h = 0, mi = 0;
  char sec[40] = {0};
  timestamp ts;
  if (format == "iso" || format == "elastic") {
    // 2026-11-30 02:14:01,880 | 2025-11-24T03:20:21.001125857Z | 2026-09-07_13:02:58
    int consumed = 0;
    if (std::sscanf(text.c_str(), "%d-%d-%d%*c%d:%d:%39[0-9.,]%n", &y, &mo, &d, &h, &mi, sec, &consumed) < 6) {
      consumed = 0;
      if (std::sscanf(text.c_str(), "%d-%d-%d%*c%d:%d%n", &y, &mo, &d, &h, &mi, &consumed) < 5) return std::nullopt;
    }
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || seconds_field(sec) >= 61) return std::nullopt;
    ts.seconds = epoch(y, mo - 1, d, h, mi, seconds_field(sec));
    // An explicit UTC offset (+02:00, -0700) moves the instant; "Z" or none means UTC.
    if (consumed > 0 && static_cast<std::size_t>(consumed) < text.size()) {
      const char* z = text.c_str() + consumed;
      int oh = 0, om = 0;
      if ((*z == '+' || *z == '-') && (std::sscanf(z + 1, "%2d:%2d", &oh, &om) == 2 || std::sscanf(z + 1, "%2d%2d", &oh, &om) == 2)) {
        double off = oh * 3600.0 + om * 60.0;
        ts.seconds += (*z == '+') ? -off : off;
      }
    }
    return ts;
  }
  if (format == "c10" || format == "glog") {
    // 1206 18:44:12.715298746  (MMDD HH:MM:SS.frac), level letter already stripped
    if (text.size() < 4) return std::nullopt;
    std::size_t sp = text.find(' ');
    if (sp == std::string::npos || sp < 3) return std::nullopt;
    int mmdd = std::atoi(text.substr(0, sp).c_str());
    mo = mmdd / 100;
    d = mmdd % 100;
    if (std::sscanf(text.c_str() + sp + 1, "%d:%d:%39[0-9.]", &h, &mi, sec) < 3) return std::nullopt;
    if (mo < 1 || mo > 12 || d < 1 || d > 31) return std::nullopt;
    ts.seconds = epoch(default_year, mo - 1, d, h, mi, seconds_field(sec));
    ts.has_date = false;
    return ts;
  }
  if (format == "syslog") {
    // Feb 14 05:03:41
    char mon[8] = {0};
    if (std::sscanf(text.c_str(), "%3s %d %d:%d:%39[0-9.]", mon, &d, &h, &mi, sec) < 5) return std::nullopt;
    int m = month_index(mon);
    if (m < 0) return std::nullopt;
    ts.seconds = epoch(default_year, m, d, h, mi, seconds_field(sec));
    ts.has_date = false;
    return ts;
  }
  if (format == "ctime") {
    // Fri Aug 11 12:31:45 2023
    char wd[8] = {0}, mon[8] = {0};
    if (std::sscanf(text.c_str(), "%3s %3s %d %d:%d:%39[0-9.] %d", wd, mon, &d, &h, &mi, sec, &y) < 7) return std::nullopt;
    int m = month_index(mon);
    if (m < 0) return std::nullopt;
    ts.seconds = epoch(y, m, d, h, mi, seconds_field(sec));
    return ts;
  }
  if (format == "uptime") {
    char* end = nullptr;
    double v = std::strtod(text.c_str(), &end);
    if (end == text.c_str()) return std::nullopt;
    ts.seconds = v;
    ts.kind = timestamp::clock::uptime;
    return ts;
  }
  if (format == "uptime_us") {  // /dev/kmsg: microseconds since boot
    char* end = nullptr;
    double v = std::strtod(text.c_str(), &end);
    if (end == text.c_str()) return std::nullopt;
    ts.seconds = v / 1e6;
    ts.kind = timestamp::clock::uptime;
    return ts;
  }
  if (format == "epoch") {
    char* end = nullptr;
    double v = std::strtod(text.c_str(), &end);
    if (end == text.c_str()) return std::nullopt;
    ts.seconds = v;
    return ts;
  }
  return std::nullopt;
}

}  // namespace ff::normalize
