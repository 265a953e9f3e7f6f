# SPDX-License-Identifier: MIT
# core/ on its own (no daemon): the audit hash chain. The planner, capacity and cluster key
# tests (agent-plan-test, agent-capacity-test, cluster-unit) link only fk_core / fk_sched too.
if(CMOCKA_FOUND)
  fk_unit_test(core-audit-test SOURCES unit/core-audit-test.c LIBS fk_core)
endif()
