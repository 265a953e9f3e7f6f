# SPDX-License-Identifier: MIT
# agent (forkletd + forklet): unit tests without root (planner table, CLI arguments, the REST
# API over a real unix socket with a fake VM backend); integration tests with real QEMU.
if(CMOCKA_FOUND)
  fk_unit_test(agent-plan-test SOURCES unit/agent-plan-test.c LIBS fk_agent)
  fk_unit_test(agent-events-test SOURCES unit/agent-events-test.c LIBS fk_agent)
  fk_unit_test(agent-cli-args-test SOURCES unit/agent-cli-args-test.c LIBS fk_cli)
  fk_unit_test(agent-api-test SOURCES unit/agent-api-test.c LIBS fk_cli fk_agent)
  fk_unit_test(agent-daemon-test SOURCES unit/agent-daemon-test.c LIBS fk_cli fk_agent)
  fk_unit_test(agent-ops-test SOURCES unit/agent-ops-test.c LIBS fk_agent)
  fk_unit_test(agent-ops-api-test SOURCES unit/agent-ops-api-test.c LIBS fk_cli fk_agent)
  fk_unit_test(agent-admission-test SOURCES unit/agent-admission-test.c LIBS fk_cli fk_agent)
  fk_unit_test(agent-capacity-test SOURCES unit/agent-capacity-test.c LIBS fk_agent)
  fk_unit_test(agent-lifecycle-test SOURCES unit/agent-lifecycle-test.c LIBS fk_cli fk_agent)
  fk_unit_test(agent-net-test SOURCES unit/agent-net-test.c LIBS fk_cli fk_agent)
  fk_unit_test(agent-secrets-test SOURCES unit/agent-secrets-test.c LIBS fk_agent)
  fk_unit_test(agent-privileges-test SOURCES unit/agent-privileges-test.c LIBS fk_agent)
endif()

fk_integration_test(agent-hello
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/agent-hello.sh
          $<TARGET_FILE:forkletd> $<TARGET_FILE:forklet>
  TIMEOUT 600)

fk_integration_test(agent-ops
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/agent-ops.sh
          $<TARGET_FILE:forkletd> $<TARGET_FILE:forklet>
  TIMEOUT 1200)

fk_integration_test(agent-lifecycle
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/agent-lifecycle.sh
          $<TARGET_FILE:forkletd> $<TARGET_FILE:forklet>
  TIMEOUT 900)

# Skips (77) unless scripts/build-image-debian.sh built build/images/debian (never in CI).
fk_integration_test(agent-debian
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/agent-debian.sh
          $<TARGET_FILE:forkletd> $<TARGET_FILE:forklet>
  TIMEOUT 600)

fk_integration_test(agent-resources
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/agent-resources.sh
          $<TARGET_FILE:forkletd> $<TARGET_FILE:forklet>
  TIMEOUT 900)
fk_integration_test(jail
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/jail.sh
          $<TARGET_FILE:forkletd> $<TARGET_FILE:forklet>
  TIMEOUT 1200)
fk_integration_test(agent-privileges
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/agent-privileges.sh
          $<TARGET_FILE:forkletd> $<TARGET_FILE:forklet>
  TIMEOUT 1200)
fk_integration_test(jail-kvm
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/jail-kvm.sh
          $<TARGET_FILE:forkletd> $<TARGET_FILE:forklet>
  TIMEOUT 600)
# A compromised guest (raw frames through the guest's /run/forklet/inject) cannot make forkletd
# touch a path outside the session's directories, log forged lines or grow without bound.
add_executable(hostile-frames integration/hostile-frames.c)
target_link_libraries(hostile-frames PRIVATE fk_vmm)
fk_integration_test(agent-hostile
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/agent-hostile.sh
          $<TARGET_FILE:forkletd> $<TARGET_FILE:forklet> $<TARGET_FILE:hostile-frames>
  TIMEOUT 1200)
