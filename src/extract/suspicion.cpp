// What an unmatched line says about a run: failure-looking or not, and its template for grouping.
#include <re2/re2.h>

#include <cctype>

#include "firstfault/extract.hpp"
#include "firstfault/limits.hpp"
#include "firstfault/text.hpp"

namespace ff::extract {

namespace {
re2::StringPiece sp(std::string_view s) { return {s.data(), s.size()}; }
}  // namespace

std::string_view exception_type(std::string_view body) {
  // The type starts the body or follows a separator a prefix ends with (space, ':', ']', '>', '|').
  // It is followed by ": " or the end of the line, never by "(" (a raise statement or a repr).
  static const re2::RE2 re(
      R"((?:^|[\s:\]>|])(?:[A-Za-z_]\w*\.)*([A-Z]\w*(?:Error|Exception|Interrupt|Exit|Failure))(?::\s|:$|\s*$))");
  re2::StringPiece in = sp(body), type;
  if (body.size() > limits::kMaxExceptionLineBytes || !re2::RE2::PartialMatch(in, re, &type)) return {};
  return {type.data(), type.size()};
}

suspicion classify_line(std::string_view body, char level) {
  if (body.size() > 8192) body = body.substr(0, 8192);
  // NCCL prints its errors at WARN level; a crash message is a failure at any level.
  static const re2::RE2 crash(
      R"(NCCL WARN|Segmentation fault|core dumped|Fatal Python error|terminate called after throwing|\bAborted\b|Bus error|\bpanic\b|Killed process|\bSIG(?:SEGV|ABRT|BUS|KILL|ILL|FPE)\b)");
  if (re2::RE2::PartialMatch(sp(body), crash)) return suspicion::strong;
  if (level == 'F' || level == 'C') return suspicion::strong;
  // Warnings, by level or by the message's own category, do not page anyone.
  static const re2::RE2 warning(R"(^\s*(?:\[?(?:WARNING|WARN|Warning)\b|[\w.]*Warning:|\S+:\d+: \w*Warning:))");
  // A logger's level word among the first tokens ("train WARNING eval: ...", "W1201 ...") counts too.
  static const re2::RE2 warning_level(R"(^[\w.:\-\[\] ]{0,60}?\b(?:WARNING|WARN)\b)");
  if (level == 'W' || re2::RE2::PartialMatch(sp(body), warning) || re2::RE2::PartialMatch(sp(body), warning_level))
    return suspicion::none;
  if (!exception_type(body).empty()) return suspicion::strong;
  if (level == 'E') return suspicion::weak;
  static const re2::RE2 zero(R"((?i)\b0 (?:errors?|failures?|failed)\b|\b(?:errors?|failures?|failed)\s*[=:]\s*0\b|\bno errors?\b|\bwithout errors?\b)");
  static const re2::RE2 weak_words(
      R"((?i)\b(?:errors?|failed|failure|fatal|unhandled|timed out|exception)\b|(?:\bexit(?:ed)?|\breturn(?:ed)?)\s*(?:with\s*)?(?:code|status|value)?\s*[=:]?\s*-?[1-9]\d*\b|non-zero exit)");
  // Scheduler states as sacct/squeue print them (https://slurm.schedmd.com/sacct.html#SECTION_JOB-STATE-CODES).
  static const re2::RE2 weak_states(R"(\b(?:CANCELLED|NODE_FAIL|OUT_OF_MEMORY|OUT_OF_ME\+|TIMEOUT|PREEMPTED|BOOT_FAIL|DEADLINE|FAILED)\b|\bKilled\b)");
  if (re2::RE2::PartialMatch(sp(body), weak_states)) return suspicion::weak;
  if (re2::RE2::PartialMatch(sp(body), weak_words)) {
    // A line whose only error words are zero counts ("0 errors", "failed: 0") is a summary, not a failure.
    std::string rest(body);
    re2::RE2::GlobalReplace(&rest, zero, "");
    if (re2::RE2::PartialMatch(rest, weak_words)) return suspicion::weak;
  }
  return suspicion::none;
}

std::string line_template(std::string_view body) {
  static const re2::RE2 var(
      R"((?:[A-Za-z]:)?(?:/[\w.+-]+){2,}/?|\b0x[0-9A-Fa-f]+\b|\b[0-9a-f]{8,}\b|\b\d+(?:[.:,]\d+)*\b|'[^']{0,200}'|"[^"]{0,200}")");
  std::string t(text::prefix_utf8(text::trim(body), 400));
  re2::RE2::GlobalReplace(&t, var, "<*>");
  return t;
}

}  // namespace ff::extract

namespace ff::extract {

std::vector<std::string> gate_patterns() {
  return {
      // record anchors of extractor::feed (its starts_with/contains tests, case as written there)
      R"(ChildFailedError:)", R"(The first process to do so was)", R"(srun: error:)", R"(CalledProcessError)",
      R"(failed \(exitcode: )", R"(Sending process \d+ closing signal SIG)", R"(\((?:most recent call first|idle|active|gil))",
      R"(Exception raised from )", R"(Traceback \(most recent call last\):)", R"(During handling of the above exception)",
      R"(The above exception was the direct cause)",
      // classify_line: crash words, scheduler states, error words (a superset: case-insensitive)
      R"((?i)nccl warn|segmentation fault|core dumped|terminate called after throwing|aborted|bus error|panic|killed)",
      R"(SIG(?:SEGV|ABRT|BUS|KILL|ILL|FPE))", R"(CANCELLED|NODE_FAIL|OUT_OF_ME|TIMEOUT|PREEMPTED|BOOT_FAIL|DEADLINE)",
      R"((?i)error|exception|interrupt|exit|failure|failed|fatal|unhandled|timed out|non-zero)",
      R"((?i)return(?:ed)?\s*(?:with\s*)?(?:code|status|value)?\s*[=:]?\s*-?[1-9])",
  };
}

}  // namespace ff::extract
