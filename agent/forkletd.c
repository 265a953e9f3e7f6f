/* SPDX-License-Identifier: MIT */
/* forkletd: parses arguments, loads the node config, wires the daemon, the API server and the
 * signal handling together. VMs keep running across a forkletd restart (they are adopted). */
#include "agent/api/api.h"
#include "agent/daemon/daemon.h"
#include "agent/net/net.h"
#include "agent/runfs/runfs.h"
#include "agent/vm/vm.h"
#include "agent/jail/jail.h"
#include "agent/obs/obs.h"
#include "agent/cluster/cluster.h"
#include "cgroups/cgroups.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"
#include "manifest/manifest.h"
#include "vmm/vmm.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <unistd.h>

struct args {
        const char *config;
        enum log_level level;
        bool remove_networks;
        bool decommission; /* remove_networks too */
};

static void usage(FILE *f)
{
        fprintf(f,
                "Usage: forkletd [--config FILE] [--log-level LEVEL]\n"
                "\n"
                "Reconciles Session manifests into QEMU microVMs and serves the REST API.\n"
                "  -c, --config FILE      node config (default: built-in, manifest dir\n"
                "                         /etc/forklet/sessions, socket /run/forklet/api.sock)\n"
                "  -l, --log-level LEVEL  error|warning|notice|info|debug (default info)\n"
                "      --remove-networks  remove every session network of this node (netns,\n"
                "                         veths, NAT tables, leases) and exit; for "
                "decommissioning\n"
                "                         a node or cleaning up after tests, with its VMs gone\n"
                "      --decommission     --remove-networks, take back every file grant the\n"
                "                         QEMU jail gave this node's sessions, unmount\n"
                "                         forkletd's guest RAM tmpfs and remove the node's\n"
                "                         (empty) cgroups, then exit\n"
                "  -h, --help             this text\n"
                "      --version          print the version\n"
                "Exit status: 0 after SIGTERM/SIGINT, 1 on a startup error, 2 on usage errors.\n");
}

static int parse_args(int argc, char **argv, struct args *a)
{
        static const struct option opts[] = {
                {"config", required_argument, NULL, 'c'},
                {"log-level", required_argument, NULL, 'l'},
                {"help", no_argument, NULL, 'h'},
                {"version", no_argument, NULL, 'V'},
                {"remove-networks", no_argument, NULL, 'R'},
                {"decommission", no_argument, NULL, 'D'},
                {},
        };
        int c;

        a->level = LOG_LEVEL_INFO;
        while ((c = getopt_long(argc, argv, "c:l:h", opts, NULL)) != -1) {
                switch (c) {
                case 'c':
                        a->config = optarg;
                        break;
                case 'l':
                        if (log_level_from_string(optarg, &a->level) < 0) {
                                fprintf(stderr, "forkletd: --log-level: unknown level \"%s\"\n",
                                        optarg);
                                return 2;
                        }
                        break;
                case 'h':
                        usage(stdout);
                        return 0;
                case 'V':
                        printf("forkletd %s\n", FORKLET_VERSION);
                        return 0;
                case 'D':
                        a->decommission = true;
                        __attribute__((fallthrough));
                case 'R':
                        a->remove_networks = true;
                        break;
                default:
                        usage(stderr);
                        return 2;
                }
        }
        if (optind < argc) {
                fprintf(stderr, "forkletd: unexpected argument \"%s\"\n", argv[optind]);
                return 2;
        }
        return -1;
}

static int load_config(const char *path, struct node_config **ret)
{
        struct manifest_diag diag = {0};
        int r;

        r = path ? node_config_load_file(path, ret, &diag) : node_config_default(ret);
        for (size_t i = 0; i < diag.n; i++)
                log_error("%s", diag.messages[i]);
        if (r < 0 && diag.n == 0)
                log_error_errno(r, "load node config %s: %m", path ? path : "(default)");
        manifest_diag_done(&diag);
        return r;
}

/* One cgroup per session under cgroupParent at the hierarchy root (a delegated subtree on
 * systemd hosts). Without it (not root, no controllers) sessions run uncontrolled. */
static struct cg_manager *open_cgroups(const struct node_config *cfg)
{
        struct cg_options o = {.parent = cfg->cgroup_parent};
        struct cg_manager *m = NULL;
        struct fk_error err = {0};
        int r;

        r = cg_manager_new(&o, &m, &err);
        if (r < 0) {
                log_warning("cgroups: %s; sessions run without resource limits", err.msg);
                return NULL;
        }
        log_info("cgroups %s: sessions under %s", cg_version_to_string(cg_manager_version(m)),
                 cg_manager_parent_path(m));
        return m;
}

