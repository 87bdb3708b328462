// dejaview keygen: a CURVE key pair for the upload link (docs/upload-protocol.md): PREFIX.secret
// (mode 0600; the agent's upload.curve_key_file or the server's --curve-key) and PREFIX.public
// (the server's key goes into agent configs; an agent's key is enrolled by copying it to the
// server's keys directory as VEHICLE.public, docs/security.md).
#include <cstdio>

#include "commands.h"
#include "dejaview/base/args.h"
#include "dejaview/base/file_util.h"
#include "dejaview/transport/upload.h"

namespace dv::cli {

int RunKeygen(int argc, char** argv) {
  auto args = Args::Parse(argc, argv, {"out"}, {"help"});
  if (!args.ok()) return Fail("keygen", args.status());
  if (args->Has("help") || !args->Has("out")) {
    std::printf(
        "usage: dejaview keygen --out PREFIX\n"
        "  a CURVE key pair for the upload link (docs/security.md)\n"
        "  --out PREFIX  writes PREFIX.secret (mode 0600) and PREFIX.public (Z85)\n"
        "  -h, --help    this text\n");
    return args->Has("help") ? kOk : kUsage;
  }
  auto keys = transport::GenerateCurveKeys();
  if (!keys.ok()) return Fail("keygen", keys.status());
  const std::string prefix = args->Get("out");
  Status s = WriteFileAtomic(prefix + ".secret", keys->secret_z85 + "\n", 0600);
  if (s.ok()) s = WriteFileAtomic(prefix + ".public", keys->public_z85 + "\n");
  if (!s.ok()) return Fail("keygen", s);
  std::printf("%s\n", keys->public_z85.c_str());
  return kOk;
}

}  // namespace dv::cli
