// apps/cli_table.hpp — declarative option tables for the dptwin CLI.
//
// Each command declares its flags once, as a table of {names, help, target
// member, allowed values}; register_options() turns the table into CLI11
// options. The end-to-end tests check that `--help` of each command lists every
// row of its table (tests/e2e/run_e2e.py).
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <variant>
#include <vector>

namespace dptwin::apps {

template <typename Args>
struct OptionRow {
  const char* names;  // CLI11 names: "--format", "-f,--format", or "file" for a positional
  const char* help;
  std::variant<std::string Args::*, int Args::*, double Args::*, bool Args::*> target;
  std::vector<std::string> choices = {};  // allowed values (empty = any)
};

template <typename Args>
void register_options(CLI::App& app, Args& args, const std::vector<OptionRow<Args>>& table) {
  for (const auto& row : table) {
    std::visit(
        [&](auto member) {
          using T = std::remove_reference_t<decltype(args.*member)>;
          if constexpr (std::is_same_v<T, bool>) {
            app.add_flag(row.names, args.*member, row.help);
          } else {
            CLI::Option* o = app.add_option(row.names, args.*member, row.help);
            if (!row.choices.empty()) o->check(CLI::IsMember(row.choices));
            if constexpr (!std::is_same_v<T, std::string>) o->capture_default_str();
            else if (!(args.*member).empty()) o->capture_default_str();
          }
        },
        row.target);
  }
}

}  // namespace dptwin::apps
