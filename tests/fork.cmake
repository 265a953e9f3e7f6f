# SPDX-License-Identifier: MIT
# The fork engine against real QEMU (root, built image), and the harness bench/fork shares.
add_library(fork-harness STATIC integration/fork-harness.c)
target_link_libraries(fork-harness PUBLIC fk_vmm)
add_executable(fork-engine-test integration/fork-engine.c)
target_link_libraries(fork-engine-test PRIVATE fork-harness)
fk_integration_test(fork-engine COMMAND fork-engine-test TIMEOUT 900)

# forkletd + CLI with real QEMU: workspace disk, checkpoints, fork, rollback, snapshots.
fk_integration_test(fork-disk
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/fork-disk.sh
          $<TARGET_FILE:forkletd> $<TARGET_FILE:forklet>
  TIMEOUT 900)
fk_integration_test(fork-agent
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/fork-agent.sh
          $<TARGET_FILE:forkletd> $<TARGET_FILE:forklet>
  TIMEOUT 1500)
fk_integration_test(fork-snapshot
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/fork-snapshot.sh
          $<TARGET_FILE:forkletd> $<TARGET_FILE:forklet>
  TIMEOUT 1200)
if(CMOCKA_FOUND)
  fk_unit_test(fork-cli-args-test SOURCES unit/fork-cli-args-test.c LIBS fk_cli)
  fk_unit_test(fork-daemon-test SOURCES unit/fork-daemon-test.c LIBS fk_cli fk_agent)
endif()
fk_integration_test(fork-secrets
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/fork-secrets.sh
          $<TARGET_FILE:forkletd> $<TARGET_FILE:forklet>
  TIMEOUT 1200)
# kill -9 of forkletd mid-checkpoint and mid-fork of 5, then restart (issue 7's recovery).
fk_integration_test(agent-crash
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/agent-crash.sh
          $<TARGET_FILE:forkletd> $<TARGET_FILE:forklet>
  TIMEOUT 900)
