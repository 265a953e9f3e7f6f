# SPDX-License-Identifier: MIT
# cgroups: unit tests on fake trees in mkdtemp() (no root), integration tests on the real
# hierarchies (root; skip with 77 when root or the hierarchy is missing).
if(CMOCKA_FOUND)
  add_library(fk_cgroups_fake STATIC ${CMAKE_CURRENT_SOURCE_DIR}/unit/cgroups-fake.c)
  target_link_libraries(fk_cgroups_fake PUBLIC fk_cgroups fk_common PkgConfig::CMOCKA)
  foreach(t parse v1 v2)
    if(EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/unit/cgroups-${t}.c)
      fk_unit_test(cgroups-${t} SOURCES unit/cgroups-${t}.c LIBS fk_cgroups fk_cgroups_fake)
    endif()
  endforeach()

  add_executable(cgroups-integration ${CMAKE_CURRENT_SOURCE_DIR}/integration/cgroups-real.c)
  target_link_libraries(cgroups-integration PRIVATE fk_cgroups PkgConfig::CMOCKA)
  fk_integration_test(cgroups-real COMMAND cgroups-integration TIMEOUT 120)
  # v2 on the host's real cgroup2 mount with whatever controllers it has (77 without one)
  add_executable(cgroups-v2-integration ${CMAKE_CURRENT_SOURCE_DIR}/integration/cgroups-v2-real.c)
  target_link_libraries(cgroups-v2-integration PRIVATE fk_cgroups PkgConfig::CMOCKA)
  fk_integration_test(cgroups-v2-real COMMAND cgroups-v2-integration TIMEOUT 120)
endif()
