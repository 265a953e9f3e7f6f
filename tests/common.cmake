# SPDX-License-Identifier: MIT
# common/: base64, SHA-256, host id and socket relay (no root).
if(CMOCKA_FOUND)
  fk_unit_test(common-test SOURCES unit/common-test.c LIBS fk_common)
endif()
