#include "common/cli/runner.h"

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/logging.h"
#include "common/status_macros.h"

ABSL_FLAG(std::string, config, "",
          "Optional JSON config file whose keys are this command's flag "
          "names; flags on the command line override it.");
ABSL_FLAG(std::string, log_level, "info",
          "Least severe log messages written to stderr: info, warning or "
          "error.");
ABSL_FLAG(int, verbosity, 0, "Verbose logging level (VLOG).");

namespace skipswarm::common::cli {
namespace {

constexpr char kCommonFlagsFile[] = "common/cli/runner.cc";

bool FileMatches(const std::string& file, const std::string& suffix) {
  return absl::EndsWith(file, suffix);
}

const Command* FindCommand(const std::vector<Command>& commands,
                           absl::string_view name) {
  for (const Command& c : commands) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

}  // namespace

const Command* CommandToRun(int argc, char** argv, const std::vector<Command>& commands) {
  if (argc < 2) return nullptr;
  return FindCommand(commands, argv[1]);
}

namespace {

// "--name=value" / "--name" / "-name" → "name"; empty if not a flag.
std::string FlagName(const std::string& arg) {
  if (arg.size() < 2 || arg[0] != '-' || arg == "--") return "";
  size_t start = arg[1] == '-' ? 2 : 1;
  size_t eq = arg.find('=');
  return arg.substr(start, eq == std::string::npos ? std::string::npos
                                                   : eq - start);
}

bool IsHelpArg(const std::string& arg) {
  return arg == "--help" || arg == "-h" || arg == "-help" ||
         arg == "--helpfull" || arg == "help";
}

int ParseLogLevel(const std::string& level) {
  if (level == "warning") return 1;
  if (level == "error") return 2;
  return 0;
}

}  // namespace

absl::StatusOr<std::string> ResolveFlagAlias(const Command& command, const std::string& name) {
  if (name.empty() || FlagBelongsTo(command, name)) return name;
  std::vector<std::string> means;
  for (const auto& [alias, flag] : command.flag_aliases) {
    if (name == alias) means.push_back(flag);
  }
  if (!command.flag_prefix.empty()) {
    const std::string prefixed = command.flag_prefix + name;
    if (FlagBelongsTo(command, prefixed) &&
        std::find(means.begin(), means.end(), prefixed) == means.end()) {
      means.push_back(prefixed);
    }
  }
  if (means.empty()) return name;
  if (means.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "flag --", name, " is ambiguous for 'skipswarm ", command.name, "': it may mean --",
        absl::StrJoin(means, " or --"), "; use the full name"));
  }
  return means[0];
}

std::string ShortFlagName(const Command& command, const std::string& flag) {
  if (command.flag_prefix.empty() || !absl::StartsWith(flag, command.flag_prefix) ||
      flag.size() == command.flag_prefix.size()) {
    return flag;
  }
  const std::string short_name = flag.substr(command.flag_prefix.size());
  absl::StatusOr<std::string> back = ResolveFlagAlias(command, short_name);
  return back.ok() && *back == flag ? short_name : flag;
}

bool FlagBelongsTo(const Command& command, const std::string& name) {
  absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
  if (flag == nullptr || flag->IsRetired()) return false;
  std::string file = flag->Filename();
  if (FileMatches(file, kCommonFlagsFile)) return true;
  return std::any_of(command.flag_files.begin(), command.flag_files.end(),
                     [&](const std::string& s) { return FileMatches(file, s); });
}

std::string TopLevelHelp(const std::vector<Command>& commands) {
  std::string out =
      "skipswarm: train one language model together over the internet.\n\n"
      "usage: skipswarm <command> [flags] [args]\n\ncommands:\n";
  for (const Command& c : commands) {
    absl::StrAppendFormat(&out, "  %-10s %s\n", c.name, c.summary);
  }
  absl::StrAppend(&out, "  help       Show this list, or `skipswarm help <command>`\n",
                  "\nRun `skipswarm <command> --help` for a command's flags.\n",
                  "Every command accepts --config=FILE (JSON; its keys are the "
                  "command's flag names).\n");
  return out;
}

