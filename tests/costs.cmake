# SPDX-License-Identifier: MIT
# ctest COST of the long tests: their seconds in a serial run on the 2-core CI host (main at
# c7d70cd, TCG; fk_unit_test and fk_integration_test apply them). `ctest -j` starts the most
# costly first, so a long test does not begin last and run alone at the end; a fresh build has
# no CTestCostData.txt of its own yet (later runs in the same build dir use ctest's measured
# times too). A test missing here costs 0 and starts in registration order: add one that takes
# more than ~10 s.
set(FK_COST_net-restart 106)
# measured on merged main (not the c7d70cd serial run): the python image fixture on a fresh
# build (debootstrap), the field experiment, the old-forkletd build of the upgrade test
set(FK_COST_image-debian 120)
set(FK_COST_agent-store-upgrade 100)
set(FK_COST_field-python 45)
set(FK_COST_kube-kubectl 30)
set(FK_COST_cluster-vms 91)
set(FK_COST_agent-health 78)
set(FK_COST_net-forkletd 74)
set(FK_COST_agent-crash 68)
set(FK_COST_fork-disk 66)
set(FK_COST_fork-snapshot 61)
set(FK_COST_agent-hostile 59)
set(FK_COST_fork-agent-single 55)
set(FK_COST_agent-ops 48)
set(FK_COST_agent-lifecycle 47)
set(FK_COST_fork-agent 40)
set(FK_COST_fork-give-back 200)
set(FK_COST_fork-balloon-compat 300)
set(FK_COST_client-python 39)
set(FK_COST_agent-resources 32)
set(FK_COST_agent-hello 31)
set(FK_COST_fork-secrets 27)
set(FK_COST_agent-enospc 27)
set(FK_COST_agent-afterstart 21)
set(FK_COST_guest-image 17)
set(FK_COST_net-session 16)
set(FK_COST_jail 16)
set(FK_COST_guest-tools 15)
set(FK_COST_agent-reads 15)
set(FK_COST_fork-engine 14)
set(FK_COST_mcp-sdk 11)
set(FK_COST_cluster-capacity-test 11)
set(FK_COST_agent-privileges 11)
set(FK_COST_vmm-migrate 10)
set(FK_COST_etcd-real 10)
set(FK_COST_guest-boot 9)
set(FK_COST_vmm-stop 6)
set(FK_COST_cluster-sched-race 6)
set(FK_COST_cluster-release 6)
set(FK_COST_vmm-qemu 5)
