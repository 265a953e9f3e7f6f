# SPDX-License-Identifier: MIT
# The fork engine against real QEMU (root, built image).
# checkpoint.c moves into fk_vmm once vmm/CMakeLists.txt settles.
add_executable(fork-engine-test integration/fork-engine.c ${CMAKE_SOURCE_DIR}/vmm/checkpoint.c)
target_link_libraries(fork-engine-test PRIVATE fk_vmm)
fk_integration_test(fork-engine COMMAND fork-engine-test TIMEOUT 900)
