// Replays every input the fuzzers ever crashed on (fuzz/regressions/<target>/): each must now run through
// the same code as its fuzz target without a crash, and the JSON report must serialise.
#include <gtest/gtest.h>

#include "test_support.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "firstfault/extract.hpp"
#include "firstfault/kb.hpp"
#include "firstfault/lsp.hpp"
#include "firstfault/mask.hpp"
#include "firstfault/normalize.hpp"
#include "firstfault/pipeline.hpp"
#include "firstfault/report.hpp"
#include "firstfault/text.hpp"

namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<fs::path> artifacts(const std::string& target) {
  std::vector<fs::path> out;
  fs::path dir = fs::path(FF_TEST_DATA) / ".." / "fuzz" / "regressions" / target;
  if (fs::exists(dir))
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_regular_file()) out.push_back(e.path());
  return out;
}

TEST(fuzz_regressions, pipeline_inputs_are_diagnosed_and_serialised) {
  const auto& eng = ff::testing::engine();
  auto inputs = artifacts("pipeline");
  ASSERT_FALSE(inputs.empty()) << "fuzz/regressions/pipeline holds the crashes found so far; none were found";
  for (const auto& p : inputs) {
    ff::pipeline::options opt;
    opt.ingest.max_line_bytes = 4096;
    auto run = ff::pipeline::diagnose({p.string()}, eng, opt);
    ASSERT_TRUE(run) << p;
    EXPECT_TRUE(run.value().any_readable) << p;
    EXPECT_NO_THROW((void)ff::report::to_json(run.value()).dump()) << p;
    (void)ff::report::to_terminal(run.value(), {true});
    (void)ff::report::to_markdown(run.value());
    (void)ff::report::to_html(run.value());
  }
}

// fuzz_mask's inputs: masked line by line in both settings (the first byte chooses in the target), with
// the second pass. (The first: a nested block's child value masked before the parent test read the line's
// old matches, a use after free under ASan.)
TEST(fuzz_regressions, mask_inputs) {
  for (const auto& p : artifacts("mask")) {
    const std::string text = slurp(p);
    for (bool redact : {false, true}) {
      ff::mask::options o;
      o.redact = redact;
      ff::mask::masker m(o);
      std::string shown;
      std::istringstream in(text);
      for (std::string l; std::getline(in, l);) {
        shown += m.apply(l) + "\n";
        (void)m.apply_path(l);
      }
      m.rescan(shown);
    }
  }
}

TEST(fuzz_regressions, normalize_and_extract_inputs) {
  const auto& lib = ff::testing::builtin();
  static const auto cat = std::move(ff::normalize::prefix_catalog::load(lib.prefix_files)).value();
  // The normalize and extract crashes, and every line of the pipeline crashes (lines that reached both).
  std::vector<std::pair<fs::path, std::string>> texts;
  for (const auto* t : {"normalize", "extract"})
    for (const auto& p : artifacts(t)) texts.emplace_back(p, slurp(p));
  for (const auto& p : artifacts("pipeline")) {
    std::istringstream in(slurp(p));
    for (std::string l; std::getline(in, l);) texts.emplace_back(p, l);
  }
  ASSERT_FALSE(texts.empty());
  for (const auto& [p, data] : texts) {
    std::string clean = ff::text::sanitize(data);
    ff::normalize::line_meta m;
    cat.normalize(clean, m);
    // Peeling only removes what comes before the message: the body lies inside the line.
    EXPECT_LE(m.body.size(), clean.size()) << p;
    EXPECT_NE(clean.find(m.body), std::string::npos) << p;
    ff::extract::extractor ex("fuzz");
    std::vector<ff::extract::exit_record> exits;
    std::vector<ff::extract::terminated_pid> terms;
    ff::extract::line_note note;
    EXPECT_NO_THROW(ex.feed(clean, 1, note, exits, terms)) << p;
  }
}

// fuzz_lsp's finds: no line is wider than the text (UTF-16 units of invalid UTF-8), and every frame reads.
TEST(fuzz_regressions, lsp_inputs_keep_widths_within_the_text) {
  auto inputs = artifacts("lsp");
  ASSERT_FALSE(inputs.empty()) << "fuzz/regressions/lsp holds the crashes found so far";
  for (const auto& p : inputs) {
    std::string data = slurp(p);
    for (std::uint64_t line = 0; line < 3; ++line) {
      EXPECT_LE(ff::lsp::line_length(data, line, false), data.size()) << p;
      EXPECT_LE(ff::lsp::line_length(data, line, true), data.size()) << p;
    }
    std::istringstream frames(data);
    std::string body, err;
    for (int i = 0; i < 64 && ff::lsp::read_message(frames, body, err, 1 << 16) == ff::lsp::read_status::message; ++i) {
    }
  }
}

TEST(text, prefix_utf8_never_splits_a_character) {
  std::string s = "ab\xe2\x96\x88" "cd";  // a 3-byte block character at bytes 2..4
  EXPECT_EQ(ff::text::prefix_utf8(s, 3), "ab");
  EXPECT_EQ(ff::text::prefix_utf8(s, 4), "ab");
  EXPECT_EQ(ff::text::prefix_utf8(s, 5), "ab\xe2\x96\x88");
  EXPECT_EQ(ff::text::prefix_utf8(s, 100), s);
}

}  // namespace
