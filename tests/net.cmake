# SPDX-License-Identifier: MIT
# net: unit tests (pure IPAM and nftables batch builders, no root) and integration tests (root:
# real netns, veth, tap, nftables, inside namespaces the tests create).
add_executable(net-tool ${CMAKE_CURRENT_SOURCE_DIR}/integration/net-tool.c)
target_link_libraries(net-tool PRIVATE fk_net)

fk_unit_test(net-ipam SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/net-ipam.c LIBS fk_net)
fk_unit_test(net-nft SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/net-nft.c LIBS fk_net)
fk_unit_test(net-dns SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/net-dns.c LIBS fk_net)
fk_unit_test(net-restore SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/unit/net-restore.c LIBS fk_net)

fk_integration_test(net-session COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/integration/net-session.sh
                    TIMEOUT 180)

# bench/net.c: rule-apply time for 1, 100, 1000 allow entries (run by hand, as root)
add_executable(bench-net ${CMAKE_SOURCE_DIR}/bench/net.c)
target_link_libraries(bench-net PRIVATE fk_net)

# forkletd + forklet with real QEMU guests behind a fake internet (dnsmasq, TEST-NET hosts)
fk_forkletd_test(net-forkletd TIMEOUT 900)
# bench/net-connect.c: added TCP connect latency per policy shape vs open egress (root)
add_executable(bench-net-connect ${CMAKE_SOURCE_DIR}/bench/net-connect.c)
target_link_libraries(bench-net-connect PRIVATE fk_net)
# learned resolver addresses across forkletd restarts (stop/start and SIGKILL), real QEMU guest
fk_forkletd_test(net-restart TIMEOUT 900)
# the EBUSY race of parallel boots: a tap made while other threads fork is attachable at once
add_executable(net-tap-race ${CMAKE_CURRENT_SOURCE_DIR}/integration/net-tap-race.c)
target_link_libraries(net-tap-race PRIVATE fk_net pthread)
fk_integration_test(net-tap-race COMMAND $<TARGET_FILE:net-tap-race> TIMEOUT 120)
