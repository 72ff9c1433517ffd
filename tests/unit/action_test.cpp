// The action on a report (include/firstfault/action.hpp, kb/_tables/actions.tsv, docs/actions.md).
#include <gtest/gtest.h>
#include <unistd.h>

#include "test_support.hpp"

#include <filesystem>
#include <fstream>
#include <algorithm>
#include <set>
#include <sstream>

#include "firstfault/action.hpp"
#include "firstfault/report.hpp"

namespace fs = std::filesystem;

namespace {

using ff::testing::builtin;
namespace action = ff::action;

ff::correlate::diagnosis failure_of(const std::string& kind, const std::string& host) {
  ff::correlate::diagnosis d;
  d.verdict = ff::correlate::verdict::failure;
  d.kind = kind;
  d.signature = "test_signature";
  if (!host.empty()) d.initiating_host = host;
  return d;
}

TEST(action, every_kind_has_a_rule_and_the_table_lints_clean) {
  auto issues = action::lint(builtin());
  for (const auto& i : issues) ADD_FAILURE() << i.file << ": " << i.name << ": " << i.message;
  for (const auto& k : builtin().kinds) {
    auto d = failure_of(k.kind, "node-1");
    if (k.kind == "healthy") d.verdict = ff::correlate::verdict::healthy;
    EXPECT_FALSE(action::decide(d, std::nullopt, builtin()).rule.empty()) << k.kind;
  }
}

TEST(action, lint_finds_a_missing_kind_and_a_bad_cell) {
  auto lib = builtin();
  auto& t = lib.tables.at("actions");
  t.rows.erase("cuda_oom");
  t.order.erase(std::find(t.order.begin(), t.order.end(), "cuda_oom"));
  t.rows.at("loss_nan")[t.columns.size() - 4] = "reboot";  // the action column
  auto issues = action::lint(lib);
  auto has = [&](const std::string& name, const std::string& words) {
    return std::any_of(issues.begin(), issues.end(), [&](const auto& i) { return i.name == name && i.message.find(words) != std::string::npos; });
  };
  EXPECT_TRUE(has("cuda_oom", "exactly one `always` action rule, has 0"));
  EXPECT_TRUE(has("loss_nan", "action 'reboot' is not one of the seven"));
}

TEST(action, xid_79_excludes_the_host_that_logged_it) {
  auto r = ff::testing::diagnose_text("xid79",
                         "Dec  4 10:02:09 gpu-node-7 kernel: NVRM: Xid (PCI:0000:05:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"
                         "Dec  4 10:02:09 gpu-node-7 kernel: NVRM: GPU 0000:05:00.0: GPU has fallen off the bus.\n");
  ASSERT_EQ(r.diag.verdict, ff::correlate::verdict::failure);
  EXPECT_EQ(r.diag.kind, "gpu_fell_off_bus");
  EXPECT_EQ(r.action.what, action::kind::restart_excluding_hosts) << r.action.why;
  EXPECT_EQ(r.action.hosts, std::vector<std::string>{"gpu-node-7"});
  EXPECT_TRUE(r.action.retryable);
  EXPECT_EQ(r.action.rule, "gpu_fell_off_bus");
  EXPECT_EQ(r.action.source.rfind("https://", 0), 0u);
  auto j = ff::report::to_json(r);
  EXPECT_EQ(j["action"]["kind"], "restart-excluding-hosts");
  EXPECT_EQ(j["action"]["hosts"], nlohmann::json::array({"gpu-node-7"}));
  EXPECT_NE(ff::report::to_terminal(r, {}).find("action: restart-excluding-hosts (gpu-node-7)"), std::string::npos);
  EXPECT_NE(ff::report::to_markdown(r).find("**Action:** `restart-excluding-hosts` excluding `gpu-node-7`"), std::string::npos);
  EXPECT_NE(ff::report::to_html(r).find("<b id=\"action\">restart-excluding-hosts</b>"), std::string::npos);
  EXPECT_NE(ff::report::to_brief(r).find(" action=restart-excluding-hosts:gpu-node-7 "), std::string::npos);
  EXPECT_EQ(ff::report::action_exit_code(r), 11);
  EXPECT_NE(ff::report::from_stored_json(j).find("action: restart-excluding-hosts (gpu-node-7)"), std::string::npos);
}

TEST(action, a_key_error_is_stop_fix_code) {
  auto r = ff::testing::diagnose_text("keyerror",
                         "[rank1]: Traceback (most recent call last):\n"
                         "[rank1]:   File \"/opt/train/train.py\", line 39, in <module>\n"
                         "[rank1]:     label = batch[\"label\"]\n"
                         "[rank1]: KeyError: 'label'\n");
  ASSERT_EQ(r.diag.verdict, ff::correlate::verdict::failure);
  EXPECT_EQ(r.action.what, action::kind::stop_fix_code) << r.diag.kind << ": " << r.action.why;
  EXPECT_FALSE(r.action.retryable);
  EXPECT_TRUE(r.action.hosts.empty());
  EXPECT_EQ(ff::report::action_exit_code(r), 12);
  EXPECT_EQ(ff::report::exit_code(r), 1);  // the default exit statuses stay as they were
}

TEST(action, a_connection_reset_in_user_code_is_transient) {
  auto d = failure_of("rank_exception", "n1");
  d.evidence_lines.push_back({"console.log", "ConnectionResetError: [Errno 104] Connection reset by peer", "", 3, 0, "n1"});
  auto a = action::decide(d, std::nullopt, builtin());
  EXPECT_EQ(a.what, action::kind::restart);
  EXPECT_EQ(a.rule, "rank_exception.transient");
}

TEST(action, a_one_off_network_error_restarts_and_a_repeat_on_the_host_excludes_it) {
  auto d = failure_of("network_hardware", "gpu-3");
  auto once = action::decide(d, std::nullopt, builtin());
  EXPECT_EQ(once.what, action::kind::restart);
  EXPECT_TRUE(once.hosts.empty());
  EXPECT_EQ(action::decide(d, 0, builtin()).what, action::kind::restart);
  auto again = action::decide(d, 2, builtin());
  EXPECT_EQ(again.what, action::kind::restart_excluding_hosts);
  EXPECT_EQ(again.hosts, std::vector<std::string>{"gpu-3"});
  EXPECT_EQ(again.rule, "network_hardware.recurred");
}

TEST(action, hardware_evidence_on_another_host_names_that_host) {
  auto d = failure_of("network_hardware", "gpu-3");
  ff::correlate::collateral_group g;
  g.signature = "host_nic_link_down";
  g.kind = "network_hardware";
  g.example.host = "gpu-5";
  d.collateral.push_back(g);
  auto a = action::decide(d, std::nullopt, builtin());
  EXPECT_EQ(a.what, action::kind::restart_excluding_hosts);
  EXPECT_EQ(a.hosts, std::vector<std::string>{"gpu-5"});
  EXPECT_EQ(a.rule, "network_hardware.hardware");
}

TEST(action, no_host_to_exclude_becomes_investigate) {
  auto a = action::decide(failure_of("gpu_ecc_hardware", ""), std::nullopt, builtin());
  EXPECT_EQ(a.what, action::kind::investigate);
  EXPECT_FALSE(a.retryable);
  EXPECT_NE(a.why.find("No host is named"), std::string::npos);
}

TEST(action, undetermined_investigates_and_healthy_does_nothing) {
  ff::correlate::diagnosis d;
  d.verdict = ff::correlate::verdict::undetermined;
  EXPECT_EQ(action::decide(d, std::nullopt, builtin()).what, action::kind::investigate);
  d.verdict = ff::correlate::verdict::healthy;
  auto a = action::decide(d, std::nullopt, builtin());
  EXPECT_EQ(a.what, action::kind::none);
  EXPECT_EQ(action::exit_status(a.what), 0);
}

TEST(action, exit_statuses_are_distinct_and_keep_clear_of_the_verdicts) {
  std::set<int> seen;
  for (auto k : action::all_kinds()) {
    EXPECT_TRUE(seen.insert(action::exit_status(k)).second) << action::to_string(k);
    EXPECT_EQ(action::parse_kind(action::to_string(k)), k);
    if (k != action::kind::none) {
      EXPECT_GE(action::exit_status(k), 10);
    }
  }
}

TEST(action, exclusion_template_goes_after_its_launcher_word) {
  std::vector<std::string> cmd{"srun", "-N4", "python", "train.py"};
  EXPECT_EQ(action::excluding(cmd, "srun --exclude={hosts}", {"n1", "n7"}),
            (std::vector<std::string>{"srun", "--exclude=n1,n7", "-N4", "python", "train.py"}));
  std::vector<std::string> wrapped{"env", "A=1", "srun", "python", "train.py"};
  EXPECT_EQ(action::excluding(wrapped, "srun -x {hosts}", {"n1"}),
            (std::vector<std::string>{"env", "A=1", "srun", "-x", "n1", "python", "train.py"}));
  EXPECT_EQ(action::excluding(cmd, "--exclude={hosts}", {"n2"}),
            (std::vector<std::string>{"srun", "--exclude=n2", "-N4", "python", "train.py"}));
  EXPECT_EQ(action::excluding(cmd, "srun --exclude={hosts}", {}), cmd);
  EXPECT_EQ(action::excluding({"/usr/bin/srun", "python"}, "srun --exclude={hosts}", {"n3"}),
            (std::vector<std::string>{"/usr/bin/srun", "--exclude=n3", "python"}));
}

// docs/actions.md shows the table between two markers exactly as `firstfault kb actions` prints it.
TEST(action, docs_show_the_current_table) {
  std::ifstream in(fs::path(FF_TEST_DATA) / ".." / "docs" / "actions.md");
  ASSERT_TRUE(in) << "docs/actions.md is missing";
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str(), begin = "<!-- actions table: begin -->\n", end = "<!-- actions table: end -->";
  auto b = doc.find(begin), e = doc.find(end);
  ASSERT_NE(b, std::string::npos);
  ASSERT_NE(e, std::string::npos);
  EXPECT_EQ(doc.substr(b + begin.size(), e - b - begin.size()), action::table_markdown(builtin()))
      << "regenerate it: firstfault kb actions";
}

}  // namespace
