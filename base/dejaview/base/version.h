// The project's version (CMakeLists.txt's project(VERSION)), for --version and the build-info
// metric series.
#pragma once

namespace dv {

const char* Version();

}  // namespace dv
