#include "dejaview/server/storage.h"

#include "dejaview/base/file_util.h"

namespace dv::server {

StatusOr<Storage> OpenStorage(const std::string& store_dir, const std::string& store_config,
                              const std::string& index) {
  if (store_dir.empty()) return Status::InvalidArgument("server: no store folder given");
  DV_RETURN_IF_ERROR(MakeDirs(store_dir));
  store::StoreConfig config;
  config.disk.dir = store_dir;
  if (store_config.empty()) {
    DV_RETURN_IF_ERROR(store::FinishStoreConfig(store_dir, &config));
  } else {
    DV_ASSIGN_OR_RETURN(const std::string yaml,
                        ReadFileText(store_config, config::kMaxConfigBytes));
    DV_RETURN_IF_ERROR(store::ApplyStoreConfig(yaml, store_config, &config));
  }
  Storage s;
  DV_ASSIGN_OR_RETURN(s.store, store::Store::Open(config));
  DV_ASSIGN_OR_RETURN(s.index,
                      store::OpenFrameIndex(index.empty() ? store_dir + "/index.sqlite" : index));
  return s;
}

}  // namespace dv::server
