#include "common/atomic_file.h"
#include "identity/keygen_command.h"

#include <iostream>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/real_clock.h"
#include "common/status_macros.h"
#include "identity/identity.h"

ABSL_FLAG(std::string, key_file, "node.key",
          "Path of the node's Ed25519 private key (PEM, mode 0600).");
ABSL_FLAG(std::string, cert_file, "",
          "keygen: also write the self-signed certificate (PEM) here.");
ABSL_FLAG(bool, overwrite_key, false,
          "keygen: replace an existing key file (the node gets a new id).");
ABSL_FLAG(bool, show_key, false,
          "keygen: do not create anything; print the id of --key_file.");

namespace skipswarm::identity {

absl::StatusOr<std::string> RunKeygen(const KeygenOptions& options,
                                      absl::Time now) {
  std::unique_ptr<Identity> identity;
  std::string action;
  if (options.show) {
    SS_ASSIGN_OR_RETURN(identity, Identity::Load(options.key_file));
    action = "loaded";
  } else {
    SS_ASSIGN_OR_RETURN(identity, Identity::Generate());
    SS_RETURN_IF_ERROR(identity->Save(options.key_file, options.overwrite));
    action = "wrote";
  }
  std::string out = absl::StrCat(action, " key ", options.key_file,
                                 " (Ed25519, mode 0600)\nnode id ",
                                 identity->id().Hex(), "\n");
  if (!options.cert_file.empty()) {
    SS_ASSIGN_OR_RETURN(std::string pem,
                        identity->SelfSignedCertificatePem(now));
    SS_RETURN_IF_ERROR(common::WriteFileAtomically(options.cert_file, pem, 0644));
    absl::StrAppend(&out, "wrote certificate ", options.cert_file, "\n");
  }
  return out;
}

common::cli::Command KeygenCommand() {
  return {"keygen",
          "Create the node identity key (Ed25519) and print the node id",
          "skipswarm keygen [--key_file=node.key] [--cert_file=node.crt] "
          "[--overwrite_key] [--show_key]",
          {"identity/keygen_command.cc"},
          [](const std::vector<std::string>& args) {
            if (!args.empty()) {
              std::cerr << "keygen takes no positional arguments\n";
              return 2;
            }
            KeygenOptions options;
            options.key_file = absl::GetFlag(FLAGS_key_file);
            options.cert_file = absl::GetFlag(FLAGS_cert_file);
            options.overwrite = absl::GetFlag(FLAGS_overwrite_key);
            options.show = absl::GetFlag(FLAGS_show_key);
            auto out = RunKeygen(options, common::RealClock::Create()->Now());
            if (!out.ok()) {
              std::cerr << "keygen: " << out.status().message() << "\n";
              return 1;
            }
            std::cout << *out;
            return 0;
          }};
}

}  // namespace skipswarm::identity
