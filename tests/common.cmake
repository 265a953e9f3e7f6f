# SPDX-License-Identifier: MIT
# common: the small shared helpers (no root).
if(CMOCKA_FOUND)
  fk_unit_test(common-util-test SOURCES unit/common-util-test.c LIBS fk_common)
endif()
