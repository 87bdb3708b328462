// What the server and the command line open to reach stored frames: the tiered store (its disk
// tier under the server's store folder unless the tier YAML says otherwise) and the frame index.
#pragma once

#include <memory>
#include <string>

#include "dejaview/store/frame_index.h"
#include "dejaview/store/store.h"

namespace dv::server {

struct Storage {
  std::unique_ptr<store::Store> store;
  std::unique_ptr<store::FrameIndex> index;
};

// store_dir: the server's store folder; store_config: the tiers' YAML (docs/store.md), empty
// for the disk tier alone; index: OpenFrameIndex's URI, empty for STORE/index.sqlite.
StatusOr<Storage> OpenStorage(const std::string& store_dir, const std::string& store_config,
                              const std::string& index);

}  // namespace dv::server
