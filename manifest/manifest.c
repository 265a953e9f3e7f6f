/* SPDX-License-Identifier: MIT */
/* placeholder until the module lands */
typedef int fk_placeholder_manifest;
