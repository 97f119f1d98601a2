#include "node/commands.h"

#include <iostream>

#include "proto/version.h"

namespace skipswarm::node {
namespace {

common::cli::Command VersionCommand() {
  return {"version", "Print the software and protocol versions",
          "skipswarm version",
          {},
          [](const std::vector<std::string>&) {
            std::cout << "skipswarm " << proto::kSoftwareVersion
                      << " (protocol v" << static_cast<int>(proto::kProtocolVersion)
                      << ")\n";
            return 0;
          }};
}

}  // namespace

std::vector<common::cli::Command> AllCommands() {
  return {
      VersionCommand(),
  };
}

}  // namespace skipswarm::node
