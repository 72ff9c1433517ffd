// The knowledge base checks itself: lint (schema, order, patterns in both engines) and every example,
// one test case per signature so that `ctest -R kb.torch_` works.
#include <gtest/gtest.h>
#include <re2/re2.h>

#include "test_support.hpp"
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "firstfault/extract.hpp"
#include "firstfault/gate.hpp"
#include "firstfault/kb.hpp"
#include "firstfault/kb_lint.hpp"
#include "firstfault/match.hpp"

namespace {

using ff::testing::builtin;

std::vector<std::string> names() {
  std::vector<std::string> out;
  for (const auto& s : builtin().signatures) out.push_back(s.name);
  return out;
}

class kb : public ::testing::TestWithParam<std::string> {};

TEST_P(kb, lint_and_examples) {
  static const auto issues = ff::kb::lint(builtin());
  for (const auto& i : issues)
    if (i.name == GetParam()) ADD_FAILURE() << i.file << ": " << i.message;
  static const auto failures = ff::kb::test_examples(builtin());
  for (const auto& f : failures)
    if (f.name == GetParam()) ADD_FAILURE() << f.message;
}

INSTANTIATE_TEST_SUITE_P(sig, kb, ::testing::ValuesIn(names()), [](const auto& info) { return info.param; });

TEST(kb_library, covers_every_corpus_kind_and_has_enough_signatures) {
  const auto& lib = builtin();
  EXPECT_GE(lib.signatures.size(), 40u);
  EXPECT_GE(lib.kinds.size(), 50u);
  for (const auto& k : lib.kinds) {
    if (k.kind == "healthy") continue;
    bool any = false;
    for (const auto& s : lib.signatures) any |= s.kind == k.kind;
    EXPECT_TRUE(any) << "no signature for kind " << k.kind << " (kinds.tsv lists it)";
  }
}

// Vocabularies in kb/_tables (issue 47): every row has a source and a sample, and the sample is read the way
// the row says its word is used (a path hint gives a host, a regex matches).
TEST(kb_library, lint_checks_the_samples_of_vocabulary_tables) {
  auto lib = ff::kb::library::from_files(
      {{"_tables/host_words.tsv",
        "# test\nword\tpath\tprefix\tnot_a_host\tsource\tsample\n"
        "node\tyes\tyes\tyes\tcluster naming\tlogs/node-12.log\n"  // read as the host node-12: fine
        "rack\tyes\tno\tno\tmade up\tlogs/rack-3.log\n"            // the path hint does not know "rack"
        "dgx\tno\tyes\tno\t\tdgx-01: NCCL INFO Bootstrap\n"        // no source
        "gpu\tno\tno\tyes\tpools\tnothing here\n"},                // the sample lacks the word
       {"_tables/test_formats.tsv", "name\tregex\tsource\tsample\nok\t\\bab+c\\b\tdoc\txx abbbc yy\nbad\t\\bab+c\\b\tdoc\tabd\n"}});
  ASSERT_TRUE(lib);
  auto issues = ff::kb::lint_vocabulary(lib.value());
  auto about = [&](const std::string& key, const std::string& needle) {
    for (const auto& i : issues)
      if (i.name == key && i.message.find(needle) != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(about("rack", "path: the sample is not read as a host"));
  EXPECT_TRUE(about("dgx", "no source"));
  EXPECT_TRUE(about("gpu", "does not hold the word"));
  EXPECT_TRUE(about("bad", "the regex does not match the sample"));
  for (const auto& i : issues) EXPECT_NE(i.name, "node") << i.message;
  for (const auto& i : issues) EXPECT_NE(i.name, "ok") << i.message;
  EXPECT_EQ(issues.size(), 4u);
  // The built-in tables pass.
  EXPECT_TRUE(ff::kb::lint_vocabulary(builtin()).empty());
}

// The scan-first gate reads a line in full only when one of its patterns hits; the crash messages and job
// states that classify_line reads from kb/_tables must all be hit (extract::gate_patterns holds a superset).
TEST(kb_library, gate_covers_every_crash_message_and_job_state) {
  std::vector<std::unique_ptr<re2::RE2>> gate;
  for (const auto& p : ff::extract::gate_patterns()) gate.push_back(std::make_unique<re2::RE2>(p));
  for (const char* name : {"crash_messages", "job_states", "failure_words"}) {
    auto t = builtin().tables.find(name);
    ASSERT_NE(t, builtin().tables.end()) << name;
    ASSERT_FALSE(t->second.rows.empty()) << name;
    for (const auto& [key, cells] : t->second.rows) {
      const std::string sample = t->second.get(key, "sample");
      bool hit = false;
      for (const auto& re : gate) hit |= re2::RE2::PartialMatch(sample, *re);
      EXPECT_TRUE(hit) << name << " " << key << ": no gate pattern finds " << sample;
      // Known miss, kept as it was when the states moved to the table (a fix changes diagnoses: its own
      // commit): the pattern is \b(?:...)\b, and after "OUT_OF_ME+" a \b needs a word character, which
      // sacct's padded column never has.
      if (key == "OUT_OF_ME+") {
        EXPECT_EQ(ff::extract::classify_line(sample, 0), ff::extract::suspicion::none) << "fixed? drop this exception";
        continue;
      }
      EXPECT_NE(ff::extract::classify_line(sample, 0), ff::extract::suspicion::none) << name << " " << key << ": " << sample;
    }
  }
}

// kb/_tables/error_words.tsv: the gate finds every error row's sample, classify_line calls it wrong (weak or
// strong), and calls every zero row's sample fine (its error words are zero counts).
TEST(kb_library, gate_covers_every_error_word) {
  std::vector<std::unique_ptr<re2::RE2>> gate;
  for (const auto& p : ff::extract::gate_patterns()) gate.push_back(std::make_unique<re2::RE2>(p));
  const auto& t = builtin().tables.at("error_words");
  ASSERT_GE(t.order.size(), 10u);
  for (const auto& key : t.order) {
    const std::string sample = t.get(key, "sample");
    SCOPED_TRACE(key + ": " + sample);
    if (t.get(key, "kind") == "zero") {
      EXPECT_EQ(ff::extract::classify_line(sample, 0), ff::extract::suspicion::none);
      continue;
    }
    ASSERT_EQ(t.get(key, "kind"), "error");
    bool hit = false;
    for (const auto& re : gate) hit |= re2::RE2::PartialMatch(sample, *re);
    EXPECT_TRUE(hit) << "no gate pattern finds it";
    EXPECT_NE(ff::extract::classify_line(sample, 0), ff::extract::suspicion::none);
  }
}

TEST(kb_library, lint_reports_a_broken_signature) {
  auto lib = ff::kb::library::from_files({{"x/bad_signature_x.yaml", "title: t\nid: nope\nname: bad_signature\nrole: cause\nfingerprints: ['(?<=a)b']\n"}});
  ASSERT_TRUE(lib);
  auto issues = ff::kb::lint(lib.value());
  auto has = [&](const std::string& needle) {
    for (const auto& i : issues)
      if (i.message.find(needle) != std::string::npos) return true;
    return false;
  };
  EXPECT_TRUE(has("UUIDv4"));
  EXPECT_TRUE(has("file stem"));
  EXPECT_TRUE(has("missing field 'kind'"));
  EXPECT_TRUE(has("common subset"));
}

TEST(kb_library, user_directory_overrides_builtin_by_name) {
  auto base = ff::kb::library::from_files({{"a/torch_nccl_watchdog_timeout.yaml", "name: torch_nccl_watchdog_timeout\ntitle: A\n"},
                                           {"b/torch_nccl_watchdog_timeout.yaml", "name: torch_nccl_watchdog_timeout\ntitle: B\n"}});
  ASSERT_TRUE(base);
  ASSERT_EQ(base.value().signatures.size(), 1u);
  EXPECT_EQ(base.value().signatures[0].title, "B");
}

TEST(match, vectorscan_prefilter_is_confirmed_by_re2_and_extracts_fields) {
  const auto& lib = builtin();
  auto m = ff::match::matcher::compile(lib);
  ASSERT_TRUE(m) << m.error().message;
  ff::match::scratch s(m.value());
  std::vector<ff::match::hit> hits;
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(m.value().scan("Watchdog caught collective operation timeout: WorkNCCL(SeqNum=8812, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600012 milliseconds before timing out.", s, hits));
  bool found = false;
  for (const auto& h : hits) {
    if (lib.signatures[static_cast<std::size_t>(h.signature)].name != "torch_nccl_watchdog_timeout") continue;
    found = true;
    std::map<std::string, std::string> f(h.captured.begin(), h.captured.end());
    EXPECT_EQ(f["seq"], "8812");
    EXPECT_EQ(f["op"], "ALLREDUCE");
    EXPECT_EQ(f["timeout_ms"], "600000");
  }
  EXPECT_TRUE(found);
  hits.clear();
  ASSERT_TRUE(m.value().scan("step 10 loss 0.25 lr 1e-4", s, hits));
  EXPECT_TRUE(hits.empty());
}

// Engine errors are errors: a scratch that Vectorscan never allocated (here: made for an empty matcher)
// used with a real database makes hs_scan fail; before, the failure read as "no match" and the run as healthy.
TEST(match, an_engine_error_is_an_error_not_no_match) {
  auto m = ff::match::matcher::compile(builtin());
  ASSERT_TRUE(m);
  ff::match::matcher empty;
  ff::match::scratch none(empty);
  std::vector<ff::match::hit> hits;
  auto st = m.value().scan("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 MiB", none, hits);
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("hs_scan returned"), std::string::npos) << st.error().message;
  EXPECT_TRUE(hits.empty());
}

}  // namespace

namespace {
std::size_t watchdog_hits(const ff::match::matcher& m) {
  ff::match::scratch s(m);
  std::vector<ff::match::hit> hits;
  (void)m.scan("[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, Timeout(ms)=1) ran for 2 milliseconds before timing out.", s, hits);
  return hits.size();
}
}  // namespace

TEST(match_cache, compiled_database_is_cached_and_a_corrupt_cache_is_ignored) {
  auto dir = std::filesystem::temp_directory_path() / ("ff-cache-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  ::setenv("FIRSTFAULT_CACHE_DIR", dir.c_str(), 1);
  auto first = ff::match::matcher::compile(builtin());
  ASSERT_TRUE(first);
  std::size_t files = 0;
  for (auto& e : std::filesystem::directory_iterator(dir)) {
    ++files;
    EXPECT_GT(std::filesystem::file_size(e.path()), 1000u);
  }
  EXPECT_EQ(files, 1u);
  auto second = ff::match::matcher::compile(builtin());  // from the cache
  ASSERT_TRUE(second);
  EXPECT_EQ(watchdog_hits(first.value()), watchdog_hits(second.value()));
  EXPECT_GE(watchdog_hits(second.value()), 1u);
  for (auto& e : std::filesystem::directory_iterator(dir)) {
    std::ofstream(e.path(), std::ios::binary | std::ios::trunc) << "garbage";
  }
  auto third = ff::match::matcher::compile(builtin());  // corrupt cache: compiles again
  ASSERT_TRUE(third);
  EXPECT_EQ(watchdog_hits(third.value()), watchdog_hits(first.value()));
  ::unsetenv("FIRSTFAULT_CACHE_DIR");
  std::filesystem::remove_all(dir);
}

namespace {
// Every field of every signature, as text: two libraries compare equal only if nothing was lost.
std::string describe(const ff::kb::library& lib) {
  std::string out;
  auto list = [&out](const std::vector<std::string>& v) {
    for (const auto& x : v) out += x + '\x1f';
    out += '\x1e';
  };
  for (const auto& s : lib.signatures) {
    for (const auto* f : {&s.file, &s.title, &s.id, &s.name, &s.status, &s.level, &s.description, &s.author, &s.date, &s.kind,
                          &s.category, &s.inferred_by, &s.lookup_table, &s.lookup_field,
                          &s.root_cause})
      out += *f + '\x1f';
    out += std::string(ff::kb::to_string(s.role)) + ' ' + std::string(ff::kb::to_string(s.layer)) + ' ' + ff::kb::to_string(s.initiator) + ' ';
    out += std::to_string(s.line_of_name) + ' ' + std::to_string(s.priority) + ' ' + std::to_string(s.match_in_stack);
    for (const auto* v : {&s.references, &s.tags, &s.systems, &s.collateral_of, &s.related, &s.fingerprints, &s.extract, &s.fix,
                          &s.verify, &s.confirm, &s.prevention, &s.falsepositives, &s.field_order, &s.macros_used})
      list(*v);
    for (const auto& c : s.fix_code) out += c.stack + '\x1f' + c.code + '\x1e';
    for (const auto* exs : {&s.positive, &s.negative})
      for (const auto& e : *exs) {
        out += e.line;
        for (const auto& [k, v] : e.expect) out += k + '=' + v + '\x1f';
        out += '\x1e';
      }
    out += '\n';
  }
  return out;
}
}  // namespace

TEST(kb_cache, parsed_signatures_come_back_whole_and_a_corrupt_cache_is_ignored) {
  auto dir = std::filesystem::temp_directory_path() / ("ff-kbcache-" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  ::setenv("FIRSTFAULT_CACHE_DIR", "off", 1);
  auto reference = ff::kb::library::load(true, {});  // parsed from YAML, no cache involved
  ASSERT_TRUE(reference);
  ::setenv("FIRSTFAULT_CACHE_DIR", dir.c_str(), 1);
  auto first = ff::kb::library::load(true, {});  // parses, stores the cache
  ASSERT_TRUE(first);
  std::vector<std::filesystem::path> caches;
  for (auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().filename().string().rfind("kb-", 0) == 0) caches.push_back(e.path());
  ASSERT_EQ(caches.size(), 1u);
  auto second = ff::kb::library::load(true, {});  // from the cache
  ASSERT_TRUE(second);
  EXPECT_GT(reference.value().signatures.size(), 100u);
  EXPECT_EQ(describe(second.value()), describe(reference.value()));
  EXPECT_EQ(second.value().content_hash, reference.value().content_hash);
  std::ofstream(caches[0], std::ios::binary | std::ios::trunc) << "\xa1garbage";
  auto third = ff::kb::library::load(true, {});  // corrupt cache: parsed again
  ASSERT_TRUE(third);
  EXPECT_EQ(describe(third.value()), describe(reference.value()));
  // A changed file is a different cache entry: an edited signature is never served stale.
  auto files = std::vector<std::pair<std::string, std::string>>{
      {"kinds.tsv", "kind\tcategory\tmeaning\ncuda_oom\tresource\tout of memory\n"},
      {"a.yaml", "title: A\nid: 00000000-0000-4000-8000-000000000001\nname: a\nkind: cuda_oom\nrole: cause\n"}};
  auto x1 = ff::kb::library::from_files(files);
  files[1].second = "title: B\nid: 00000000-0000-4000-8000-000000000001\nname: a\nkind: cuda_oom\nrole: cause\n";
  auto x2 = ff::kb::library::from_files(files);
  ASSERT_TRUE(x1);
  ASSERT_TRUE(x2);
  EXPECT_EQ(x1.value().signatures.at(0).title, "A");
  EXPECT_EQ(x2.value().signatures.at(0).title, "B");
  ::unsetenv("FIRSTFAULT_CACHE_DIR");
  std::filesystem::remove_all(dir);
}

// Which fingerprints the gate reads by their literals: a literal found in healthy text (the healthy-lines
// table, another benign signature's samples) is too common, one found only in negative examples is not.
TEST(gate_atoms, common_means_found_in_healthy_text_not_in_negatives) {
  ::setenv("FIRSTFAULT_CACHE_DIR", "off", 1);
  auto sig = [](const std::string& name, const std::string& fp, const std::string& role, const std::string& extra) {
    return std::pair<std::string, std::string>{
        "a/" + name + ".yaml", "title: T\nid: 00000000-0000-4000-8000-00000000000" + std::to_string(name.size() % 10) + "\nname: " + name +
                                   "\nkind: cuda_oom\nrole: " + role + "\nfingerprints: ['" + fp + "']\n" + extra};
  };
  auto lib = ff::kb::library::from_files({
      {"kinds.tsv", "kind\tcategory\tmeaning\ncuda_oom\tresource\tout of memory\n"},
      {"_tables/healthy_lines.tsv", "line\tsource\nstep 5 loss 2.1 lr 0.001\ttest\n"},
      sig("loss_is_nan", "\\bloss\\s*=\\s*nan\\b", "cause", ""),
      sig("allocator_oom", "CUDA out of memory", "cause",
          "examples:\n    negative:\n        - line: 'CUDA out of memory was expected here'\n"),
      sig("benign_banner", "Banner line for the healthy job", "benign",
          "examples:\n    positive:\n        - line: 'Banner line for the healthy job'\n"),
      sig("uses_banner", "for the healthy job.*boom", "cause", ""),
  });
  ASSERT_TRUE(lib) << lib.error().message;
  auto g = ff::match::gate::build(lib.value(), {});
  ASSERT_TRUE(g) << g.error().message;
  std::string gated;
  for (const auto& r : g.value().regex_gated()) gated += r + "\n";
  EXPECT_NE(gated.find("loss_is_nan:"), std::string::npos) << gated;      // "loss" is in the table
  EXPECT_EQ(gated.find("allocator_oom:"), std::string::npos) << gated;    // only in its negative
  EXPECT_EQ(gated.find("benign_banner:"), std::string::npos) << gated;    // its own sample
  EXPECT_NE(gated.find("uses_banner:"), std::string::npos) << gated;      // another benign's sample
  ff::match::gate_scratch s(g.value());
  for (const char* line : {"loss = nan at step 3", "[rank1]: CUDA out of memory. Tried", "Banner line for the healthy job", "a line for the healthy job, then boom"}) {
    auto hit = g.value().hit(line, s);
    ASSERT_TRUE(hit);
    EXPECT_TRUE(hit.value()) << line;
  }
  auto quiet = g.value().hit("step 5 loss 2.1 lr 0.001", s);
  ASSERT_TRUE(quiet);
  EXPECT_FALSE(quiet.value());
  ::unsetenv("FIRSTFAULT_CACHE_DIR");
}

// Each line's gate verdict is `want` (and the scan itself succeeds).
static void expect_gate(const ff::match::gate& g, std::initializer_list<const char*> lines, bool want) {
  ff::match::gate_scratch s(g);
  for (const char* line : lines) {
    auto hit = g.hit(line, s);
    ASSERT_TRUE(hit) << line;
    EXPECT_EQ(hit.value(), want) << line;
  }
}

// A fingerprint whose literals are all common is gated by a run of its top-level concatenation that no
// healthy line matches, with the assertions beside it; never by a run that a healthy line matches.
TEST(gate_atoms, common_literals_gate_on_a_rare_run) {
  std::string flags;
  auto el = ff::match::top_level_elements(R"((?i)\bloss\s*[:=]\s*[-+]?(?:nan|inf)\b)", &flags);
  EXPECT_EQ(flags, "(?i)");
  std::vector<std::string> want = {"\\b", "loss", "\\s*", "[:=]", "\\s*", "[-+]?", "(?:nan|inf)", "\\b"};
  EXPECT_EQ(el, want);
  EXPECT_TRUE(ff::match::top_level_elements("a|b", &flags).empty());            // an alternation
  EXPECT_EQ(ff::match::top_level_elements(R"(Xid \((?:PCI:)?x{2,3}?)", &flags).size(), 3u);  // "Xid \(", group, x{2,3}?
  ::setenv("FIRSTFAULT_CACHE_DIR", "off", 1);
  auto lib = ff::kb::library::from_files({
      {"kinds.tsv", "kind\tcategory\tmeaning\nloss_nan\tnumerics\tnan\n"},
      {"_tables/healthy_lines.tsv", "line\tsource\nstep 5 loss: 2.1 | number of nan iterations: 0\ttest\nNCCL INFO ok\ttest\n"},
      {"a/nan.yaml", "title: T\nid: 00000000-0000-4000-8000-000000000001\nname: loss_nan\nkind: loss_nan\nrole: cause\n"
                     "fingerprints: ['(?i)\\bloss\\s*[:=]\\s*[-+]?(?:nan|inf)\\b']\n"},
  });
  ASSERT_TRUE(lib) << lib.error().message;
  auto g = ff::match::gate::build(lib.value(), {});
  ASSERT_TRUE(g) << g.error().message;
  ASSERT_EQ(g.value().regex_gated().size(), 1u);
  const auto& r = g.value().regex_gated()[0];
  // "(?:nan|inf)\b" alone matches the healthy "nan iterations": the run must start at [:=]
  EXPECT_NE(r.find("loss_nan: (?i)[:=]"), std::string::npos) << r;
  EXPECT_NE(r.find("(?:nan|inf)\\b  (a run of:"), std::string::npos) << r;
  expect_gate(g.value(), {"loss: nan", "loss=inf", "LOSS :  -NaN"}, true);
  expect_gate(g.value(), {"step 5 loss: 2.1 | number of nan iterations: 0", "NCCL INFO comm 0x1 rank 3 nranks 8"}, false);
  ::unsetenv("FIRSTFAULT_CACHE_DIR");
}

// A stage's pattern without a rare literal is narrowed like a fingerprint, to a run holding an atom of
// kMinAtom bytes that no healthy line matches; ties go to the run with fewer unbounded repeats, so a
// command-line secret rule is gated on its keywords, not on `--[-\w.]*` before them. A run of only
// short atoms (`\d\] ` of a host prefix rule) is never taken: the whole pattern stays.
TEST(gate_atoms, stage_patterns_gate_on_a_rare_run_with_a_long_atom) {
  ::setenv("FIRSTFAULT_CACHE_DIR", "off", 1);
  auto lib = ff::kb::library::from_files({
      {"kinds.tsv", "kind\tcategory\tmeaning\ncuda_oom\tresource\tout of memory\n"},
      {"_tables/healthy_lines.tsv", "line\tsource\niteration: 3 | tokens_per_sec: 22.8K | lm_loss: 2.38\ttest\n"},
  });
  ASSERT_TRUE(lib) << lib.error().message;
  const std::string flag_rule = R"((?i)--[-\w.]*(?:password|token|secret|sig)(?:[_-](?:b64|value))?(?:\s+|=)((?:\\/|[^\s"'\\,;&{}\[])+))";
  const std::string host_rule = R"(^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] ([A-Za-z][\w.-]*) \[\d+\] )";
  auto g = ff::match::gate::build(lib.value(), {flag_rule, host_rule});
  ASSERT_TRUE(g) << g.error().message;
  const auto& re = g.value().stage_regexps();
  ASSERT_EQ(re.size(), 2u);
  std::vector<std::string> want = {R"((?i)(?:password|token|secret|sig)(?:[_-](?:b64|value))?(?:\s+|=))", host_rule};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(re, want);
  expect_gate(g.value(), {"python train.py --hf-token hf_abc", "torchrun x.py --db_password=s3cret", "[2026-01-02 03:04:05] node-7 [12] started"}, true);
  expect_gate(g.value(), {"iteration: 3 | tokens_per_sec: 22.8K | lm_loss: 2.38", "[default0]:node-01:1:1 [0] NCCL INFO x"}, false);
  ::unsetenv("FIRSTFAULT_CACHE_DIR");
}

// within_line: classes that hold '\n' lose it, so a gate regexp cannot run from one line of a block into
// the next (`\s+(?:\S*/)?python` hit "[default1]:/usr/lib/python3/..." through the '\n' before it), while
// on one line it matches where the original does (RE2 on lines of the bytes the classes are about).
TEST(gate_atoms, regexps_stay_within_a_line) {
  using ff::match::within_line;
  EXPECT_EQ(within_line(R"(\s+(?:\S*/)?python\b)"), R"([\t\x0b\x0c\r ]+(?:\S*/)?python\b)");
  EXPECT_EQ(within_line(R"(a[^.;]{0,30}b[^\s]c)"), R"(a[^\n.;]{0,30}b[^\n\t\x0b\x0c\r ]c)");
  EXPECT_EQ(within_line(R"(\W\D[\s:]\x{41}\p{L}[]x][[:alpha:]]\\s)"), R"([^\w\n][^\d\n][\t\x0b\x0c\r :]\x{41}\p{L}[]x][[:alpha:]]\\s)");
  // each regexp, and a text where it matches only across a line end
  const std::vector<std::pair<std::string, std::string>> res = {{R"(\s+(?:\S*/)?python\b)", "end\n/usr/lib/python x"},
                                                                {R"(a[^.;]{0,30}b)", "a\nb"},
                                                                {R"(x\W+y\D+z)", "x\ny\nz"},
                                                                {R"(k[^:]=)", "k\n="}};
  const std::vector<std::string> lines = {" /usr/lib/python3 x", "[rank1]:/usr/lib/python3", "a, b", "a.b", "x -- y z", "x  yz", "xy1z",
                                          "k v=", "kv=", "a\tb", "\tpython"};
  for (const auto& [r, across] : res) {
    re2::RE2 a(r), b(within_line(r));
    ASSERT_TRUE(a.ok() && b.ok()) << r;
    for (const auto& l : lines) EXPECT_EQ(re2::RE2::PartialMatch(l, a), re2::RE2::PartialMatch(l, b)) << r << " on " << l;
    EXPECT_TRUE(re2::RE2::PartialMatch(across, a)) << r;  // across a line end: only the original
    EXPECT_FALSE(re2::RE2::PartialMatch(across, b)) << r;
  }
  // The gate's block scan gives a line after a line ending in whitespace no hit of its own.
  ::setenv("FIRSTFAULT_CACHE_DIR", "off", 1);
  // (a healthy line holding "python": the pattern is gated by a regexp, not by its literals)
  auto lib = ff::kb::library::from_files({{"kinds.tsv", "kind\tcategory\tmeaning\nx\tresource\tx\n"},
                                          {"_tables/healthy_lines.tsv", "line\tsource\n/usr/lib/python3/x.py:1: UserWarning: w\ttest\n"}});
  ASSERT_TRUE(lib) << lib.error().message;
  auto g = ff::match::gate::build(lib.value(), {R"(\s+(?:\S*/)?(?:python[\d.]*|torchrun)\b)"});
  ASSERT_TRUE(g) << g.error().message;
  ASSERT_EQ(g.value().stage_regexps().size(), 1u);
  ff::match::gate_scratch sc(g.value());
  const std::string block = "ps: 12 D /usr/bin/python3\n[default1]:/usr/lib/python3/dist-packages/x.py:1: UserWarning: w\n";
  std::vector<char> hit;
  ASSERT_TRUE(g.value().hit_lines(block, {0, static_cast<std::uint32_t>(block.find('\n') + 1)}, hit, sc));
  EXPECT_EQ(hit, (std::vector<char>{1, 0}));
  ::unsetenv("FIRSTFAULT_CACHE_DIR");
}

// left_context_literals: every match of the run holds one of the literals (checked by RE2 on random text
// over the runs' own bytes); none is a literal `usable` refused; it gives up rather than guess.
TEST(gate_atoms, left_context_literals_cover_every_match) {
  // text a healthy run prints: what the literals must not be found in
  const std::vector<std::string> healthy = {"node-a:41695:41772 [0] nccl info trees", "| number of nan iterations:   0 |",
                                            "2026-11-30 02:14:01,992 info    [rank2] trainer", "lm loss: 7.9e+00 | loss scale: 1638"};
  auto usable = [&](const std::string& x) {
    if (x.size() < 4) return false;
    std::string l = x;
    std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return std::tolower(c); });
    return std::none_of(healthy.begin(), healthy.end(), [&](const std::string& h) { return h.find(l) != std::string::npos; });
  };
  const std::vector<std::string> runs = {R"((?i)[:=]\s*[-+]?(?:nan|inf)\b)", R"((?i)\([-+]?(?:nan|inf)\b)", R"(\s+\d+ \| loss scale:)",
                                         R"(\): 137\b)", R"(xx[ab]?\+y)"};
  ff::testing::lcg next(7);
  const std::string alphabet = ":= \t-+(|)0137naifNAIFxyab\\+ losscale";
  for (const auto& run : runs) {
    auto lits = ff::match::left_context_literals(run, usable);
    ASSERT_FALSE(lits.empty()) << run;
    for (const auto& l : lits) EXPECT_TRUE(usable(l)) << run << ": " << l;
    re2::RE2 re(run);
    ASSERT_TRUE(re.ok()) << run;
    int matched = 0;
    for (int i = 0; i < 200000; ++i) {
      std::string t;
      std::size_t len = next() % 24;
      for (std::size_t k = 0; k < len; ++k) t += alphabet[next() % alphabet.size()];
      // and pieces of the run's own literals, so that matches are not rare
      if (next() % 2) t.insert(next() % (t.size() + 1), std::vector<std::string>{"nan", "INF", " | loss scale:", "): 137", "xx+y", "xxa+y"}[next() % 6]);
      if (!re2::RE2::PartialMatch(t, re)) continue;
      ++matched;
      std::string lower = t;
      std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
      bool covered = std::any_of(lits.begin(), lits.end(), [&](const std::string& l) { return lower.find(l) != std::string::npos; });
      ASSERT_TRUE(covered) << run << " matches '" << t << "' but no literal is in it";
    }
    EXPECT_GT(matched, 50) << run;
  }
  // " inf" and "inf" alone are refused and the run starts with the anchor: nothing before it is known
  EXPECT_TRUE(ff::match::left_context_literals(R"((?i)(?:nan|inf)\b)", usable).empty());
  // an element it does not read (`.`, a negated class) stands before the only literal
  EXPECT_TRUE(ff::match::left_context_literals(R"(.[^a]nan\b)", usable).empty());
  // a long run of optional classes: C(60,3) ways to find the 3 bytes before "xy", few distinct literals;
  // the search gives up at its bound on the work instead of walking them all
  std::string many = "zzz";
  for (int k = 0; k < 60; ++k) many += "[ab]?";
  EXPECT_TRUE(ff::match::left_context_literals(many + "xy", [](const std::string& x) { return x.size() >= 5; }).empty());
  // a literal usable as it is needs no context
  EXPECT_EQ(ff::match::left_context_literals(R"(\): 137\b)", usable), std::vector<std::string>{"): 137"});
}

// Soundness of the gate on the knowledge base itself: every positive example of every signature (a line
// its fingerprints match) is a line the gate sends the full way.
TEST(gate_atoms, every_positive_example_passes_the_gate) {
  const auto& eng = ff::testing::engine();
  ASSERT_TRUE(eng.gate.enabled());
  ff::match::gate_scratch s(eng.gate);
  std::size_t n = 0;
  for (const auto& sig : eng.lib->signatures)
    for (const auto& e : sig.positive) {
      if (sig.fingerprints.empty()) continue;  // inferred by the correlator from other findings, not matched
      auto hit = eng.gate.hit(e.line, s);
      ASSERT_TRUE(hit);
      EXPECT_TRUE(hit.value()) << sig.name << ": " << e.line;
      ++n;
    }
  EXPECT_GT(n, 500u);
}

// The block scan must hit every line the per-line scan hits (the light path relies on it), on every log
// of the test corpus, with blocks cut at arbitrary lines.
TEST(gate_block, hits_every_line_the_per_line_gate_hits) {
  const auto& gate = ff::testing::engine().gate;
  ASSERT_TRUE(gate.enabled());
  ff::match::gate_scratch gs(gate);
  std::size_t lines = 0, hit = 0, block_only = 0;
  for (const auto& c : std::filesystem::directory_iterator(std::filesystem::path(FF_TEST_DATA) / "corpus")) {
    if (!std::filesystem::is_directory(c.path() / "logs")) continue;
    for (const auto& f : std::filesystem::recursive_directory_iterator(c.path() / "logs")) {
      if (!f.is_regular_file()) continue;
      std::ifstream in(f.path(), std::ios::binary);
      std::vector<std::string> all;
      for (std::string l; std::getline(in, l);) all.push_back(l);
      {
        const auto* g = &gate;
        auto& scratch = gs;
        ff::pipeline::line_block blk;
        auto check = [&] {
          std::vector<char> got;
          ASSERT_TRUE(g->hit_lines(blk.text, blk.starts, got, scratch));
          ASSERT_EQ(got.size(), blk.size());
          for (std::size_t i = 0; i < blk.size(); ++i) {
            auto one = g->hit(blk.line(i), scratch);
            ASSERT_TRUE(one);
            if (one.value()) {
              EXPECT_TRUE(got[i]) << f.path() << ":" << blk.line_nos[i] << ": " << blk.line(i);
            }
            ++lines;
            hit += one.value();
            block_only += got[i] && !one.value();
          }
          blk.clear();
        };
        for (std::size_t i = 0; i < all.size(); ++i) {
          blk.add(all[i], i + 1);
          if (blk.size() == 1 + (i * 7919) % 97) check();  // uneven block sizes
        }
        check();
      }
    }
  }
  EXPECT_GT(lines, 10000u);
  EXPECT_GT(hit, 100u);
  EXPECT_LT(block_only * 20, lines) << "the block scan should add few lines the per-line scan does not hit";
}

namespace {
// The signature fields the correlator reads are parsed once at load; anything else is `unknown` for lint.
TEST(kb_fields, role_layer_and_initiator_are_parsed_once) {
  using ff::kb::initiator;
  using how = initiator::how;
  EXPECT_EQ(ff::kb::parse_role("cause"), ff::kb::role::cause);
  EXPECT_EQ(ff::kb::parse_role("symptom"), ff::kb::role::symptom);
  EXPECT_EQ(ff::kb::parse_role("benign"), ff::kb::role::benign);
  EXPECT_EQ(ff::kb::parse_role("Cause"), ff::kb::role::unknown);
  EXPECT_EQ(ff::kb::parse_role(""), ff::kb::role::unknown);
  EXPECT_EQ(ff::kb::parse_layer(""), ff::kb::layer::specific);
  EXPECT_EQ(ff::kb::parse_layer("family"), ff::kb::layer::family);
  EXPECT_EQ(ff::kb::parse_layer("generic"), ff::kb::layer::generic);
  EXPECT_EQ(ff::kb::parse_layer("broad"), ff::kb::layer::unknown);
  struct row {
    const char* text;
    initiator want;
  };
  for (const auto& r : {row{"", {how::none, 0}}, row{"printing_rank", {how::printing_rank, 0}}, row{"named_rank", {how::named_rank, 0}},
                        row{"rank_zero", {how::rank_zero, 0}}, row{"exit_code:1", {how::exit_code, 1}},
                        row{"exit_code:-6", {how::exit_code, -6}}, row{"exit_code:", {how::unknown, 0}},
                        row{"exit_code:1x", {how::unknown, 0}}, row{"exit_code:99999999999", {how::unknown, 0}},
                        row{"printing rank", {how::unknown, 0}}}) {
    EXPECT_EQ(ff::kb::parse_initiator(r.text), r.want) << r.text;
    if (r.want.kind != how::unknown) {
      EXPECT_EQ(ff::kb::to_string(ff::kb::parse_initiator(r.text)), r.text);
    }
  }
}
}  // namespace

namespace {
TEST(kb_macros, expand_names_lists_and_refuse_unknown_ones) {
  ff::kb::macro_table t;
  t.macros["xid_at"] = R"(Xid \(PCI:[0-9a-f:.]+\): )";
  t.lists["xid_fields"] = {"(?P<pci>a)", "(?P<pid>b)"};
  std::vector<std::string> p = {"%{xid_at}79\\b", "@xid_fields", "plain", "%{xid_at}%{xid_at}"};
  std::vector<std::string> used;
  ASSERT_TRUE(ff::kb::expand_macros(t, p, &used));
  EXPECT_EQ(p, (std::vector<std::string>{R"(Xid \(PCI:[0-9a-f:.]+\): 79\b)", "(?P<pci>a)", "(?P<pid>b)", "plain",
                                         R"(Xid \(PCI:[0-9a-f:.]+\): Xid \(PCI:[0-9a-f:.]+\): )"}));
  EXPECT_EQ(used, (std::vector<std::string>{"%{xid_at}", "@xid_fields"}));
  for (const char* bad : {"%{nope}x", "@nope", "%{xid_at"}) {
    std::vector<std::string> q = {bad};
    auto r = ff::kb::expand_macros(t, q);
    ASSERT_FALSE(r) << bad;
    EXPECT_EQ(r.error().code, ff::errc::knowledge_base);
  }
}

// A signature file that names an unknown macro fails to load, naming the file; one that spells out a
// list's patterns is a lint problem; a definition nobody uses is one too.
TEST(kb_macros, load_and_lint) {
  const std::string macros = "macros:\n  xid_at: 'Xid \\((?:PCI:)?[0-9A-Fa-f:.]+\\): '\nlists:\n  two: ['(?P<a>x)', '(?P<b>y)']\n  unused_list: ['z']\n";
  auto sig = [](const std::string& name, const std::string& fp, const std::string& ex) {
    return "title: t\nname: " + name + "\nrole: cause\nfingerprints: ['" + fp + "']\nextract: [" + ex + "]\n";
  };
  auto bad = ff::kb::library::from_files({{"_macros/x/m.yaml", macros}, {"x/a_signature.yaml", sig("a_signature", "%{nope}1", "")}});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("x/a_signature.yaml"), std::string::npos);
  EXPECT_NE(bad.error().message.find("%{nope}"), std::string::npos);
  auto lib = ff::kb::library::from_files({{"_macros/x/m.yaml", macros},
                                          {"x/uses_macros_ok.yaml", sig("uses_macros_ok", "%{xid_at}79", "'@two'")},
                                          {"x/copies_list_x.yaml", sig("copies_list_x", "Xid \\((?:PCI:)?[0-9A-Fa-f:.]+\\): 48", "'(?P<a>x)', '(?P<b>y)'")}});
  ASSERT_TRUE(lib) << lib.error().message;
  const auto* ok = lib.value().find("uses_macros_ok");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->fingerprints.front(), "Xid \\((?:PCI:)?[0-9A-Fa-f:.]+\\): 79");
  EXPECT_EQ(ok->extract, (std::vector<std::string>{"(?P<a>x)", "(?P<b>y)"}));
  auto issues = ff::kb::lint_macros(lib.value());
  auto has = [&](const std::string& name, const std::string& words) {
    return std::any_of(issues.begin(), issues.end(), [&](const auto& i) { return i.name == name && i.message.find(words) != std::string::npos; });
  };
  EXPECT_TRUE(has("copies_list_x", "repeats the patterns of list two"));
  EXPECT_TRUE(has("copies_list_x", "spells out macro xid_at"));
  EXPECT_TRUE(has("unused_list", "no signature uses it"));
  EXPECT_FALSE(has("uses_macros_ok", ""));
  EXPECT_EQ(issues.size(), 3u);
}
}  // namespace

