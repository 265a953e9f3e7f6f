#!/bin/bash
# SPDX-License-Identifier: MIT
# The harness's old name, for tests written before the move to tests/<module>/ (a branch merged
# later): sourcing it makes the node at once, as it did. New tests source tests/lib/harness.sh
# and call fk_setup. Remove this file when no test sources it.
. "$(dirname "${BASH_SOURCE[0]}")/../lib/harness.sh"
fk_setup
