# SPDX-License-Identifier: MIT
# The fork engine against real QEMU (root, built image), and the harness bench/fork shares.
add_library(fork-harness STATIC integration/fork-harness.c)
target_link_libraries(fork-harness PUBLIC fk_vmm)
add_executable(fork-engine-test integration/fork-engine.c)
target_link_libraries(fork-engine-test PRIVATE fork-harness)
fk_integration_test(fork-engine COMMAND fork-engine-test TIMEOUT 900)

# forkletd + CLI with real QEMU: workspace disk, checkpoints, fork, rollback, snapshots.
fk_forkletd_test(fork-disk TIMEOUT 900)
fk_forkletd_test(fork-agent TIMEOUT 1500)
# The same with runDir and stateDir on one disk filesystem (fork-lib.sh's default puts runDir on
# a tmpfs): forkletd mounts its own tmpfs for guest RAM, reused across its restart.
fk_forkletd_test(fork-agent-single SCRIPT fork-agent.sh TIMEOUT 1500 ENV FK_LAYOUT=single)
fk_forkletd_test(fork-snapshot TIMEOUT 1200)
if(CMOCKA_FOUND)
  fk_unit_test(fork-cli-args-test SOURCES unit/fork-cli-args-test.c LIBS fk_cli)
  fk_unit_test(fork-daemon-test SOURCES unit/fork-daemon-test.c LIBS fk_cli fk_agent)
endif()
fk_forkletd_test(fork-secrets TIMEOUT 1200)
# kill -9 of forkletd mid-checkpoint and mid-fork of 5, then restart (issue 7's recovery).
fk_forkletd_test(agent-crash TIMEOUT 900)
# Live checkpoints (Writing -> Ready, a fork that waits, kill -9 mid-write, the stop-and-copy
# fallback) and rollback without a RAM copy.
fk_forkletd_test(fork-live TIMEOUT 1200)
# vmm_checkpoint_live against real QEMU: copies of a guest rewriting memory must run on.
add_executable(vmm-live-test integration/vmm-live-test.c)
target_link_libraries(vmm-live-test PRIVATE fork-harness)
fk_integration_test(vmm-live COMMAND vmm-live-test TIMEOUT 900)
