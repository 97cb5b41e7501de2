#include "cli/usage_errors.h"

#include <cctype>
#include <optional>
#include <regex>

#include "ddx/errors/errors.h"
#include "ddx/text/text.h"
#include "ddx/errors/usage_exit_code.h"

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

// The option a value error is about. CLI11 starts a ValidationError with its name ("--max-steps:
// Value abc not in range ...") and names it in a ConversionError ("Could not convert: --seed =
// abc"); it is looked up in the innermost subcommand named, then in the ones around it.
const CLI::Option* option_of_value_error(const Scan& s, const CLI::ParseError& error) {
  const std::string text = error.what();
  std::string name;
  if (dynamic_cast<const CLI::ValidationError*>(&error)) {
    name = text.substr(0, text.find(": "));
  } else if (dynamic_cast<const CLI::ConversionError*>(&error)) {
    const std::string lead = "Could not convert: ";
    if (text.rfind(lead, 0) == 0) name = text.substr(lead.size(), text.find(" = ") - lead.size());
  }
  if (name.empty()) return nullptr;
  for (const CLI::App* app = s.app; app != nullptr; app = app->get_parent()) {
    if (const CLI::Option* opt = app->get_option_no_throw(name)) return opt;
  }
  return nullptr;
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts(1);
  for (char c : text) {
    if (c == separator) {
      parts.emplace_back();
    } else {
      parts.back() += c;
    }
  }
  return parts;
}

// What the option takes, in words, from the type and the checks it was declared with ("INT",
// "INT in [0 - 1099511627776]", "{fp32,bf16,fp64}", "NONNEGATIVE"); empty when they say nothing
// plainer than CLI11's own message (a file that must exist, say).
std::string expected_value(const CLI::Option& opt) {
  const std::vector<std::string> parts = split(opt.get_type_name(), ':');  // the type, then each check
  const std::string& type = parts.front();
  const bool whole = type == "INT" || type == "UINT" || type == "N";
  const std::string number = whole ? "a whole number" : "a number";
  static const std::regex range(R"(^\w+ in \[(.+) - (.+)\]$)");
  for (size_t i = parts.size() - 1; i >= 1; --i) {  // the last check is the most specific
    std::smatch m;
    if (std::regex_match(parts[i], m, range)) return number + " from " + m[1].str() + " to " + m[2].str();
    if (parts[i] == "NONNEGATIVE") return number + ", 0 or more";
    if (parts[i] == "POSITIVE") return number + " above 0";
    if (parts[i].size() >= 2 && parts[i].front() == '{' && parts[i].back() == '}') {
      return "one of: " + join(split(parts[i].substr(1, parts[i].size() - 2), ','));
    }
  }
  if (whole) return type == "UINT" ? "a whole number, 0 or more" : "a whole number";
  if (type == "FLOAT") return number;
  return "";
}

// "--max-steps 'abc' is not a whole number from 0 to 1099511627776": the flag, the value as
// given and what it takes, in place of CLI11's "Value abc not in range 0 to 1099511627776".
// Empty when the error is not about a value or the option's declaration says nothing plainer.
std::string describe_bad_value(const Scan& s, const CLI::ParseError& error) {
  const CLI::Option* opt = option_of_value_error(s, error);
  if (!opt || opt->results().empty()) return "";
  const std::string expected = expected_value(*opt);
  if (expected.empty()) return "";
  return opt->get_name() + " '" + join(opt->results(), ",") + "' is not " + expected;
}

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
  if (const std::string bad = describe_bad_value(s, error); !bad.empty()) return bad + see_help(s);
  return error.what() + see_help(s);
}

int usage_exit_code(const CLI::App& app, const std::vector<std::string>& args) {
  for (const CLI::App* a = scan(app, args).app; a != nullptr; a = a->get_parent()) {
    if (const std::optional<int> code = declared_usage_exit_code(*a)) return *code;
  }
  return kExitUsage;
}

}  // namespace ddx::cli
