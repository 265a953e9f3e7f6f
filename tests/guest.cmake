# SPDX-License-Identifier: MIT
# Guest agent protocol and host client: unit tests (no root) and the real-QEMU boot test.
if(CMOCKA_FOUND)
  fk_unit_test(guest-protocol SOURCES unit/guest-protocol.c LIBS fk_vmm)
  fk_unit_test(guest-client SOURCES unit/guest-client.c unit/guest-fake.c LIBS fk_vmm)
  fk_unit_test(guest-client-hostile SOURCES unit/guest-client-hostile.c unit/guest-fake.c
               LIBS fk_vmm)
  # The real agent binary in its local test mode (--listen), against the real client.
  fk_unit_test(guest-agent-local SOURCES unit/guest-agent-local.c LIBS fk_vmm)
  add_dependencies(guest-agent-local forklet-agent)
  # forklet-tools: parsers, the /proc matcher on a fake tree, then the real binary on the host.
  fk_unit_test(guest-tools-test SOURCES unit/guest-tools-test.c LIBS fk_guest_tools)
  add_dependencies(guest-tools-test forklet-tools)
endif()

add_executable(guest-driver integration/guest-driver.c)
target_link_libraries(guest-driver PRIVATE fk_vmm)
fk_integration_test(guest-boot
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/guest-boot.sh $<TARGET_FILE:guest-driver>
  TIMEOUT 300)
fk_integration_test(guest-image
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/guest-image.sh TIMEOUT 300)
# The default image's tools in a real guest (wget by name through the session resolver, pgrep,
# timeout, nc, ip, tar/gzip, vi): netns fake internet, root.
fk_forkletd_test(guest-tools TIMEOUT 900)
