// tests/validate/validate_cli_main.cpp — `calibrate` and `validate` without the rest of the dptwin CLI.
#include <iostream>

#include "apps/validate_commands.hpp"
#include "core/error.hpp"

int main(int argc, char** argv) {
  try {
    CLI::App app{"dptwin calibrate / validate (test driver)"};
    app.require_subcommand(1);
    dptwin::apps::ValidateCommands vc(app);
    try {
      app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
      const int rc = app.exit(e);
      return rc == 0 ? 0 : dptwin::kExitInputError;
    }
    return vc.run();
  } catch (const dptwin::InputError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return dptwin::kExitInputError;
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
