# SPDX-License-Identifier: MIT
# manifest: golden pass/fail cases (with round trips) and unit tests; no root needed.
if(CMOCKA_FOUND)
  fk_unit_test(manifest-cases SOURCES unit/manifest-cases.c LIBS fk_manifest)
  fk_unit_test(manifest-unit SOURCES unit/manifest-unit.c unit/manifest-test-util.c LIBS fk_manifest)
  fk_unit_test(manifest-node SOURCES unit/manifest-node.c unit/manifest-test-util.c LIBS fk_manifest)
  fk_unit_test(manifest-locate-test SOURCES unit/manifest-locate-test.c LIBS fk_manifest)
  fk_unit_test(manifest-oci-test SOURCES unit/manifest-oci-test.c unit/manifest-test-util.c LIBS fk_manifest)
endif()
