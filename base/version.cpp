#include "dejaview/base/version.h"

namespace dv {

const char* Version() { return DEJAVIEW_VERSION; }

}  // namespace dv
