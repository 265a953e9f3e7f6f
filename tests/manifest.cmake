# SPDX-License-Identifier: MIT
# manifest: golden pass/fail cases and unit tests (no root).
if(CMOCKA_FOUND)
  fk_unit_test(manifest-cases SOURCES unit/manifest-cases.c LIBS fk_manifest)
endif()
if(CMOCKA_FOUND)
  fk_unit_test(manifest-unit SOURCES unit/manifest-unit.c LIBS fk_manifest)
endif()
