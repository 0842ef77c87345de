# cmake -DSRC=<source dir> -DOUT=<scratch dir> -P run_neon_qemu.cmake
# Cross-compiles the neon kernels with the scalar reference (neon_vs_scalar.cpp) using
# Debian's aarch64-linux-gnu-g++ and runs the result under qemu-aarch64. Prints "SKIP: …" (the
# test's SKIP_REGULAR_EXPRESSION) naming what is missing when the toolchain or qemu-user is
# not installed (apt-get install g++-aarch64-linux-gnu qemu-user); cmake_language(EXIT)
# would need CMake 3.29, Debian 12 has 3.25.
find_program(CROSS_CXX aarch64-linux-gnu-g++)
find_program(QEMU qemu-aarch64)
if(NOT CROSS_CXX OR NOT QEMU)
  message("SKIP: needs aarch64-linux-gnu-g++ and qemu-aarch64 (apt-get install g++-aarch64-linux-gnu qemu-user)")
  return()
endif()
file(MAKE_DIRECTORY ${OUT})
set(exe ${OUT}/neon_vs_scalar)
execute_process(
  COMMAND ${CROSS_CXX} -std=c++20 -O2 -static -Wall -Wextra -Wpedantic -Wshadow -Wconversion
          -Wno-sign-conversion -Werror -ffp-contract=off -fno-fast-math
          -I${SRC}/sdk -I${SRC}/plugins/kernels/common -I${SRC}/plugins/kernels/scalar
          -I${SRC}/tests/unit/kernels_simd
          ${SRC}/tests/unit/kernels_simd/neon_qemu/neon_vs_scalar.cpp
          ${SRC}/plugins/kernels/neon/neon_kernels.cpp ${SRC}/plugins/kernels/neon/cpu_support.cpp
          -o ${exe}.tmp
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cross-compiling the neon kernels failed (exit ${rc})")
endif()
file(RENAME ${exe}.tmp ${exe})
execute_process(COMMAND ${QEMU} ${exe} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "neon kernels differ from scalar under qemu-aarch64 (exit ${rc})")
endif()
