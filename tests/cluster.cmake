# SPDX-License-Identifier: MIT
# cluster mode: unit tests of the key layout, node status and placement (no etcd); integration
# tests with a real etcd: two schedulers racing over fake nodes (no VMs), a placement the
# node's admission refuses handed back to the scheduler (no VMs), and three forkletd
# with real QEMU sessions placed by forklet-scheduler.
if(CMOCKA_FOUND)
  fk_unit_test(cluster-unit SOURCES unit/cluster-unit.c LIBS fk_sched)
  fk_unit_test(cluster-capacity-test SOURCES unit/cluster-capacity-test.c LIBS fk_sched)
  fk_unit_test(cluster-daemon-test SOURCES unit/cluster-daemon-test.c LIBS fk_cli fk_sched fk_cluster)
endif()

fk_integration_test(cluster-sched-race
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/cluster-sched-race.sh
          $<TARGET_FILE:forklet> $<TARGET_FILE:forklet-scheduler>
  TIMEOUT 300)

fk_forkletd_test(cluster-vms TIMEOUT 1200 ARGS $<TARGET_FILE:forklet-scheduler>)

fk_forkletd_test(cluster-release TIMEOUT 300 ARGS $<TARGET_FILE:forklet-scheduler>)
