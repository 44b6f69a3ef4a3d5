//===- main.cpp - the hypipe command-line tool ----------------------------===//
#include "tools/Version.h"
#include "tools/common/CliErrors.h"
#include "tools/hypipe/Commands.h"

#include <exception>
#include <iostream>

int main(int argc, char **argv) {
  CLI::App app{"hypipe: a compiler for pipeline-parallel training of hybrid "
               "(Mamba / attention / MLP / MoE) language models"};
  app.set_version_flag("--version", "hypipe " HYPIPE_VERSION
                                    " (git " HYPIPE_GIT_REVISION ")");
  app.require_subcommand(1);
  hypipe::cli::Runner run;
  hypipe::cli::addLayoutCommand(app, run);
  hypipe::cli::addCompileCommand(app, run);
  hypipe::cli::addExplainCommand(app, run);
  hypipe::cli::addPlanCommand(app, run);
  hypipe::cli::addPartitionCommand(app, run);
  hypipe::cli::addScheduleCommand(app, run);
  hypipe::cli::addGridCommand(app, run);
  hypipe::cli::addSplitCommand(app, run);
  hypipe::cli::addTrainCommand(app, run);
  hypipe::cli::addCheckpointCommand(app, run);
  hypipe::cli::addDataCommand(app, run);
  hypipe::cli::addPlotCommand(app, run);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp &e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp &e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion &e) {
    return app.exit(e);
  } catch (const CLI::ParseError &e) {
    return hypipe::cli::reportParseError(app, e); // 2: a usage error
  }
  try {
    return run();
  } catch (const std::exception &e) {
    // A backstop: every input is checked where it is read, so what reaches
    // here is a bug or the machine running out (std::bad_alloc).
    std::cerr << "error: " << e.what()
              << "\nhelp: if the machine has the memory this needs, this is "
                 "a bug in hypipe; please report it\n";
    return 1;
  }
}
