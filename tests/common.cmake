# SPDX-License-Identifier: MIT
# common: the small shared helpers: base64, SHA-256, host id, socket relay, files (no root).
if(CMOCKA_FOUND)
  fk_unit_test(common-test SOURCES unit/common-test.c LIBS fk_common)
  fk_unit_test(common-util-test SOURCES unit/common-util-test.c LIBS fk_common)
endif()
