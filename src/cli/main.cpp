// firstfault command line: declares the subcommands (one file each, commands.hpp), parses argv once and
// hands over to the command that was given. No feature logic lives here.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>

#include "commands.hpp"
#include "common.hpp"
#include "firstfault/text.hpp"
#include "shell_docs.hpp"

namespace {

using ff::cli::kExitUsage;

// An unknown command gets a suggestion (CLI11 would only say that a subcommand is required). Returns false
// after printing the message when the first word that is not an option names no command.
bool known_command(const CLI::App& app, int argc, char** argv) {
  std::vector<std::string> names;
  for (const auto* sub : app.get_subcommands({})) names.push_back(sub->get_name());
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--kb") {  // the application's only option with a value
      ++i;
      continue;
    }
    if (!a.empty() && a[0] == '-') continue;
    if (std::find(names.begin(), names.end(), a) != names.end()) return true;
    auto near = ff::text::closest(a, names, 2);
    ff::cli::print_error("unknown command '" + a + "'" + (near.empty() ? "" : " - did you mean '" + near[0] + "'?") +
                         " (see firstfault --help)");
    return false;
  }
  return true;
}

int run_main(int argc, char** argv) {
  CLI::App app{"firstfault: find out why a distributed training run died"};
  app.require_subcommand(1);
  app.set_version_flag("--version", [] {
    std::string v = std::string("firstfault ") + FF_VERSION;
    if (auto lib = ff::cli::load_kb({}))
      v += " (built-in knowledge base: " + std::to_string(lib.value().signatures.size()) + " signatures, " + lib.value().content_hash + ")";
    return v;
  });
  std::vector<std::string> kb_dirs;
  app.add_option("--kb", kb_dirs, "extra directory of signature files (repeatable)")->check(CLI::ExistingDirectory);

  std::vector<std::unique_ptr<ff::cli::command>> commands;
  commands.push_back(ff::cli::add_diagnose(app, kb_dirs));
  commands.push_back(ff::cli::add_kb(app, kb_dirs));
  commands.push_back(ff::cli::add_watch(app));
  commands.push_back(ff::cli::add_history(app));
  commands.push_back(ff::cli::add_explain(app));
  commands.push_back(ff::cli::add_serve(app));
  commands.push_back(ff::cli::add_lsp(app, kb_dirs));
  commands.push_back(ff::cli::add_scan(app, kb_dirs));
  auto* completion = app.add_subcommand("completion", "print a shell completion script (bash, zsh or fish)");
  std::string completion_shell;
  completion->add_option("shell", completion_shell, "bash | zsh | fish")->required()->check(CLI::IsMember({"bash", "zsh", "fish"}));
  auto* man = app.add_subcommand("man", "print the man page (roff)")->group("");

  try {
    if (!known_command(app, argc, argv)) return kExitUsage;
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kExitUsage;
  }
  if (completion->parsed()) {
    std::cout << ff::cli::completion_script(app, completion_shell);
    return 0;
  }
  if (man->parsed()) {
    std::cout << ff::cli::man_page(app, std::string("firstfault ") + FF_VERSION);
    return 0;
  }
  auto lib = ff::cli::load_kb(kb_dirs);
  if (!lib) {
    ff::cli::print_error("knowledge base: " + lib.error().message);
    return ff::exit_status(lib.error());
  }
  for (auto& c : commands)
    if (c->parsed()) return c->run(lib.value());
  return 0;
}

}  // namespace

// No exception escapes main: every failure is one line on stderr and exit status 2.
int main(int argc, char** argv) {
  try {
    return run_main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "firstfault: error: %s\n", ff::text::sanitize(e.what()).c_str());
  } catch (...) {
    std::fprintf(stderr, "firstfault: error: unexpected failure\n");
  }
  return kExitUsage;
}
