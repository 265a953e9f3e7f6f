# SPDX-License-Identifier: MIT
# vmm (accel, argv, process, QMP, stop): unit tests without root, integration tests against a
# real QEMU 7.2 (TCG) booting a busybox initramfs.
if(CMOCKA_FOUND)
  fk_unit_test(vmm-argv-test SOURCES unit/vmm-argv-test.c LIBS fk_vmm)
endif()
if(CMOCKA_FOUND)
  fk_unit_test(vmm-qmp-test SOURCES unit/vmm-qmp-test.c LIBS fk_vmm)
endif()
if(CMOCKA_FOUND)
  fk_unit_test(vmm-accel-test SOURCES unit/vmm-accel-test.c LIBS fk_vmm)
  fk_unit_test(vmm-process-test SOURCES unit/vmm-process-test.c LIBS fk_vmm)
  fk_unit_test(vmm-console-test SOURCES unit/vmm-console-test.c LIBS fk_vmm)
  # sparse copies: copy_file_range, the read/write fallback across filesystems, ENOSPC
  fk_unit_test(vmm-copy-test SOURCES unit/vmm-copy-test.c LIBS fk_vmm)
endif()

# Integration: real QEMU (TCG) booting the kernel from FORKLET_TEST_KERNEL, the guest image or
# /boot, with a busybox initramfs each test builds for itself.
add_library(vmm-it-harness STATIC integration/vmm-harness.c)
target_link_libraries(vmm-it-harness PUBLIC fk_vmm)
add_executable(vmm-qemu-test integration/vmm-qemu-test.c)
target_link_libraries(vmm-qemu-test PRIVATE vmm-it-harness)
fk_integration_test(vmm-qemu COMMAND vmm-qemu-test TIMEOUT 300)
add_executable(vmm-migrate-test integration/vmm-migrate-test.c)
target_link_libraries(vmm-migrate-test PRIVATE vmm-it-harness)
fk_integration_test(vmm-migrate COMMAND vmm-migrate-test TIMEOUT 300)
add_executable(vmm-stop-test integration/vmm-stop-test.c)
target_link_libraries(vmm-stop-test PRIVATE vmm-it-harness)
fk_integration_test(vmm-stop COMMAND vmm-stop-test TIMEOUT 300)
