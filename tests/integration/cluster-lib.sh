#!/bin/bash
# SPDX-License-Identifier: MIT
# Old name of tests/lib/etcd.sh, for tests written before the move to tests/<module>/.
# Remove when no test sources it.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"