std::string CommandHelp(const Command& command, bool full) {
  std::string out = absl::StrCat("usage: ", command.usage, "\n\n", command.summary, "\n");
  std::vector<absl::CommandLineFlag*> own, common;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (flag->IsRetired()) continue;
    if (FileMatches(flag->Filename(), kCommonFlagsFile)) {
      common.push_back(flag);
    } else if (FlagBelongsTo(command, std::string(name))) {
      own.push_back(flag);
    }
  }
  // Own flags under the names the command line takes (Note [Short flag
  // names]), sorted by them.
  auto shown = [&](absl::CommandLineFlag* f) {
    return ShortFlagName(command, std::string(f->Name()));
  };
  auto by_name = [&](absl::CommandLineFlag* a, absl::CommandLineFlag* b) {
    return shown(a) < shown(b);
  };
  std::sort(own.begin(), own.end(), by_name);
  std::sort(common.begin(), common.end(), by_name);
  auto print = [&](const std::vector<absl::CommandLineFlag*>& flags) {
    for (absl::CommandLineFlag* f : flags) {
      const std::string name = shown(f);
      absl::StrAppendFormat(&out, "  --%s (default: \"%s\")\n      %s\n", name,
                            f->DefaultValue(), f->Help());
      if (name != f->Name()) {
        absl::StrAppendFormat(&out, "      (old name, deprecated: --%s)\n", f->Name());
      }
    }
  };
  // Own flags by help group (Command::help_groups); the ungrouped ones first.
  const size_t n = command.help_groups.size();
  std::vector<std::vector<absl::CommandLineFlag*>> grouped(n + 1);
  for (absl::CommandLineFlag* f : own) {
    size_t g = 0;
    for (; g < n; ++g) {
      const Command::HelpGroup& group = command.help_groups[g];
      const std::string name(f->Name());
      if (std::find(group.flags.begin(), group.flags.end(), name) != group.flags.end()) break;
      bool file_match = false;
      for (const std::string& file : group.files) {
        file_match = file_match || FileMatches(f->Filename(), file);
      }
      if (file_match) break;
    }
    grouped[g == n ? 0 : g + 1].push_back(f);
  }
  int hidden = 0;
  if (!grouped[0].empty()) {
    absl::StrAppend(&out, "\nflags:\n");
    print(grouped[0]);
  }
  for (size_t g = 0; g < n; ++g) {
    if (grouped[g + 1].empty()) continue;
    const Command::HelpGroup& group = command.help_groups[g];
    if (group.hidden && !full) {
      hidden += static_cast<int>(grouped[g + 1].size());
      continue;
    }
    absl::StrAppend(&out, "\n", group.title, " flags:\n");
    print(grouped[g + 1]);
  }
  for (const auto& [alias, flag] : command.flag_aliases) {
    absl::StrAppendFormat(&out, "  --%s: same as --%s\n", alias, flag);
  }
  absl::StrAppend(&out, "\ncommon flags:\n");
  print(common);
  if (hidden > 0) {
    absl::StrAppend(&out, "\n", hidden, " experiment flags are not shown; `skipswarm ",
                    command.name, " --helpfull` lists them.\n");
  }
  return out;
}

