# Cross toolchain for arm64 (Jetson-class vehicle computers) with Debian's cross compiler and
# multiarch arm64 library packages (scripts/arm64.sh installs both); tests run under qemu-user.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# Header-only and arch-independent packages (Eigen, nanoflann, cppzmq, nlohmann-json) live in
# the host's /usr/share and /usr/include; libraries come from /usr/lib/aarch64-linux-gnu.
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /usr/aarch64-linux-gnu)
