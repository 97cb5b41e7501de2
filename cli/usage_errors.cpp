#include "cli/usage_errors.h"

#include <cctype>

#include "ddx/text.h"

namespace ddx::cli {
namespace {

// Where a walk over the arguments, done the way CLI11 reads them, stopped.
struct Scan {
  const CLI::App* app = nullptr;     // the innermost subcommand named
  std::string command;               // "ddx probe bandwidth"
  std::string unknown_flag;          // the first flag `app` does not have, as typed
  std::string stray_word;            // a word where `app` wanted a subcommand
  size_t first_positional = 0;       // index in args of the first positional word of `app`
  bool saw_positional = false;
};

bool looks_like_flag(const std::string& arg) {
  if (arg.size() < 2 || arg[0] != '-' || arg == "--") return false;
  return !(std::isdigit(static_cast<unsigned char>(arg[1])) || arg[1] == '.');  // -1, -.5: values
}

// "--max-step=2" -> "--max-step"; "-la" stays as typed.
std::string flag_name(const std::string& arg) { return arg.substr(0, arg.find('=')); }

const CLI::App* named_subcommand(const CLI::App& app, const std::string& word) {
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (!sub->get_name().empty() && sub->check_name(word)) return sub;
  }
  return nullptr;
}

Scan scan(const CLI::App& root, const std::vector<std::string>& args) {
  Scan s;
  s.app = &root;
  s.command = root.get_name();
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") break;  // the rest is positional
    if (looks_like_flag(arg)) {
      // "--name[=value]", or short letters run together ("-np 2" is -n, then -p taking 2).
      const bool is_long = arg.rfind("--", 0) == 0;
      for (size_t k = 1; k < (is_long ? 2 : arg.size()); ++k) {
        const std::string name = is_long ? flag_name(arg) : std::string("-") + arg[k];
        const CLI::Option* opt = s.app->get_option_no_throw(name);
        if (!opt) {
          s.unknown_flag = arg;
          return s;
        }
        if (opt->get_expected_max() == 0) continue;  // a flag
        // Takes a value: the rest of the word ("--lr=3", "-p4") or the next argument.
        const bool attached = is_long ? arg.find('=') != std::string::npos : k + 1 < arg.size();
        if (!attached) ++i;
        break;
      }
      continue;
    }
    if (const CLI::App* sub = named_subcommand(*s.app, arg)) {
      s.app = sub;
      s.command += " " + sub->get_name();
      s.saw_positional = false;
      continue;
    }
    if (s.app->get_require_subcommand_min() > 0 && s.stray_word.empty()) s.stray_word = arg;
    if (!s.saw_positional) {
      s.saw_positional = true;
      s.first_positional = i;
    }
  }
  return s;
}

// Every spelling of every flag `app` has, for suggestions.
std::vector<std::string> flag_spellings(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::Option* opt : app.get_options()) {
    for (const auto& l : opt->get_lnames()) names.push_back("--" + l);
    for (const auto& sn : opt->get_snames()) names.push_back("-" + sn);
  }
  return names;
}

std::vector<std::string> subcommand_names(const CLI::App& app) {
  std::vector<std::string> names;
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (!sub->get_name().empty()) names.push_back(sub->get_name());
  }
  return names;
}

// A subcommand whose positional takes a whole command line (`ddx launch ... -- CMD ARGS`).
bool runs_a_command(const CLI::App& app) {
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->get_positional() && opt->get_items_expected_max() > 1) return true;
  }
  return false;
}

std::string see_help(const Scan& s) { return " (see " + s.command + " --help)"; }

}  // namespace

std::string describe_parse_error(const CLI::App& app, const std::vector<std::string>& args,
                                 const CLI::ParseError& error) {
  const Scan s = scan(app, args);
  if (!s.unknown_flag.empty()) {
    if (s.saw_positional && runs_a_command(*s.app)) {
      // `ddx launch -np 2 ls -la`: -la was meant for the command.
      std::vector<std::string> fixed = args;
      fixed.insert(fixed.begin() + static_cast<std::ptrdiff_t>(s.first_positional), "--");
      return "unknown flag " + s.unknown_flag + "; to pass it to the command, put '--' before the command: " +
             app.get_name() + " " + join(fixed, " ") + see_help(s);
    }
    const std::string guess = nearest_spelling(flag_name(s.unknown_flag), flag_spellings(*s.app));
    return "unknown flag " + s.unknown_flag + (guess.empty() ? "" : "; did you mean " + guess + "?") + see_help(s);
  }
  if (s.app->get_require_subcommand_min() > 0) {
    const std::vector<std::string> names = subcommand_names(*s.app);
    if (s.stray_word.empty()) return s.command + " needs a subcommand: " + join(names) + see_help(s);
    const std::string guess = nearest_spelling(s.stray_word, names);
    return "unknown subcommand '" + s.stray_word + "'" + (guess.empty() ? "" : "; did you mean '" + guess + "'?") +
           " Subcommands: " + join(names) + see_help(s);
  }
  return error.what() + see_help(s);
}

}  // namespace ddx::cli