absl::Status ApplyConfig(const Command& command,
                         const std::vector<ConfigEntry>& entries,
                         const std::string& source) {
  for (ConfigEntry entry : entries) {
    absl::StatusOr<std::string> key = ResolveFlagAlias(command, entry.key);
    if (!key.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("config file '", source, "': key '",
                                                     entry.key, "': ", key.status().message()));
    }
    entry.key = *std::move(key);
    if (entry.key == "config") {
      return absl::InvalidArgumentError(absl::StrCat(
          "config file '", source, "': key 'config' cannot nest config files"));
    }
    if (!FlagBelongsTo(command, entry.key)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "config file '", source, "': unknown key '", entry.key,
          "' for 'skipswarm ", command.name,
          "' (keys are its flag names; see skipswarm ", command.name,
          " --help)"));
    }
    std::string error;
    if (!absl::FindCommandLineFlag(entry.key)->ParseFrom(entry.value, &error)) {
      return absl::InvalidArgumentError(
          absl::StrCat("config file '", source, "': key '", entry.key,
                       "': bad value \"", entry.value, "\": ", error));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckFlagsBelong(const Command& command,
                              const std::vector<std::string>& args) {
  for (const std::string& arg : args) {
    if (arg == "--") break;  // the rest are positional
    const std::string given = FlagName(arg);
    if (given.empty()) continue;
    SS_ASSIGN_OR_RETURN(const std::string name, ResolveFlagAlias(command, given));
    if (FlagBelongsTo(command, name)) continue;
    // --nofoo negates boolean flag foo.
    if (absl::StartsWith(given, "no")) {
      SS_ASSIGN_OR_RETURN(const std::string negated, ResolveFlagAlias(command, given.substr(2)));
      if (FlagBelongsTo(command, negated)) continue;
    }
    return absl::InvalidArgumentError(
        absl::StrCat("unknown flag --", name, " for 'skipswarm ", command.name,
                     "' (see skipswarm ", command.name, " --help)"));
  }
  return absl::OkStatus();
}

int RunCli(int argc, char** argv, const std::vector<Command>& commands,
           const std::function<void()>& on_start) {
  // `skipswarm --version` is `skipswarm version` (when there is one).
  if (argc == 2 && (argv[1] == std::string("--version") || argv[1] == std::string("-V"))) {
    if (const Command* v = FindCommand(commands, "version")) return v->run({});
  }
  if (argc < 2 || IsHelpArg(argv[1])) {
    if (argc >= 3) {
      const Command* c = FindCommand(commands, argv[2]);
      if (c == nullptr) {
        std::cerr << "skipswarm: unknown command '" << argv[2] << "'\n\n"
                  << TopLevelHelp(commands);
        return 2;
      }
      std::cout << CommandHelp(*c, /*full=*/argv[1] == std::string("--helpfull"));
      return 0;
    }
    std::cout << TopLevelHelp(commands);
    return argc < 2 ? 2 : 0;
  }
  const Command* command = FindCommand(commands, argv[1]);
  if (command == nullptr) {
    std::cerr << "skipswarm: unknown command '" << argv[1] << "'\n\n"
              << TopLevelHelp(commands);
    return 2;
  }
  std::vector<std::string> args(argv + 2, argv + argc);
  // Aliases become the flags they stand for before anything reads them
  // (Note [Short flag names]); CheckFlagsBelong below reports the unknown
  // and ambiguous ones, which stay as given.
  for (std::string& arg : args) {
    if (arg == "--") break;
    const std::string name = FlagName(arg);
    if (name.empty()) continue;
    std::string flag = ResolveFlagAlias(*command, name).value_or(name);
    if (flag == name && absl::StartsWith(name, "no") && !FlagBelongsTo(*command, name)) {
      // --nofoo: foo's alias, negated.
      const std::string negated = ResolveFlagAlias(*command, name.substr(2)).value_or("");
      if (FlagBelongsTo(*command, negated)) flag = "no" + negated;
    }
    if (flag == name) continue;
    arg = absl::StrCat(arg[1] == '-' ? "--" : "-", flag, arg.substr(arg.find(name) + name.size()));
  }
  for (const std::string& arg : args) {
    if (arg == "--") break;
    if (IsHelpArg(arg) && arg != "help") {
      std::cout << CommandHelp(*command, /*full=*/arg == "--helpfull");
      return 0;
    }
  }
  if (absl::Status s = CheckFlagsBelong(*command, args); !s.ok()) {
    std::cerr << "skipswarm: " << s.message() << "\n";
    return 2;
  }
  // The config file first, so that command-line flags override it.
  for (size_t i = 0; i < args.size(); ++i) {
    std::string path;
    if (absl::StartsWith(args[i], "--config=")) {
      path = args[i].substr(9);
    } else if (args[i] == "--config" && i + 1 < args.size()) {
      path = args[i + 1];
    } else {
      continue;
    }
    auto entries = ReadConfigFile(path);
    absl::Status s = entries.ok() ? ApplyConfig(*command, *entries, path)
                                  : entries.status();
    if (!s.ok()) {
      std::cerr << "skipswarm: " << s.message() << "\n";
      return 2;
    }
  }
  std::vector<char*> parse_argv{argv[0]};
  for (std::string& arg : args) parse_argv.push_back(arg.data());
  std::vector<char*> rest =
      absl::ParseCommandLine(static_cast<int>(parse_argv.size()), parse_argv.data());
  std::vector<std::string> positional(rest.begin() + 1, rest.end());

  LoggingOptions logging;
  logging.min_log_level = ParseLogLevel(absl::GetFlag(FLAGS_log_level));
  logging.verbosity = absl::GetFlag(FLAGS_verbosity);
  InitLogging(argv[0], logging);
  if (on_start) on_start();
  return command->run(positional);
}

}  // namespace skipswarm::common::cli
