// The language server's pure parts (lsp.hpp): framing, URIs, line widths, which documents are logs, and a
// real diagnosis turned into diagnostics. The session itself is driven by tests/lsp/ (a scripted client
// and headless Neovim against the binary).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include "firstfault/lsp.hpp"
#include "test_support.hpp"

namespace {

namespace fs = std::filesystem;
using ff::lsp::read_status;

TEST(lsp_framing, a_framed_message_reads_back_whole_and_two_in_a_row_stay_apart) {
  nlohmann::json a{{"jsonrpc", "2.0"}, {"id", 1}, {"method", "initialize"}, {"params", {{"x", "é\r\n"}}}};
  nlohmann::json b{{"jsonrpc", "2.0"}, {"method", "exit"}};
  std::istringstream in(ff::lsp::frame(a) + ff::lsp::frame(b));
  std::string body, err;
  ASSERT_EQ(ff::lsp::read_message(in, body, err, 1 << 20), read_status::message) << err;
  EXPECT_EQ(nlohmann::json::parse(body), a);
  ASSERT_EQ(ff::lsp::read_message(in, body, err, 1 << 20), read_status::message) << err;
  EXPECT_EQ(nlohmann::json::parse(body), b);
  EXPECT_EQ(ff::lsp::read_message(in, body, err, 1 << 20), read_status::eof);
}

TEST(lsp_framing, headers_in_any_case_with_a_content_type_are_read) {
  std::istringstream in("content-length: 2\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n{}");
  std::string body, err;
  ASSERT_EQ(ff::lsp::read_message(in, body, err, 100), read_status::message) << err;
  EXPECT_EQ(body, "{}");
}

struct bad_frame {
  const char* name;
  std::string input;
  const char* reason;  // a word the error must contain
};

class lsp_bad_frames : public ::testing::TestWithParam<bad_frame> {};

TEST_P(lsp_bad_frames, are_an_error_that_says_why) {
  std::istringstream in(GetParam().input);
  std::string body, err;
  EXPECT_EQ(ff::lsp::read_message(in, body, err, 1000), read_status::error);
  EXPECT_NE(err.find(GetParam().reason), std::string::npos) << err;
}

INSTANTIATE_TEST_SUITE_P(
    lsp, lsp_bad_frames,
    ::testing::Values(bad_frame{"no_length", "Content-Type: x\r\n\r\n{}", "without a Content-Length"},
                      bad_frame{"length_not_a_number", "Content-Length: 12a\r\n\r\n{}", "not a number"},
                      bad_frame{"negative_length", "Content-Length: -1\r\n\r\n{}", "not a number"},
                      bad_frame{"too_large", "Content-Length: 5000\r\n\r\n{}", "over the 1000 byte limit"},
                      bad_frame{"body_cut_short", "Content-Length: 10\r\n\r\n{}", "ended inside a message (2 of 10"},
                      bad_frame{"header_cut_short", "Content-Length: 10", "ended inside a message header"},
                      bad_frame{"no_colon", "garbage\r\n\r\n", "without ':'"},
                      bad_frame{"endless_header", std::string(5000, 'x'), "longer than 1024"}),
    [](const auto& info) { return std::string(info.param.name); });

TEST(lsp_uri, paths_with_spaces_percent_and_unicode_go_to_uris_and_back) {
  for (std::string p : {"/tmp/a b/rank 3.log", "/x/100%/é.log", "/plain/path.out", "/a/#hash?.log"}) {
    std::string uri = ff::lsp::path_to_uri(p);
    EXPECT_EQ(uri.rfind("file:///", 0), 0u) << uri;
    EXPECT_EQ(uri.find(' '), std::string::npos) << uri;
    EXPECT_EQ(ff::lsp::uri_to_path(uri).value_or("?"), p) << uri;
  }
  EXPECT_EQ(ff::lsp::path_to_uri("/a b"), "file:///a%20b");
  EXPECT_EQ(ff::lsp::uri_to_path("file://localhost/var/log/x.log").value_or("?"), "/var/log/x.log");
  EXPECT_EQ(ff::lsp::uri_to_path("FILE:///var/log/x.log").value_or("?"), "/var/log/x.log");
}

TEST(lsp_uri, other_schemes_remote_hosts_and_nul_bytes_are_not_local_paths) {
  for (std::string u : {"untitled:Untitled-1", "https://example.com/x.log", "file://otherhost/x.log", "file:///a%00b", "file:"})
    EXPECT_FALSE(ff::lsp::uri_to_path(u).has_value()) << u;
}

TEST(lsp_lines, widths_count_utf16_units_and_every_line_end_that_ingest_knows) {
  std::string text = "abc\r\nαβ\n😀x\rlast";
  EXPECT_EQ(ff::lsp::line_length(text, 0, false), 3u);
  EXPECT_EQ(ff::lsp::line_length(text, 1, false), 2u);   // two 2-byte letters: one unit each
  EXPECT_EQ(ff::lsp::line_length(text, 1, true), 4u);    // utf-8: bytes
  EXPECT_EQ(ff::lsp::line_length(text, 2, false), 3u);   // a 4-byte emoji is a surrogate pair
  EXPECT_EQ(ff::lsp::line_length(text, 3, false), 4u);   // '\r' alone ended line 2
  EXPECT_EQ(ff::lsp::line_length(text, 4, false), 0u);   // past the end
  // Invalid UTF-8 (a file on disk may hold any bytes): one unit per stray byte, never more than the bytes
  // (the fuzzer's finding: six 0xFF bytes counted as twelve units).
  EXPECT_EQ(ff::lsp::line_length("a\xFF\xFF\xFF\xFF\xFF\xFF" "b", 0, false), 8u);
  EXPECT_EQ(ff::lsp::line_length("\xF0\x9F\x98", 0, false), 3u);  // a cut 4-byte sequence: three strays
  EXPECT_EQ(ff::lsp::line_length("\xE2\x82\xAC\xC3\xA9", 0, false), 2u);  // euro sign, e-acute
}

TEST(lsp_documents, logs_are_known_by_language_name_or_content_and_source_code_is_not) {
  const auto& cat = ff::testing::engine().prefixes;
  EXPECT_TRUE(ff::lsp::looks_like_log("file:///x/anything.py", "log", "", cat));
  EXPECT_TRUE(ff::lsp::looks_like_log("file:///x/rank3.LOG", "plaintext", "", cat));
  EXPECT_TRUE(ff::lsp::looks_like_log("file:///x/slurm-123.out", "", "", cat));
  EXPECT_TRUE(ff::lsp::looks_like_log("file:///var/log/dmesg", "", "", cat));
  std::string console =
      "[rank0]: step 1\n[rank1]: step 1\n[rank0]: step 2\n[rank1]: torch.OutOfMemoryError: CUDA out of memory.\n";
  EXPECT_TRUE(ff::lsp::looks_like_log("untitled:Untitled-1", "plaintext", console, cat));
  EXPECT_TRUE(ff::lsp::looks_like_log("file:///x/paste.txt", "plaintext",
                                      "Traceback (most recent call last):\n  File \"t.py\", line 1\nValueError: x\n", cat));
  std::string code = "#include <cstdio>\nint main() {\n  std::printf(\"error\\n\");\n  return 1;\n}\n";
  EXPECT_FALSE(ff::lsp::looks_like_log("file:///x/main.cpp", "cpp", code, cat));
  EXPECT_FALSE(ff::lsp::looks_like_log("file:///x/notes.txt", "plaintext", "one\ntwo\nthree\nfour\n", cat));
}

// A real diagnosis (the demo's excerpt of an 8-GPU job: an OOM on rank 2 among watchdog timeouts) as
// diagnostics: the Error on the OOM line, the collateral pointing back at it.
TEST(lsp_diagnostics, the_root_cause_is_an_error_on_its_line_and_collateral_points_at_it) {
  fs::path dir = fs::temp_directory_path() / ("ff-lsp-test-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::string text =
      "[2024-08-12 23:04:07,257][root][INFO] - train, rank: 2, epoch: 0/500, total step: 32900\n"
      "[rank2]: torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 336.00 MiB. GPU  has a total capacity "
      "of 79.15 GiB of which 141.25 MiB is free. Process 2109115 has 78.99 GiB memory in use.\n"
      "[rank5]:[E ProcessGroupNCCL.cpp:563] [Rank 5] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=15734, "
      "OpType=ALLREDUCE, NumelIn=220084533, NumelOut=220084533, Timeout(ms)=600000) ran for 600040 milliseconds before timing out.\n";
  std::ofstream(dir / "pasted.log") << text;
  ff::pipeline::options po;
  po.ingest.display_root = dir.string() + "/";
  auto r = ff::pipeline::diagnose({(dir / "pasted.log").string()}, ff::testing::engine(), po);
  fs::remove_all(dir);
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r.value().diag.verdict, ff::correlate::verdict::failure);
  const std::string uri = "file:///job/pasted.log";
  auto diags = ff::lsp::to_diagnostics(
      r.value(), [&](const std::string& s) -> std::optional<std::string> { return s == "pasted.log" ? std::optional(uri) : std::nullopt; },
      [&](const std::string&, std::uint64_t line) { return ff::lsp::line_length(text, line, false); });
  ASSERT_EQ(diags.count(uri), 1u);
  const nlohmann::json* root = nullptr;
  const nlohmann::json* collateral = nullptr;
  for (const auto& d : diags[uri]) {
    if (d["severity"] == 1) root = &d;
    if (d["severity"] == 3) collateral = &d;
  }
  ASSERT_NE(root, nullptr);
  EXPECT_EQ((*root)["range"]["start"]["line"], 1);
  EXPECT_EQ((*root)["range"]["end"]["character"], ff::lsp::line_length(text, 1, false));
  EXPECT_EQ((*root)["data"]["role"], "root");
  EXPECT_EQ((*root)["data"]["kind"], "cuda_oom");
  EXPECT_NE((*root)["message"].get<std::string>().find("rank 2"), std::string::npos) << (*root)["message"];
  ASSERT_NE(collateral, nullptr);
  EXPECT_EQ((*collateral)["range"]["start"]["line"], 2);
  EXPECT_EQ((*collateral)["relatedInformation"][0]["location"]["uri"], uri);
  EXPECT_EQ((*collateral)["relatedInformation"][0]["location"]["range"]["start"]["line"], 1);
  auto v = ff::lsp::verdict_params(r.value(), uri);
  EXPECT_EQ(v["verdict"], "failure");
  EXPECT_EQ(v["initiatingRank"], 2);
  std::string fix = ff::lsp::fix_text(r.value().diag);
  EXPECT_NE(fix.find("# fix"), std::string::npos) << fix;
  EXPECT_NE(fix.find("# verify"), std::string::npos) << fix;
}

TEST(lsp_diagnostics, lines_of_sources_the_client_cannot_open_are_left_out) {
  ff::pipeline::run r;
  r.diag.verdict = ff::correlate::verdict::failure;
  r.diag.title = "x";
  r.diag.evidence_lines.push_back({"bundle.tar.gz!rank0.log", "boom", "", 3, 0, std::nullopt});
  auto diags = ff::lsp::to_diagnostics(
      r, [](const std::string&) { return std::nullopt; }, [](const std::string&, std::uint64_t) { return 0u; });
  EXPECT_TRUE(diags.empty());
  EXPECT_EQ(ff::lsp::fix_text(ff::correlate::diagnosis{}), "");
}

}  // namespace

