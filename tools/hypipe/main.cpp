//===- main.cpp - the hypipe command-line tool ----------------------------===//
#include "tools/Version.h"
#include "tools/hypipe/Commands.h"

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
  hypipe::cli::addPartitionCommand(app, run);
  hypipe::cli::addScheduleCommand(app, run);
  hypipe::cli::addTrainCommand(app, run);
  hypipe::cli::addCheckpointCommand(app, run);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp &e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp &e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion &e) {
    return app.exit(e);
  } catch (const CLI::ParseError &e) {
    app.exit(e);
    return 2; // usage error
  }
  return run();
}