namespace {
// The areas are data: a built-in file's folder must be an area and its name one of that area's prefixes.
TEST(kb_areas, folder_and_name_prefix_agree) {
  const std::string areas = "area\tprefixes\tcovers\ngpu\tgpu,xid\tGPUs\ntrain\ttrain\ttraining\n";
  auto sig = [](const std::string& name) { return "title: t\nname: " + name + "\nrole: cause\nfingerprints: ['x']\n"; };
  auto lib = ff::kb::library::from_files({{"builtin:_tables/areas.tsv", areas},
                                          {"builtin:gpu/xid_99_example.yaml", sig("xid_99_example")},
                                          {"builtin:gpu/train_in_gpu_folder.yaml", sig("train_in_gpu_folder")},
                                          {"builtin:numerics/train_old_folder.yaml", sig("train_old_folder")},
                                          {"/home/me/kb/train_user_file.yaml", sig("train_user_file")},
                                          {"/home/me/kb/zzz_user_file.yaml", sig("zzz_user_file")}});
  ASSERT_TRUE(lib) << lib.error().message;
  auto issues = ff::kb::lint(lib.value());
  auto area_issue = [&](const std::string& name) {
    for (const auto& i : issues)
      if (i.name == name && (i.message.find("area") != std::string::npos)) return i.message;
    return std::string();
  };
  EXPECT_EQ(area_issue("xid_99_example"), "");
  EXPECT_NE(area_issue("train_in_gpu_folder").find("gpu,xid"), std::string::npos);
  EXPECT_NE(area_issue("train_old_folder").find("folder 'numerics' is not an area"), std::string::npos);
  EXPECT_EQ(area_issue("train_user_file"), "");
  EXPECT_NE(area_issue("zzz_user_file").find("prefix of an area"), std::string::npos);
}
}  // namespace

