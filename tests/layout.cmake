# SPDX-License-Identifier: MIT
# The layout's rules, checked on every unit run: includes point down the folder graph
# (tests/layout/include-deps.sh) and forklet / forklet-scheduler load no daemon library
# (tests/layout/link-deps.sh, ldd and ELF NEEDED; forkletd is the control that must be flagged).
add_test(NAME layout-includes
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/layout/include-deps.sh ${CMAKE_SOURCE_DIR})
add_test(NAME layout-link-deps
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/layout/link-deps.sh $<TARGET_FILE:forkletd>
                 $<TARGET_FILE:forklet> $<TARGET_FILE:forklet-scheduler>)
set_tests_properties(layout-includes layout-link-deps PROPERTIES LABELS unit SKIP_RETURN_CODE 77)