/* Before any thread starts: capabilities are per thread. */
static int drop_privileges(const struct node_config *cfg)
{
        struct fk_error err = {0};
        uint64_t kept = 0;
        char names[512];
        int r;

        if (!cfg->drop_capabilities) {
                log_notice("capabilities: all kept (hardening.dropCapabilities: false)");
                return 0;
        }
        r = agent_privileges_drop(agent_privileges_keep_mask(), &kept, &err);
        if (r < 0)
                return log_error_errno(r,
                                       "drop capabilities: %s (hardening.dropCapabilities: "
                                       "false runs with all of them)",
                                       err.msg);
        if (agent_privileges_names(kept, names, sizeof(names)) < 0)
                snprintf(names, sizeof(names), "0x%" PRIx64, kept);
        log_info("capabilities: kept %s; every other one dropped (bounding set included)",
                 kept ? names : "none (not privileged)");
        return 0;
}

static int serve(const struct node_config *cfg, enum vmm_accel accel, sigset_t *mask)
{
        struct cg_manager *cg = NULL;
        struct agent_daemon *d = NULL;
        struct api_server *api = NULL;
        struct cluster_agent *cluster = NULL;
        struct fk_error err = {0};
        int r, sig = 0;

        cg = open_cgroups(cfg);
        agent_cgroups_thaw_for_adoption(cg, cfg);
        r = agent_daemon_new(cfg, accel, &agent_vm_ops_qemu, &agent_clock_system, &d);
        if (r < 0) {
                cg_manager_free(cg);
                return r;
        }
        agent_daemon_set_cgroups(d, cg);
        agent_daemon_set_net(d, &agent_net_ops_real);
        r = api_server_start(d, cfg, cfg->api_socket, &api, &err);
        if (r < 0) {
                log_error_errno(r, "API: %s", err.msg);
                agent_daemon_free(d);
                cg_manager_free(cg);
                return r;
        }
        /* Cluster mode (agent/cluster/cluster.h): register with etcd and sync assigned sessions.
         * Standalone (controlPlane.etcd empty) skips this entirely. */
        if (cfg->etcd && cfg->etcd[0])
                r = cluster_agent_start(d, cfg, NULL, &cluster);
        if (r >= 0)
                r = agent_daemon_start(d);
        if (r >= 0) {
                log_info("serving the API on %s%s%s%s", cfg->api_socket,
                         cfg->api_listen ? " and " : "", cfg->api_listen ? cfg->api_listen : "",
                         cfg->api_listen && cfg->api_tls_cert ? " (TLS)" : "");
                if (agent_sd_notify("READY=1\nSTATUS=serving the API") < 0)
                        log_warning("cannot notify systemd on $NOTIFY_SOCKET");
                (void)sigwait(mask, &sig);
                log_info("received %s, shutting down (VMs keep running)", strsignal(sig));
                (void)agent_sd_notify("STOPPING=1");
        }
        cluster_agent_stop(cluster);
        /* Before the API stops: it ends API threads waiting for a phase (?wait=). */
        agent_daemon_shutdown(d);
        api_server_stop(api);
        agent_daemon_free(d);
        cg_manager_free(cg);
        return r;
}

/* One forkletd per node. A second one on the same stateDir would adopt the first's VMs
 * before it finds the API socket taken, and fail to while the first holds their QMP
 * connections: it would kill them as unadoptable and mark their sessions Failed (seen when a
 * restart overlapped the old process's shutdown). So stateDir/forkletd.lock is taken first,
 * and held (flock, released when the process ends however it ends); it holds the holder's
 * pid for the message. Returns the fd, or -errno after logging why. */
static int lock_node(const struct node_config *cfg)
{
        cleanup_free char *path = NULL;
        char pid[24] = "";
        ssize_t n;
        int fd, r;

        if ((r = fk_mkdir_p(cfg->state_dir, 0700)) < 0)
                return log_error_errno(r, "stateDir %s: %m", cfg->state_dir);
        if (fk_asprintf(&path, "%s/forkletd.lock", cfg->state_dir) < 0)
                return log_error_errno(-ENOMEM, "out of memory");
        fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return log_error_errno(-errno, "open %s: %m", path);
        if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
                r = -errno;
                n = pread(fd, pid, sizeof(pid) - 1, 0);
                pid[n > 0 ? strcspn(pid, "\n") : 0] = '\0';
                close(fd);
                if (r != -EWOULDBLOCK)
                        return log_error_errno(r, "lock %s: %m", path);
                return log_error_errno(-EBUSY,
                                       "another forkletd%s%s runs on stateDir %s (it holds %s): "
                                       "stop it first; a forkletd started after it adopts its "
                                       "VMs",
                                       pid[0] ? " pid " : "", pid, cfg->state_dir, path);
        }
        snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
        if (ftruncate(fd, 0) < 0 || pwrite(fd, pid, strlen(pid), 0) < 0)
                log_warning("%s: cannot record this pid: %m", path);
        return fd;
}

