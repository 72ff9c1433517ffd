#include "shell_docs.hpp"

#include <functional>
#include <vector>

namespace ff::cli {

namespace {

struct cli_command {
  std::string path;  // "diagnose", "kb lint"
  const CLI::App* app;
};

// Hidden commands and options have an empty group (CLI11's group("")).
bool visible(const CLI::App* a) { return !a->get_group().empty(); }
bool visible_flag(const CLI::Option* o) { return o->nonpositional() && !o->get_group().empty(); }

// Every visible command, depth first.
void walk(const CLI::App* app, const std::string& prefix, std::vector<cli_command>& out) {
  for (const auto* sub : app->get_subcommands(visible)) {
    std::string path = prefix.empty() ? sub->get_name() : prefix + " " + sub->get_name();
    out.push_back({path, sub});
    walk(sub, path, out);
  }
}

std::vector<std::string> flags_of(const CLI::App* app) {
  std::vector<std::string> out;
  for (const auto* o : app->get_options(visible_flag)) {
    for (const auto& l : o->get_lnames()) out.push_back("--" + l);
    for (const auto& s : o->get_snames()) out.push_back("-" + s);
  }
  return out;
}

std::vector<std::string> subnames(const CLI::App* app) {
  std::vector<std::string> out;
  for (const auto* sub : app->get_subcommands(visible)) out.push_back(sub->get_name());
  return out;
}

std::string join(const std::vector<std::string>& v, const char* sep = " ") {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : sep) + x;
  return s;
}

// roff: a leading '.' or '\'' would be a request; backslashes and hyphens are escaped
std::string roff(const std::string& t) {
  std::string o;
  for (char c : t) {
    if (c == '\\') o += "\\\\";
    else if (c == '-') o += "\\-";
    else o += c;
  }
  if (!o.empty() && (o[0] == '.' || o[0] == '\'')) o = "\\&" + o;
  return o;
}

}  // namespace

std::string completion_script(const CLI::App& app, const std::string& shell) {
  std::vector<cli_command> cmds;
  walk(&app, "", cmds);
  auto words_of = [](const CLI::App* a) { return join(subnames(a)) + " " + join(flags_of(a)); };
  // bash and zsh: one case arm per command path (the longest paths first, so "kb lint" wins over "kb"),
  // each setting `var` to that command's words: open + words + close.
  auto case_arms = [&](const std::string& open, const std::string& close) {
    std::string arms;
    for (auto it = cmds.rbegin(); it != cmds.rend(); ++it) arms += "    \"" + it->path + "\"*) " + open + words_of(it->app) + close + ";;\n";
    return arms + "    *) " + open + words_of(&app) + close + ";;\n";
  };
  std::string s;
  // (the words typed so far are `cmdpath`: zsh ties `path` to $PATH)
  if (shell == "bash") {
    s += "# bash completion for firstfault (generated: firstfault completion bash)\n";
    s += "_firstfault() {\n  local cur=${COMP_WORDS[COMP_CWORD]} cmdpath=\"\" w\n";
    s += "  for w in \"${COMP_WORDS[@]:1:COMP_CWORD-1}\"; do case $w in -*) ;; *) cmdpath=\"${cmdpath:+$cmdpath }$w\";; esac; done\n";
    s += "  local words\n  case $cmdpath in\n" + case_arms("words=\"", "\"") + "  esac\n";
    s += "  COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n";
    s += "  [[ $cur != -* ]] && COMPREPLY+=($(compgen -f -- \"$cur\"))\n}\ncomplete -o filenames -F _firstfault firstfault\n";
  } else if (shell == "zsh") {
    s += "#compdef firstfault\n# zsh completion for firstfault (generated: firstfault completion zsh)\n";
    s += "_firstfault() {\n  local cmdpath=\"\" w\n  for w in ${words[2,CURRENT-1]}; do [[ $w == -* ]] || cmdpath=\"${cmdpath:+$cmdpath }$w\"; done\n";
    s += "  local -a opts\n  case $cmdpath in\n" + case_arms("opts=(", ")") + "  esac\n  compadd -a opts\n  _files\n}\ncompdef _firstfault firstfault\n";
  } else if (shell == "fish") {
    s += "# fish completion for firstfault (generated: firstfault completion fish)\n";
    for (const auto& n : subnames(&app))
      s += "complete -c firstfault -n '__fish_use_subcommand' -a " + n + "\n";
    for (const auto& c : cmds) {
      auto sp = c.path.find(' ');
      std::string cond = sp == std::string::npos ? "__fish_seen_subcommand_from " + c.path
                                                 : "__fish_seen_subcommand_from " + c.path.substr(sp + 1);
      for (const auto& n : subnames(c.app)) s += "complete -c firstfault -n '" + cond + "' -a " + n + "\n";
      for (const auto* o : c.app->get_options(visible_flag))
        for (const auto& l : o->get_lnames()) {
          std::string d = o->get_description();
          for (auto& ch : d)
            if (ch == '\'') ch = ' ';
          s += "complete -c firstfault -n '" + cond + "' -l " + l + " -d '" + d + "'\n";
        }
    }
  }
  return s;
}

std::string man_page(const CLI::App& app, const std::string& version) {
  std::vector<cli_command> cmds;
  walk(&app, "", cmds);
  std::string m;
  m += ".TH FIRSTFAULT 1 \"\" \"" + roff(version) + "\" \"User Commands\"\n";
  m += ".SH NAME\nfirstfault \\- " + roff(app.get_description().substr(app.get_description().find(':') + 2)) + "\n";
  m += ".SH SYNOPSIS\n.B firstfault\n[\\fIOPTIONS\\fR] \\fICOMMAND\\fR ...\n";
  m += ".SH DESCRIPTION\nHand it the logs of a failed distributed training job (per-rank files, launcher consoles, "
       "node logs such as dmesg, directories and archives of them) and it names the root cause, the first failing "
       "rank and host, the collateral errors, the fix and a command that verifies it. Host names, addresses and "
       "secrets are masked before anything is shown or stored.\n";
  m += ".SH COMMANDS\n";
  for (const auto& c : cmds) {
    m += ".SS \"firstfault " + roff(c.path) + "\"\n" + roff(c.app->get_description()) + "\n";
    for (const auto* o : c.app->get_options([](const CLI::Option* o) { return !o->get_group().empty(); })) {
      if (o->get_name() == "--help") continue;
      std::string names = o->get_positional() ? o->get_name(true) : o->get_name(false, true);
      m += ".TP\n.B " + roff(names) + "\n" + roff(o->get_description().empty() ? "(positional)" : o->get_description()) + "\n";
    }
  }
  m += ".SH EXIT STATUS\n.TP\n0\nhealthy: no failure found\n.TP\n1\na failure was diagnosed\n.TP\n2\nbad usage, or nothing "
       "could be read\n.TP\n3\nundetermined: something failed, but nothing explains it (the lines that look wrong are shown)\n";
  m += ".SH ENVIRONMENT\n.TP\nFIRSTFAULT_CACHE_DIR\ncache of compiled pattern databases and the parsed knowledge base "
       "(default $XDG_CACHE_HOME/firstfault; \"off\" disables)\n.TP\nXDG_DATA_HOME\nwhere the history database lives "
       "(firstfault/history.db)\n.TP\nNO_COLOR\nno colour in terminal reports\n";
  m += ".SH SEE ALSO\nfirstfault explain KIND, firstfault kb search WORD, and docs/ in the source tree.\n";
  return m;
}

}  // namespace ff::cli
