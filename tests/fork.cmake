# SPDX-License-Identifier: MIT
# The fork engine against real QEMU (root, built image).
add_executable(fork-engine-test integration/fork-engine.c)
target_link_libraries(fork-engine-test PRIVATE fk_vmm)
fk_integration_test(fork-engine COMMAND fork-engine-test TIMEOUT 900)