static int run(const struct node_config *cfg, sigset_t *mask)
{
        struct fk_error err = {0};
        enum vmm_accel accel;
        int r;

        r = vmm_accel_resolve(accel_mode_to_string(cfg->accel), &accel, &err);
        if (r < 0)
                return log_error_errno(r, "accelerator: %s", err.msg);
        log_info("node %s: accel %s, state %s, run %s, manifests %s", cfg->node_name,
                 vmm_accel_to_string(accel), cfg->state_dir, cfg->run_dir, cfg->manifest_dir);
        r = agent_runfs_setup(cfg);
        if (r < 0)
                return r;
        r = serve(cfg, accel, mask);
        /* also after a failed start: its tmpfs, unless VMs of an earlier start run on it */
        (void)agent_runfs_release(cfg);
        return r;
}

/* --decommission: the session cgroups left behind (empty once their VMs are gone), then the
 * parent. A cgroup that still holds a process stops it: -EBUSY, named in the log. */
static int remove_cgroups(const struct node_config *cfg)
{
        struct cg_options o = {.parent = cfg->cgroup_parent};
        struct cg_manager *m = NULL;
        struct fk_error err = {0};
        char **names = NULL;
        size_t n = 0;
        int r;

        if (cg_manager_new(&o, &m, &err) < 0) {
                log_info("cgroups: %s; none to remove", err.msg);
                return 0;
        }
        r = cg_list(m, &names, &err);
        for (; r >= 0 && names && names[n]; n++)
                r = cg_destroy(m, names[n], &err);
        if (r >= 0)
                r = cg_manager_remove_parent(m, &err);
        if (r < 0)
                log_error("remove the node's cgroups: %s", err.msg);
        else
                log_info("removed %zu session cgroup(s) and the parent %s", n,
                         cg_manager_parent_path(m));
        fk_strv_free(names);
        cg_manager_free(m);
        return r;
}

/* --remove-networks and --decommission: what a node leaves on the host once its VMs are gone. */
static int remove_node_leftovers(const struct node_config *cfg, bool grants)
{
        struct fk_error err = {0};
        int r, k = 0, m = 0, c = 0;

        r = agent_net_ops_real.cleanup(cfg, NULL, &err);
        if (r < 0)
                log_error("remove session networks: %s", err.msg);
        else
                log_info("removed %d session network(s) of node %s", r, cfg->node_name);
        if (grants) {
                k = agent_jail_forget_all(cfg->state_dir);
                if (k < 0)
                        log_error_errno(k, "take back the jail's file grants: %m");
                else
                        log_info("took back the jail's file grants of %d session(s)", k);
                m = agent_runfs_release(cfg);
                c = remove_cgroups(cfg);
        }
        return r < 0 ? r : k < 0 ? k : m < 0 ? m : c < 0 ? c : 0;
}

int main(int argc, char **argv)
{
        struct node_config *cfg = NULL;
        struct args a = {0};
        sigset_t mask;
        int r, lock;

        r = parse_args(argc, argv, &a);
        if (r >= 0)
                return r;
        log_set_max_level(a.level);
        signal(SIGPIPE, SIG_IGN);
        /* Block before any thread exists so only sigwait() sees them. */
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        pthread_sigmask(SIG_BLOCK, &mask, NULL);
        if (load_config(a.config, &cfg) < 0)
                return 1;
        /* Not dumpable (no core file; no ptrace without CAP_SYS_PTRACE): forkletd holds the
         * sessions' secrets, and its QEMU children change their uid while they still run on
         * its memory (fk_clone_vfork), which is safe only as long as that memory is not
         * dumpable (the kernel marks it so at their setresuid anyway): the jail's uid cannot
         * ptrace into it. Never set back. */
        if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
                log_warning("prctl(PR_SET_DUMPABLE, 0): %m");
        if (drop_privileges(cfg) < 0) {
                node_config_free(cfg);
                return 1;
        }
        /* before anything touches the node's files, runDir's mount or a VM */
        lock = lock_node(cfg);
        if (lock < 0) {
                node_config_free(cfg);
                return 1;
        }
        if (a.remove_networks)
                r = remove_node_leftovers(cfg, a.decommission);
        else
                r = run(cfg, &mask);
        close(lock);
        node_config_free(cfg);
        return r < 0 ? 1 : 0;
}