namespace {

// The sink's stop (sink.hpp), which the server gives when an edit makes a running diagnosis stale: asked
// after each block, it stops the run with errc::cancelled and no report.
TEST(lsp_cancel, a_diagnosis_asked_to_stop_ends_with_cancelled_and_one_never_asked_runs_to_the_end) {
  fs::path dir = fs::temp_directory_path() / ("ff-lsp-cancel-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  {
    std::ofstream f(dir / "big.log");
    for (int i = 0; i < 40000; ++i) f << "[rank0]: step " << i << " loss 0.25 some filler text to make the block fill up\n";
  }
  // The server's sink asks its flag as each input opens and after each block (sink.hpp).
  struct asking_sink final : ff::pipeline::sink {
    int asked = 0;
    bool stop_at_second = true;
    std::vector<std::string> seen;
    bool begin(std::uint32_t id, const std::string& raw) override {
      if (stop_at_second && ++asked >= 2) return false;
      seen.push_back(std::to_string(id) + ":" + raw);
      return true;
    }
    bool progress(std::uint64_t, std::size_t) override { return !(stop_at_second && ++asked >= 2); }
  } asking;
  ff::pipeline::options po;
  po.learn_lines = 0;
  auto r = ff::pipeline::diagnose({(dir / "big.log").string()}, ff::testing::engine(), po, asking);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ff::errc::cancelled);
  EXPECT_EQ(asking.asked, 2);  // stopped at the first block after the answer turned
  asking.stop_at_second = false;
  asking.seen.clear();
  auto whole = ff::pipeline::diagnose({(dir / "big.log").string()}, ff::testing::engine(), po, asking);
  fs::remove_all(dir);
  ASSERT_TRUE(whole) << whole.error().message;
  EXPECT_EQ(whole.value().total_lines, 40000u);
  const auto& seen = asking.seen;
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0], "0:" + (dir / "big.log").string());
}

}  // namespace

