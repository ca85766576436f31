# Cross toolchain for 64-bit ARM Linux (Debian/Ubuntu g++-aarch64-linux-gnu).
# Executables are linked statically so they run under qemu-aarch64-static without
# an arm64 sysroot.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

set(CMAKE_EXE_LINKER_FLAGS_INIT "-static")
# Run test executables (e.g. gtest discovery) through qemu when it is available.
find_program(PLLM_QEMU_AARCH64 qemu-aarch64-static)
if(PLLM_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${PLLM_QEMU_AARCH64})
endif()
