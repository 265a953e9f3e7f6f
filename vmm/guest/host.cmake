# SPDX-License-Identifier: MIT
# Host-side sources of the guest agent channel, added to fk_vmm.
target_sources(fk_vmm PRIVATE ${CMAKE_CURRENT_LIST_DIR}/protocol.c
                              ${CMAKE_CURRENT_LIST_DIR}/protocol-decode.c
                              ${CMAKE_CURRENT_LIST_DIR}/../agent-client.c
                              ${CMAKE_CURRENT_LIST_DIR}/../agent-calls.c
                              ${CMAKE_CURRENT_LIST_DIR}/../agent-exec.c)