namespace {

// line_index (one pass over a document) measures every line as line_length does, line ends of each kind.
TEST(lsp_lines, an_index_of_the_line_starts_measures_every_line_as_line_length_does) {
  for (std::string text : {std::string("abc\r\nαβ\n😀x\rlast"), std::string("a\n\nb\r\r\n"), std::string(""),
                           std::string("\xFF\xFE\n\xF0\x9F\x98\r\n")}) {
    ff::lsp::line_index idx(text);
    for (std::uint64_t line = 0; line < 8; ++line)
      for (bool utf8 : {false, true}) EXPECT_EQ(idx.width(line, utf8), ff::lsp::line_length(text, line, utf8)) << line;
  }
}

}  // namespace

// The hover of every built-in signature, as a root cause and as collateral, with a verdict line, a root-cause
// sentence and fix lines far longer than any real one: never over kMaxHoverChars, and the link to the full
// entry is always there, cut or not.
TEST(lsp_hover, every_signature_gives_a_short_hover_that_links_its_entry) {
  const auto& lib = ff::testing::builtin();
  ASSERT_GT(lib.signatures.size(), 100u);
  const std::string huge(5000, '_');  // each one escaped to two characters: the budget, not the pieces' caps, decides
  const ff::lsp::root_facts long_facts{"rank 3 " + huge, {"first " + huge, "second", "third", "fourth"}};
  std::size_t longest = 0;
  for (const auto& s : lib.signatures) {
    const std::string url = ff::lsp::entry_url(s);
    EXPECT_EQ(url.rfind(std::string(ff::lsp::kEntryBaseUrl), 0), 0u) << s.name << ": " << url;
    EXPECT_EQ(url.find('#'), std::string::npos) << url;
    for (const char* role : {"root", "collateral"}) {
      for (const ff::lsp::root_facts* facts : {static_cast<const ff::lsp::root_facts*>(nullptr), &long_facts}) {
        nlohmann::json d{{"message", std::string(role) + ": " + s.title + " " + huge + "\nfix: " + huge},
                         {"data", {{"role", role}, {"signature", s.name}, {"kind", s.kind}}}};
        std::string md = ff::lsp::hover_markdown(d, &s, facts);
        longest = std::max(longest, md.size());
        EXPECT_LE(md.size(), ff::lsp::kMaxHoverChars) << s.name << " " << role;
        EXPECT_NE(md.find("](" + url + ")"), std::string::npos) << s.name << " " << role;
        EXPECT_NE(md.find("`firstfault explain " + s.name + "`"), std::string::npos) << s.name;
      }
    }
  }
  EXPECT_GT(longest, ff::lsp::kMaxHoverChars - 200);  // the bound was reached, so it was tested
  // With real facts, the root cause's hover has the sentence and the first fix lines, and counts the rest.
  const auto* oom = lib.find("cuda_oom");
  ASSERT_NE(oom, nullptr);
  ff::lsp::root_facts facts{"Rank 2 ran out of GPU memory.", {"one", "two", "three", "four", "five"}};
  nlohmann::json d{{"message", "root cause: " + oom->title + " [cuda_oom] on rank 2\nfix: one"},
                   {"data", {{"role", "root"}, {"signature", "cuda_oom"}, {"kind", "cuda_oom"}}}};
  std::string md = ff::lsp::hover_markdown(d, oom, &facts);
  EXPECT_EQ(md.rfind("**root cause: ", 0), 0u) << md;
  EXPECT_NE(md.find("Rank 2 ran out of GPU memory."), std::string::npos) << md;
  EXPECT_NE(md.find("\n- one\n- two\n- three\n- (2 more in the entry)"), std::string::npos) << md;
  EXPECT_EQ(md.find("four"), std::string::npos) << md;
  // No signature (a suspicious line): the message alone.
  nlohmann::json w{{"message", "looks wrong, and no signature explains it"}, {"data", {{"role", "suspicious"}, {"signature", ""}, {"kind", ""}}}};
  EXPECT_EQ(ff::lsp::hover_markdown(w, nullptr, nullptr), "**looks wrong, and no signature explains it**");
}
