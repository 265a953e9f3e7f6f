# SPDX-License-Identifier: MIT
# Host-side sources of the guest agent channel, added to fk_vmm.