namespace {
TEST(kb_macros, one_level_only_and_only_under_a_macros_folder) {
  auto nested = ff::kb::library::from_files({{"_macros/x/m.yaml", "macros:\n  a: 'x'\n  b: '%{a}y'\n"}});
  ASSERT_FALSE(nested);
  EXPECT_NE(nested.error().message.find("one level only"), std::string::npos);
  // a --kb path that merely contains "_macros/" is a signature file, not a macro file
  auto lib = ff::kb::library::from_files(
      {{"/home/me/team_macros/nccl_example_sig.yaml", "title: t\nname: nccl_example_sig\nrole: cause\nfingerprints: ['x']\n"}});
  ASSERT_TRUE(lib) << lib.error().message;
  EXPECT_TRUE(lib.value().find("nccl_example_sig"));
}
}  // namespace

namespace {
// Issue 46: a verify entry is a pass/fail check. It states after "  # " what it prints once the problem is
// fixed, and it runs once: a refresh loop or a live monitor (nvidia-smi -l, watch, tail -f, kubectl top,
// dmon, top) gives numbers to stare at, not a verdict.
TEST(kb_lint, verify_states_its_pass_result_and_does_not_only_watch) {
  auto sig = [](const std::string& name, const std::string& verify) {
    return "title: t\nname: " + name + "\nrole: cause\nfingerprints: ['x']\nverify:\n    - '" + verify + "'\n";
  };
  auto lib = ff::kb::library::from_files(
      {{"x/verify_passes_ok.yaml", sig("verify_passes_ok", "torchrun --nproc_per_node {nproc|2} {script|train.py} 2>&1 | grep -c ''CUDA out of memory''  # 0")},
       {"x/verify_one_shot_ok.yaml", sig("verify_one_shot_ok", "nvidia-smi --query-gpu=index,memory.used,memory.total --format=csv,noheader  # memory.used below memory.total on every GPU")},
       {"x/verify_no_result.yaml", sig("verify_no_result", "nvidia-smi --query-gpu=index,memory.used,memory.total --format=csv")},
       {"x/verify_empty_result.yaml", sig("verify_empty_result", "nvidia-smi -L  # ")},
       {"x/verify_nvsmi_loop.yaml", sig("verify_nvsmi_loop", "nvidia-smi --query-gpu=index,memory.used --format=csv -l 5  # memory.used stays low")},
       {"x/verify_watch_loop.yaml", sig("verify_watch_loop", "watch -n 1 nvidia-smi  # no errors")},
       {"x/verify_tail_follow.yaml", sig("verify_tail_follow", "tail -f $LOG  # no errors")},
       {"x/verify_kubectl_top.yaml", sig("verify_kubectl_top", "kubectl top pod $POD  # below the limit")},
       {"x/verify_dcgm_dmon.yaml", sig("verify_dcgm_dmon", "dcgmi dmon -e 203  # low")},
       {"x/verify_top_live.yaml", sig("verify_top_live", "top -u $USER  # memory below the limit")}});
  ASSERT_TRUE(lib) << lib.error().message;
  auto issues = ff::kb::lint(lib.value());
  auto has = [&](const std::string& name, const std::string& words) {
    return std::any_of(issues.begin(), issues.end(), [&](const auto& i) { return i.name == name && i.message.find(words) != std::string::npos; });
  };
  for (const char* ok : {"verify_passes_ok", "verify_one_shot_ok"}) {
    EXPECT_FALSE(has(ok, "pass result")) << ok;
    EXPECT_FALSE(has(ok, "only watches")) << ok;
  }
  EXPECT_TRUE(has("verify_no_result", "verify states no pass result"));
  EXPECT_TRUE(has("verify_empty_result", "verify states no pass result"));
  EXPECT_TRUE(has("verify_nvsmi_loop", "only watches (nvidia-smi -l"));
  EXPECT_TRUE(has("verify_watch_loop", "only watches (watch"));
  EXPECT_TRUE(has("verify_tail_follow", "only watches (tail -f"));
  EXPECT_TRUE(has("verify_kubectl_top", "only watches (kubectl top"));
  EXPECT_TRUE(has("verify_dcgm_dmon", "only watches (dmon"));
  EXPECT_TRUE(has("verify_top_live", "only watches (top"));
  // nvidia-smi -L lists the GPUs once; ulimit -l is not a loop
  auto lib2 = ff::kb::library::from_files({{"x/verify_list_once.yaml", sig("verify_list_once", "nvidia-smi -L; ulimit -l  # every GPU listed; unlimited")}});
  ASSERT_TRUE(lib2);
  for (const auto& i : ff::kb::lint(lib2.value()))
    EXPECT_TRUE(i.message.find("pass result") == std::string::npos && i.message.find("only watches") == std::string::npos) << i.message;
}
}  // namespace
