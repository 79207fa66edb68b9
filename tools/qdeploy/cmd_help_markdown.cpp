// qdeploy help-markdown (hidden): docs/cli.md, written from the commands' own CLI11 definitions (names, arguments,
// defaults, checks, descriptions), so that the reference cannot drift from the code; docs_cli_up_to_date checks it.
#include <set>
#include <sstream>

#include "build_flags.h"
#include "commands.h"

namespace qd::cli {

namespace {

// Text as Markdown shows it literally: `<x>` would be an HTML tag, `*` emphasis, `|` a table's column separator.
// A table cell also has to be one line.
std::string md(const std::string& s, bool one_line) {
  std::string out;
  for (char c : s) {
    if (c == '<') {
      out += "&lt;";
    } else if (c == '>') {
      out += "&gt;";
    } else if (c == '*' || c == '|') {
      out += std::string("\\") + c;
    } else if (c == '\n' && one_line) {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}
std::string cell(const std::string& s) { return md(s, true); }

bool listed(const CLI::App* a) { return !a->get_group().empty(); }  // CLI11 hides a command whose group is ""

// "qdeploy dataset fmnist-det": the root's own name is argv[0] once parsed, so it is spelled out.
std::string path_of(const CLI::App* a) {
  std::string p;
  for (const CLI::App* x = a; x->get_parent() != nullptr; x = x->get_parent()) p = " " + x->get_name() + p;
  return "qdeploy" + p;
}

// GitHub's heading anchor for "qdeploy NAME..." headings: lower case, spaces to '-'.
std::string anchor(const std::string& heading) {
  std::string a;
  for (char c : heading) a += c == ' ' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return a;
}

std::string option_names(const CLI::Option* o) {
  if (!o->nonpositional()) return "`" + o->get_name(true) + "`";
  std::string names;
  for (const auto& s : o->get_snames()) names += (names.empty() ? "`-" : ", `-") + s + "`";
  for (const auto& l : o->get_lnames()) names += (names.empty() ? "`--" : ", `--") + l + "`";
  return names;
}

std::string argument(const CLI::Option* o) {
  if (o->get_items_expected_max() == 0) return "";  // a flag
  std::string t = o->get_type_name();
  if (o->get_items_expected_max() > 1) t += " ...";
  return "`" + t + "`";
}

std::string notes(const CLI::Option* o) {
  std::vector<std::string> n;
  if (o->get_required()) n.push_back("required");
  if (!o->get_positional() && o->get_multi_option_policy() == CLI::MultiOptionPolicy::TakeAll &&
      o->get_items_expected_max() > 1)
    n.push_back("repeatable");
  if (!o->get_default_str().empty()) n.push_back("default `" + o->get_default_str() + "`");
  for (const CLI::Option* x : o->get_needs()) n.push_back("needs " + x->get_name());
  for (const CLI::Option* x : o->get_excludes()) n.push_back("excludes " + x->get_name());
  std::string s;
  for (const auto& x : n) s += (s.empty() ? "" : "; ") + x;
  return s;
}

// The options add_build_flags declares: written once under "Build flags", and in each command that has them all
// replaced by a link there.
struct BuildFlagSet {
  CLI::App probe;
  BuildFlags flags;
  std::set<std::string> names;
  BuildFlagSet() {
    add_build_flags(&probe, flags);
    for (const CLI::Option* o : probe.get_options()) {
      if (o != probe.get_help_ptr()) names.insert(o->get_name());
    }
  }
  bool all_in(const std::vector<const CLI::Option*>& opts) const {
    size_t n = 0;
    for (const CLI::Option* o : opts) n += names.count(o->get_name());
    return n == names.size();
  }
};

void write_options(std::ostream& os, const std::vector<const CLI::Option*>& opts) {
  if (opts.empty()) return;
  os << "| option | argument | | description |\n|---|---|---|---|\n";
  for (const CLI::Option* o : opts) {
    os << "| " << option_names(o) << " | " << cell(argument(o)) << " | " << cell(notes(o)) << " | "
       << cell(o->get_description()) << " |\n";
  }
  os << "\n";
}

void write_command(std::ostream& os, const CLI::App* a, const BuildFlagSet& build) {
  const std::string path = path_of(a);
  os << "## " << path << "\n\n" << md(a->get_description(), false) << "\n\n";
  const auto subs = a->get_subcommands([](const CLI::App* s) { return listed(s); });
  std::string usage = path;
  const auto opts = a->get_options([a](const CLI::Option* o) { return o != a->get_help_ptr(); });
  bool any_flag = false;
  for (const CLI::Option* o : opts) any_flag |= o->nonpositional();
  if (any_flag) usage += " [OPTIONS]";
  for (const CLI::Option* o : opts) {
    if (o->nonpositional()) continue;
    const std::string p = o->get_name(true) + (o->get_items_expected_max() > 1 ? "..." : "");
    usage += o->get_required() ? " " + p : " [" + p + "]";
  }
  if (!subs.empty()) usage += " COMMAND";
  os << "```\n" << usage << "\n```\n\n";
  if (!subs.empty()) {
    os << "| command | what it does |\n|---|---|\n";
    for (const CLI::App* s : subs) {
      os << "| [" << s->get_name() << "](#" << anchor(path_of(s)) << ") | " << cell(s->get_description()) << " |\n";
    }
    os << "\n";
  }
  const bool has_build_flags = build.all_in(opts);
  std::vector<const CLI::Option*> own;
  for (const CLI::Option* o : opts) {
    if (!has_build_flags || build.names.count(o->get_name()) == 0) own.push_back(o);
  }
  write_options(os, own);
  if (has_build_flags) os << "And the [build flags](#build-flags).\n\n";
  for (const CLI::App* s : subs) write_command(os, s, build);
}

int run_help_markdown(const CLI::App& app) {
  std::ostringstream os;
  os << "# Command-line reference\n\n"
     << "Generated by `qdeploy help-markdown` from the commands' own definitions (tools/qdeploy/cmd_*.cpp); a test "
        "checks that this file is up to date (regenerate it with scripts/gen-docs.sh). `qdeploy COMMAND --help` prints "
        "the same for one command.\n\n"
     << "Exit codes: 0 success, 2 bad input or usage (the message says what and how to fix it), 1 internal error.\n\n"
     << "Guides: [quickstart](quickstart.md), [quantization](quantization.md), [plan format](plan-format.md), "
        "[C++ API](cpp-api.md).\n\n";
  os << "| command | what it does |\n|---|---|\n";
  const auto subs = app.get_subcommands([](const CLI::App* s) { return listed(s); });
  for (const CLI::App* s : subs) {
    os << "| [" << s->get_name() << "](#" << anchor(path_of(s)) << ") | " << cell(s->get_description()) << " |\n";
  }
  os << "| [build flags](#build-flags) | how a command that runs a model builds it |\n\n";
  // Options of the tool itself (--plugin), which every command takes, before or after its name.
  const auto global = app.get_options([&](const CLI::Option* o) {
    return o != app.get_help_ptr() && o->get_name() != "--version";
  });
  if (!global.empty()) {
    os << "## Options of every command\n\nGiven before or after the command's name.\n\n";
    write_options(os, global);
  }
  const BuildFlagSet build;
  for (const CLI::App* s : subs) write_command(os, s, build);
  os << "## Build flags\n\n"
     << "Every command that runs a model takes them (the commands above that link here): how the model is built "
        "into an engine, as `qdeploy build` compiles it into a plan. A PLAN keeps the flags it was built with; "
        "other build flags given with a PLAN are an error.\n\n";
  write_options(os, build.probe.get_options([&](const CLI::Option* o) { return o != build.probe.get_help_ptr(); }));
  std::cout << os.str();
  return 0;
}

}  // namespace

RunFn add_help_markdown(CLI::App& app) {
  auto* sub = app.add_subcommand("help-markdown", "Print docs/cli.md (the reference of every command)");
  sub->group("");  // hidden: a tool for the docs, not a user command
  const CLI::App* root = &app;
  return [root] { return run_help_markdown(*root); };
}

}  // namespace qd::cli
