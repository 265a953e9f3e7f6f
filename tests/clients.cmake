# SPDX-License-Identifier: MIT
# Clients of forkletd's API: `forklet tree` (unit), YAML apply (unit, fake VM backend), the
# Python client in clients/python (unit: a fake server on a unix socket; integration: a real
# forkletd and microVM, over the socket and the TLS listener).
if(CMOCKA_FOUND)
  fk_unit_test(cli-tree-test SOURCES unit/cli-tree-test.c LIBS fk_cli)
  fk_unit_test(agent-api-yaml-test SOURCES unit/agent-api-yaml-test.c LIBS fk_cli fk_agent)
endif()
