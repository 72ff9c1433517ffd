// firstfault command line: declares the subcommands (one file each, commands.hpp), parses argv once and
// hands over to the command that was given. No feature logic lives here.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>
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

// The README shows options before the command (`firstfault --no-history diagnose DIR`). Options of a
// command given before its name are moved to just after it, so CLI11 parses them as the command's own.
// Whether an option takes a value is asked of the command itself (`--history URI`, `--no-history`).
// The application's own options (--kb, --help, --version) stay where they are.
std::vector<std::string> options_after_command(const CLI::App& app, int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc), out;
  const CLI::App* sub = nullptr;
  std::size_t at = 0;
  for (std::size_t i = 0; i < args.size() && !sub; ++i) {
    const auto& a = args[i];
    if (a == "--kb") { ++i; continue; }
    if (!a.empty() && a[0] == '-') continue;
    for (const auto* s : app.get_subcommands({}))
      if (s->get_name() == a) { sub = s; at = i; }
  }
  if (!sub || at == 0) return args;
  std::vector<std::string> before, moved;
  for (std::size_t i = 0; i < at; ++i) {
    const auto& a = args[i];
    if (a == "--kb" || a == "--help" || a == "-h" || a == "--version" || a.empty() || a[0] != '-') {
      before.push_back(a);
      if (a == "--kb" && i + 1 < at) before.push_back(args[++i]);
      continue;
    }
    std::string name = a.substr(0, a.find('='));
    const CLI::Option* o = sub->get_option_no_throw(name);
    if (!o) { before.push_back(a); continue; }  // CLI11 names what it does not know
    moved.push_back(a);
    if (a.find('=') == std::string::npos && o->get_items_expected_max() > 0 && i + 1 < at) moved.push_back(args[++i]);
  }
  out = before;
  out.push_back(args[at]);
  out.insert(out.end(), moved.begin(), moved.end());
  out.insert(out.end(), args.begin() + static_cast<long>(at) + 1, args.end());
  return out;
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
  commands.push_back(ff::cli::add_run(app, kb_dirs));
  auto* completion = app.add_subcommand("completion", "print a shell completion script (bash, zsh or fish)");
  std::string completion_shell;
  completion->add_option("shell", completion_shell, "bash | zsh | fish")->required()->check(CLI::IsMember({"bash", "zsh", "fish"}));
  auto* man = app.add_subcommand("man", "print the man page (roff)")->group("");

  try {
    auto args = options_after_command(app, argc, argv);
    std::vector<char*> argv2{argv[0]};
    for (auto& a : args) argv2.push_back(a.data());
    argv2.push_back(nullptr);
    int argc2 = static_cast<int>(argv2.size()) - 1;
    if (!known_command(app, argc2, argv2.data())) return kExitUsage;
    app.parse(argc2, argv2.data());
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
