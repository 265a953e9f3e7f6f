# SPDX-License-Identifier: MIT
# agent (forkletd + forklet): unit tests without root (planner table, CLI arguments, the REST
# API over a real unix socket with a fake VM backend); integration tests with real QEMU.
if(CMOCKA_FOUND)
  fk_unit_test(agent-plan-test SOURCES unit/agent-plan-test.c LIBS fk_core)
  fk_unit_test(agent-events-test SOURCES unit/agent-events-test.c LIBS fk_agent)
  fk_unit_test(agent-health-test SOURCES unit/agent-health-test.c LIBS fk_cli fk_agent)
  fk_unit_test(agent-cli-args-test SOURCES unit/agent-cli-args-test.c LIBS fk_cli)
  fk_unit_test(agent-cli-output-test SOURCES unit/agent-cli-output-test.c LIBS fk_cli)
  fk_unit_test(agent-cli-verbs-test SOURCES unit/agent-cli-verbs-test.c LIBS fk_cli fk_agent)
  fk_unit_test(agent-api-test SOURCES unit/agent-api-test.c LIBS fk_cli fk_agent)
  fk_unit_test(agent-daemon-test SOURCES unit/agent-daemon-test.c LIBS fk_cli fk_agent)
  fk_unit_test(agent-ops-test SOURCES unit/agent-ops-test.c LIBS fk_agent)
  fk_unit_test(agent-ops-api-test SOURCES unit/agent-ops-api-test.c LIBS fk_cli fk_agent)
  fk_unit_test(agent-admission-test SOURCES unit/agent-admission-test.c LIBS fk_cli fk_agent)
  fk_unit_test(agent-capacity-test SOURCES unit/agent-capacity-test.c LIBS fk_core)
  fk_unit_test(agent-lifecycle-test SOURCES unit/agent-lifecycle-test.c LIBS fk_cli fk_agent)
  fk_unit_test(agent-net-test SOURCES unit/agent-net-test.c LIBS fk_cli fk_agent)
  fk_unit_test(agent-secrets-test SOURCES unit/agent-secrets-test.c LIBS fk_agent)
  fk_unit_test(agent-privileges-test SOURCES unit/agent-privileges-test.c LIBS fk_agent)
  fk_unit_test(agent-jail-test SOURCES unit/agent-jail-test.c LIBS fk_agent)
  fk_unit_test(agent-boot-timing-test SOURCES unit/agent-boot-timing-test.c LIBS fk_agent)
  fk_unit_test(agent-runfs-test SOURCES unit/agent-runfs-test.c LIBS fk_agent)
  fk_unit_test(agent-tls-test SOURCES unit/agent-tls-test.c LIBS fk_cluster fk_agent)
  # forklet mcp: JSON-RPC framing and dispatch (fake transport, a pipe), then every tool
  # against the REST server with the fake VM backend
  fk_unit_test(cli-mcp-test SOURCES unit/cli-mcp-test.c LIBS fk_cli)
  fk_unit_test(cli-mcp-tools-test SOURCES unit/cli-mcp-tools-test.c LIBS fk_cli fk_agent)
endif()

fk_forkletd_test(agent-hello TIMEOUT 600)
fk_forkletd_test(agent-ops TIMEOUT 1200)
fk_forkletd_test(agent-lifecycle TIMEOUT 900)
fk_forkletd_test(agent-afterstart TIMEOUT 900)
fk_forkletd_test(agent-reads TIMEOUT 900)
# Skips (77) unless scripts/build-image-debian.sh built build/images/debian (never in CI).
fk_forkletd_test(agent-debian TIMEOUT 600)
fk_forkletd_test(agent-resources TIMEOUT 900)
# runDir and stateDir on tmpfs mounts of their own (cross-filesystem copies), stateDir filled.
fk_forkletd_test(agent-enospc TIMEOUT 900)
# Guests that die or stall: panics (sysrq, pvpanic), OOM, a full disk filesystem, liveness.
fk_forkletd_test(agent-health TIMEOUT 1500)
fk_forkletd_test(jail TIMEOUT 1200)
fk_forkletd_test(agent-privileges TIMEOUT 1200)
fk_forkletd_test(jail-kvm TIMEOUT 600)
# A compromised guest (raw frames through the guest's /run/forklet/inject) cannot make forkletd
# touch a path outside the session's directories, log forged lines or grow without bound.
add_executable(hostile-frames integration/hostile-frames.c)
target_link_libraries(hostile-frames PRIVATE fk_vmm)
fk_forkletd_test(agent-hostile TIMEOUT 1200 ARGS $<TARGET_FILE:hostile-frames>)
# The TLS listener and cross-host routing (netns, TEST-NET-1, openssl certs, etcd; no VMs).
fk_forkletd_test(api-tls TIMEOUT 300)
# forklet mcp with the official MCP TypeScript SDK client (npm, installed into BUILD/npm-mcp;
# skips with 77 when node, npm or the registry is missing) against a real forkletd and VM.
fk_forkletd_test(mcp-sdk TIMEOUT 1200)
