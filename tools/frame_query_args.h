// Options shared by `dejaview query` and `dejaview export`: which frames (--vehicle, --from,
// --to, --near with --radius, --limit) and where they live (--db, --store, --store-config).
#pragma once

#include <set>
#include <string>

#include "dejaview/base/args.h"
#include "dejaview/server/export.h"
#include "dejaview/server/storage.h"

namespace dv::cli {

// The value keys these options add to a command's own.
std::set<std::string> FrameQueryKeys(std::set<std::string> own);
StatusOr<store::FrameQuery> ParseFrameQuery(const Args& args);
// --store DIR (default: --db's folder), --db INDEX (default: STORE/index.sqlite), --store-config.
StatusOr<server::Storage> OpenQueryStorage(const Args& args);
extern const char* const kFrameQueryUsage;
// Prints, on stderr, how many frames an export skipped and why (nothing when none).
void ReportSkipped(const server::ExportStats& st);

}  // namespace dv::cli
