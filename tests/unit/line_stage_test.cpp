// The per-line stage's steps (line_stage.hpp), each on its own: mask, peel, attribute, and the light path's
// per-shape memos.
#include <gtest/gtest.h>

#include "firstfault/line_stage.hpp"
#include "firstfault/text.hpp"
#include "test_support.hpp"

namespace {

const ff::normalize::prefix_catalog& catalogue() { return ff::testing::engine().prefixes; }

TEST(line_stage, mask_line_sanitises_then_masks_in_stream_order) {
  ff::mask::masker m(ff::mask::options{});
  std::string out = ff::line::mask_line(m, "[rank0]: token=ghp_0123456789abcdefghijABCDEFGHIJ0123456789 \x1b[31mred\x1b[0m");
  EXPECT_EQ(out.find("ghp_0123456789"), std::string::npos) << out;  // the secret is gone
  EXPECT_EQ(out.find('\x1b'), std::string::npos) << out;             // the escapes too
  EXPECT_NE(out.find("red"), std::string::npos) << out;
  // the same as the masker on the sanitised line, which is what the full path did before it was a step
  ff::mask::masker m2(ff::mask::options{});
  EXPECT_EQ(out, m2.apply(ff::text::sanitize("[rank0]: token=ghp_0123456789abcdefghijABCDEFGHIJ0123456789 \x1b[31mred\x1b[0m")));
}

TEST(line_stage, peel_gives_the_catalogue_prefix_once_and_leaves_the_message) {
  ff::normalize::prefix_learner learner;
  ff::normalize::line_meta meta;
  std::string line = "[rank3]: RuntimeError: CUDA out of memory.";
  ff::line::peel(catalogue(), learner, line, meta);
  ASSERT_TRUE(meta.rank);
  EXPECT_EQ(*meta.rank, 3);
  EXPECT_EQ(ff::text::trim(meta.body), "RuntimeError: CUDA out of memory.");
  // peel() is the catalogue's normalize_fast() then a learnt prefix: with nothing learnt, the catalogue's
  ff::normalize::line_meta direct;
  catalogue().normalize_fast(line, direct);
  EXPECT_EQ(direct.body, meta.body);
  EXPECT_EQ(direct.rank, meta.rank);
}

TEST(line_stage, a_learnt_prefix_is_peeled_after_the_learner_has_seen_enough_lines) {
  ff::normalize::prefix_learner learner;
  std::vector<std::string> lines;
  for (int i = 0; i < 8; ++i) lines.push_back("[job" + std::to_string(i % 4) + "]: step " + std::to_string(i) + " loss 0.5");
  ff::normalize::line_meta last;
  for (const auto& l : lines) {
    ff::normalize::line_meta meta;
    catalogue().normalize_fast(l, meta);
    ff::line::observe_and_peel(catalogue(), learner, meta);
    last = meta;
  }
  EXPECT_EQ(ff::text::trim(last.body), "step 7 loss 0.5");
  // peel_learnt() alone (no observation) peels the same from the catalogue's body
  ff::normalize::line_meta again;
  catalogue().normalize_fast(lines.back(), again);
  ff::line::peel_learnt(catalogue(), learner, again);
  EXPECT_EQ(again.body, last.body);
  EXPECT_EQ(again.rank, last.rank);
}

TEST(line_stage, rank_codes_keep_rank_and_local_rank_apart) {
  EXPECT_EQ(ff::line::rank_code(std::nullopt, std::nullopt), 0);
  EXPECT_NE(ff::line::rank_code(3, std::nullopt), ff::line::rank_code(std::nullopt, 3));
  EXPECT_EQ(ff::line::rank_code(3, 1), ff::line::rank_code(3, std::nullopt));  // the global rank wins
  EXPECT_FALSE(ff::line::rank_key_of(std::nullopt, std::nullopt, 2));
  auto k = ff::line::rank_key_of(std::nullopt, 5, 1);
  ASSERT_TRUE(k);
  EXPECT_EQ(*k, ff::correlate::rank_key::local_rank(5, 1));
}

TEST(line_stage, a_time_in_the_message_is_read_only_in_the_AT_form) {
  auto t = ff::line::time_in_message("slurmstepd: error: *** STEP 4.0 ON node1 CANCELLED AT 2021-05-27T21:42:11 ***");
  ASSERT_TRUE(t);
  EXPECT_FALSE(ff::line::time_in_message("saved checkpoint-2021-05-27T21:42:11.pt"));
  EXPECT_FALSE(ff::line::time_in_message("CANCELLED AT soon"));
}

TEST(line_stage, shape_memo_answers_every_line_of_a_shape_as_the_first) {
  ff::line::shape_memo memo;
  std::string a = "node-3:1031:2031 [7] NCCL INFO comm 12 rank 7 nranks 64";
  std::string b = "node-5:2042:3099 [1] NCCL INFO comm 98 rank 1 nranks 64";  // the same shape, other digits
  ff::normalize::line_meta ma, mb;
  catalogue().normalize_fast(a, ma);
  catalogue().normalize_fast(b, mb);
  const auto& fa = memo.facts_of(42, a, ma.body);
  const auto& fb = memo.facts_of(42, b, mb.body);
  EXPECT_EQ(&fa, &fb);  // kept, not asked again
  ff::line::shape_memo fresh;
  const auto& fb2 = fresh.facts_of(42, b, mb.body);
  EXPECT_EQ(fa.host_forms, fb2.host_forms);
  EXPECT_EQ(fa.bracket_host_port, fb2.bracket_host_port);
  EXPECT_EQ(fa.token_len, fb2.token_len);
  EXPECT_EQ(fa.token_shape, fb2.token_shape);
  EXPECT_EQ(fa.may_plan, fb2.may_plan);
}

TEST(line_stage, step_memo_reads_the_step_as_read_step_does) {
  ff::line::step_memo memo;
  // one shape id per shape (the line with its digits zeroed); lines of a shape differ only in digits
  const std::vector<std::pair<std::uint64_t, std::string>> lines = {
      {1, "step 120 loss 0.25"}, {1, "step 450 loss 0.75"}, {2, "epoch 3 iteration 4500/10000"},
      {2, "epoch 7 iteration 9100/10000"}, {3, "no step here"}, {1, "step 999 loss 0.05"}};
  for (const auto& [shape, body] : lines) EXPECT_EQ(memo.step_of(shape, 0, body), ff::extract::read_step(body, true)) << body;
}

// Run-fact lines (engine::fact_free_gate): a line only a run-fact signature's gate literals hit takes the
// light path in a block, and the newest ones are read in full at the stream's end (collector::flush_facts).
// inputs::fact_lines must be what --exact (every line in full) keeps: the same lines, texts, ranks, times
// and fields, in the same order, also when a full-path fact line comes between candidates and when more
// candidates wait than the list keeps. Bars redrawn with '\r' are read sanitised, as the full path reads them.
TEST(line_stage, run_fact_candidates_keep_the_fact_lines_exact_keeps) {
  ASSERT_TRUE(ff::testing::engine().fact_free_gate.enabled());
  std::vector<std::string> lines;
  for (int i = 0; i < 300; ++i) {
    const int r = i % 4;
    std::string ts = "2026-11-30 02:20:" + std::to_string(10 + i % 50) + ",123";
    if (i % 5 == 0)
      lines.push_back("[default" + std::to_string(r) + "]:Epoch 0:  " + std::to_string(i % 100) + "%|###       | " + std::to_string(i) +
                      "/1882 [0:00:0" + std::to_string(i % 10) + "<0:42:58,  0." + std::to_string(i % 9 + 1) + "3it/s, loss=2.87]" +
                      // every other bar redrawn with '\r' (sanitising changes the line: the light path reads it sanitised)
                      (i % 10 == 0 ? "\rEpoch 0:  " + std::to_string(i % 100) + "%|####      | " + std::to_string(i + 1) + "/1882 [0:00:01<0:42:57,  0.74it/s]" : ""));
    else if (i % 7 == 0)
      lines.push_back("[default" + std::to_string(r) + "]:" + ts + " INFO    [rank" + std::to_string(r) + "] trainer - saved checkpoint to /ckpt/run7/step_" +
                      std::to_string(i) + ".pt");
    else if (i % 11 == 0)
      lines.push_back(" iteration      " + std::to_string(i) + "/    1000 | elapsed time per iteration (ms): 12" + std::to_string(i) + ".0 | lm loss: 3.8E+01 |");
    else if (i == 151)  // a fact line the full path reads in any mode (an error level in its prefix)
      lines.push_back("[default1]:" + ts + " ERROR   [rank1] trainer -  45%|####      | 450/1000 [01:40<02:02,  4.50it/s, loss=0.31]");
    else
      lines.push_back("[default" + std::to_string(r) + "]:" + ts + " INFO    [rank" + std::to_string(r) + "] trainer - step " + std::to_string(i) + " loss 1.93");
  }
  auto run = [&](bool exact, std::size_t upto) {
    ff::pipeline::options opt;
    opt.exact = exact;
    ff::pipeline::collector col(ff::testing::engine(), opt);
    ff::ingest::source src;
    src.display = "console.log";
    auto st = col.open_stream(src);
    ff::pipeline::line_block blk;
    for (std::size_t i = 0; i < upto; ++i) {
      blk.add(lines[i], i + 1);
      if (blk.size() == 64) col.add_block(st, blk), blk.clear();
    }
    col.add_block(st, blk);
    col.close_stream(st);
    return col.inputs().fact_lines;
  };
  for (std::size_t upto : {40, 140, 300}) {
    auto gated = run(false, upto), exact = run(true, upto);
    ASSERT_EQ(gated.size(), exact.size()) << upto;
    ASSERT_FALSE(exact.empty());
    for (std::size_t i = 0; i < exact.size(); ++i) {
      EXPECT_EQ(gated[i].line_no, exact[i].line_no) << i;
      EXPECT_EQ(gated[i].text, exact[i].text) << i;
      EXPECT_EQ(gated[i].source, exact[i].source);
      EXPECT_EQ(gated[i].rank, exact[i].rank) << i;
      EXPECT_EQ(gated[i].local_rank, exact[i].local_rank) << i;
      EXPECT_EQ(gated[i].ts.has_value(), exact[i].ts.has_value()) << i;
      if (gated[i].ts && exact[i].ts) EXPECT_EQ(gated[i].ts->seconds, exact[i].ts->seconds) << i;
      EXPECT_EQ(gated[i].ts_inherited, exact[i].ts_inherited) << i;
      EXPECT_EQ(gated[i].fields, exact[i].fields) << i;
    }
  }
}

}  // namespace
