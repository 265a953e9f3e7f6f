# SPDX-License-Identifier: MIT
# Clients of forkletd's API: `forklet tree` (unit), YAML apply (unit, fake VM backend), the
# Python client in clients/python (unit: a fake server on a unix socket; integration: a real
# forkletd and microVM, over the socket and the TLS listener).
if(CMOCKA_FOUND)
  fk_unit_test(cli-tree-test SOURCES unit/cli-tree-test.c LIBS fk_cli)
  fk_unit_test(agent-api-yaml-test SOURCES unit/agent-api-yaml-test.c LIBS fk_cli fk_agent)
endif()

# Debian's python3 (scripts/install-deps.sh); the unit test needs no root, only the interpreter.
find_program(FORKLET_PYTHON3 python3 PATHS /usr/bin NO_DEFAULT_PATH)
find_program(FORKLET_PYTHON3 python3)
if(FORKLET_PYTHON3)
  add_test(NAME client-python-unit
           COMMAND ${FORKLET_PYTHON3} -B ${CMAKE_SOURCE_DIR}/clients/python/tests/test_unit.py)
  set_tests_properties(client-python-unit PROPERTIES LABELS unit TIMEOUT 120
                       ENVIRONMENT "PYTHONDONTWRITEBYTECODE=1")
else()
  message(WARNING "python3 not found: client-python-unit not registered (scripts/install-deps.sh)")
endif()
fk_forkletd_test(client-python TIMEOUT 1200)
