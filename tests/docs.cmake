# SPDX-License-Identifier: MIT
# docs: the man pages format without a groff warning (skipped, 77, without groff), and README.md
# and docs/ keep their shape (the two commands first, at most 150 lines, links and anchors that
# resolve, man pages at the project version). No root, no build artefacts needed.
add_test(NAME docs-man
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/docs/man-lint.sh
                 ${CMAKE_SOURCE_DIR}/docs/man/forklet.1 ${CMAKE_SOURCE_DIR}/docs/man/forkletd.8
                 ${CMAKE_SOURCE_DIR}/docs/man/forklet-session.5)
set_tests_properties(docs-man PROPERTIES LABELS unit SKIP_RETURN_CODE 77)
add_test(NAME docs-check
         COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/docs/check-docs.sh ${CMAKE_SOURCE_DIR}
                 ${PROJECT_VERSION})
set_tests_properties(docs-check PROPERTIES LABELS unit)
# cmake --install into a temporary prefix (removed after): binaries, unit, man pages, docs.
add_test(NAME docs-install COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/docs/install-check.sh
                                   ${CMAKE_BINARY_DIR})
set_tests_properties(docs-install PROPERTIES LABELS unit SKIP_RETURN_CODE 77)
