# SPDX-License-Identifier: MIT
# etcd client: unit tests of the pure codec, JSON and stream layers (no etcd), and an integration
# test that starts its own etcd (etcd-server package) on free loopback ports (skips with 77 if
# the etcd binary is missing; root not needed).
if(CMOCKA_FOUND)
  foreach(t codec json stream)
    fk_unit_test(etcd-${t} SOURCES ${CMAKE_CURRENT_LIST_DIR}/unit/etcd-${t}.c LIBS fk_etcd)
  endforeach()

  add_executable(etcd-integration ${CMAKE_CURRENT_LIST_DIR}/integration/etcd-real.c
                 ${CMAKE_CURRENT_LIST_DIR}/integration/etcd-server.c
                 ${CMAKE_CURRENT_LIST_DIR}/integration/etcd-proxy.c)
  target_link_libraries(etcd-integration PRIVATE fk_etcd PkgConfig::CMOCKA)
  fk_integration_test(etcd-real COMMAND etcd-integration TIMEOUT 240)
endif()
