#!/bin/bash
# SPDX-License-Identifier: MIT
# Old name of tests/lib/inet.sh and check.sh (ok/bad/expect), for tests written before the move
# to tests/<module>/: fork-lib.sh already brought them. Remove when no test sources it.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"
