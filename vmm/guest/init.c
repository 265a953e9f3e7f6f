/* SPDX-License-Identifier: MIT */
/* PID 1 of the guest: mounts the API filesystems, loads the virtio/ext4 modules in the order
 * the image builder wrote, switches into a root disk when forklet.root=LABEL asks (debian
 * image), sets the hostname, brings up lo, mounts the disk labelled "workspace" (else /dev/vda)
 * on /workspace, then keeps the agent running and reaps every orphan. */
#include "vmm/guest/agent.h"

#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#define AGENT_PATH  "/sbin/forklet-agent"
#define ORDER_FILE  "/lib/modules/forklet.order"
#define BUSYBOX_RUN "/run/forklet-busybox" /* the initramfs' busybox after a root switch */

static const char *busybox = "/bin/busybox";

static void __attribute__((format(printf, 2, 3))) say(int err, const char *fmt, ...)
{
        va_list ap;

        fprintf(stderr, "forklet-init: ");
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        if (err)
                fprintf(stderr, ": %s", strerror(err));
        fputc('\n', stderr);
}

static void do_mount(const char *src, const char *dst, const char *type, unsigned long flags,
                     const char *data)
{
        (void)mkdir(dst, 0755);
        if (mount(src, dst, type, flags, data) < 0 && errno != EBUSY)
                say(errno, "mount %s", dst);
}

static void setup_console(void)
{
        int fd = open("/dev/console", O_RDWR | O_NOCTTY);

        if (fd < 0)
                return;
        for (int i = 0; i < 3; i++)
                dup2(fd, i);
        if (fd > 2)
                close(fd);
}

static void load_modules(void)
{
        struct utsname u;
        char line[512], path[1024];
        FILE *f;

        if (uname(&u) < 0 || !(f = fopen(ORDER_FILE, "re")))
                return say(0, "%s missing, no modules loaded", ORDER_FILE);
        while (fgets(line, sizeof(line), f)) {
                int fd;

                line[strcspn(line, "\n")] = 0;
                if (!line[0])
                        continue;
                snprintf(path, sizeof(path), "/lib/modules/%s/%s", u.release, line);
                fd = open(path, O_RDONLY | O_CLOEXEC);
                /* Optional accelerations (crc32c-intel without SSE4.2 under TCG) fail: fine. */
                if (fd < 0 || (syscall(SYS_finit_module, fd, "", 0) < 0 && errno != EEXIST &&
                               errno != ENODEV))
                        say(errno, "load %s", line);
                if (fd >= 0)
                        close(fd);
        }
        fclose(f);
}

/* Finds key=value on the kernel command line (the host's way to configure the guest). */
static bool cmdline_get(const char *cmdline, const char *key, char *out, size_t size)
{
        size_t klen = strlen(key);

        for (const char *p = cmdline; *p;) {
                size_t len = strcspn(p, " \n");

                if (len > klen && strncmp(p, key, klen) == 0 && p[klen] == '=') {
                        snprintf(out, size, "%.*s", (int)(len - klen - 1), p + klen + 1);
                        return true;
                }
                p += len;
                p += strspn(p, " \n");
        }
        return false;
}

static void set_hostname(const char *cmdline)
{
        char name[65] = "forklet";
        FILE *f = fopen("/etc/hostname", "re");

        if (f) {
                if (fgets(name, sizeof(name), f))
                        name[strcspn(name, "\n")] = 0;
                fclose(f);
        }
        (void)cmdline_get(cmdline, "forklet.hostname", name, sizeof(name));
        if (sethostname(name, strlen(name)) < 0)
                say(errno, "sethostname %s", name);
}

static void loopback_up(void)
{
        struct ifreq ifr = {0};
        int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

        if (fd < 0)
                return say(errno, "%s", "socket");
        snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
        if (ioctl(fd, SIOCGIFFLAGS, &ifr) < 0) {
                say(errno, "%s", "lo flags");
        } else {
                ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
                if (ioctl(fd, SIOCSIFFLAGS, &ifr) < 0)
                        say(errno, "%s", "lo up");
        }
        close(fd);
}

static void mount_workspace(void)
{
        struct stat st;
        char dev[64];
        int r;

        (void)mkdir("/workspace", 0755);
        /* By label first: with a root disk attached, /dev/vda need not be the workspace. */
        if (ga_init_find_label("workspace", dev, sizeof(dev)) == 0) {
                if (mount(dev, "/workspace", "ext4", MS_NOATIME, GA_WORKSPACE_MOUNT_OPTS) < 0)
                        say(errno, "mount %s on /workspace", dev);
                else if ((r = ga_init_hide_upper("/workspace")) < 0)
                        say(-r, "cover /workspace/%s", GA_ROOT_UPPER_DIR);
                return;
        }
        /* virtio_blk probes synchronously on load, but give devtmpfs a moment. */
        for (int i = 0; i < 20 && stat("/sys/class/block/vda", &st) == 0; i++) {
                if (stat("/dev/vda", &st) == 0) {
                        if (mount("/dev/vda", "/workspace", "ext4", MS_NOATIME,
                                  GA_WORKSPACE_MOUNT_OPTS) < 0)
                                say(errno, "mount %s on /workspace", "/dev/vda");
                        return;
                }
                usleep(50 * 1000);
        }
}

/* Runs a busybox applet and waits for it (before the agent starts, nothing else to reap). */
/* Writes text into an existing file (a sysctl). 0 or -1 with errno. */
static int write_text(const char *path, const char *text)
{
        int fd = open(path, O_WRONLY | O_CLOEXEC), r = -1;

        if (fd < 0)
                return -1;
        if (write(fd, text, strlen(text)) == (ssize_t)strlen(text))
                r = 0;
        close(fd);
        return r;
}

static int run(const char *const argv[])
{
        int status;
        pid_t pid = fork();

        if (pid == 0) {
                execv(busybox, (char *const *)argv);
                _exit(127);
        }
        if (pid < 0 || waitpid(pid, &status, 0) != pid)
                return -1;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                say(0, "%s %s %s failed", argv[1], argv[2], argv[3]);
                return -1;
        }
        return 0;
}

/* forklet.ip=ADDR/PREFIX [forklet.gw=ADDR] [forklet.dns=ADDR[,ADDR]]: static eth0 setup
 * (virtio_net is a module, so the kernel's own ip= cannot do it). */
static void setup_network(const char *cmdline)
{
        char ip[64], gw[64] = "", dns[256] = "";
        struct stat st;
        FILE *f;

        if (!cmdline_get(cmdline, "forklet.ip", ip, sizeof(ip)))
                return;
        for (int i = 0; i < 20 && stat("/sys/class/net/eth0", &st) < 0; i++)
                usleep(50 * 1000);
        /* The session's network carries IPv4 only (IPv6 is dropped at its egress), so eth0
         * gets no IPv6: no link-local address, duplicate address detection, router
         * solicitations or multicast listener reports, which the guest would send in its
         * first seconds for nothing, and every fork of a checkpoint taken then again. A
         * program that tries IPv6 fails at once instead of timing out. lo keeps ::1. */
        if (write_text("/proc/sys/net/ipv6/conf/eth0/disable_ipv6", "1") < 0 && errno != ENOENT)
                say(errno, "%s", "disable IPv6 on eth0"); /* ENOENT: a kernel without IPv6 */
        (void)run((const char *const[]){"ip", "link", "set", "eth0", "up", NULL});
        if (run((const char *const[]){"ip", "addr", "add", ip, "dev", "eth0", NULL}) < 0)
                return;
        if (cmdline_get(cmdline, "forklet.gw", gw, sizeof(gw)))
                (void)run((const char *const[]){"ip", "route", "add", "default", "via", gw, NULL});
        if (!cmdline_get(cmdline, "forklet.dns", dns, sizeof(dns)) ||
            !(f = fopen("/etc/resolv.conf", "we")))
                return;
        for (char *save = NULL, *tok = strtok_r(dns, ",", &save); tok;
             tok = strtok_r(NULL, ",", &save))
                fprintf(f, "nameserver %s\n", tok);
        fclose(f);
}

static pid_t spawn_agent(void)
{
        pid_t pid = fork();

        if (pid == 0) {
                sigset_t none;
                char *const argv[] = {(char *)"forklet-agent", NULL};
                char *const envp[] = {(char *)"PATH=/bin:/sbin:/usr/bin:/usr/sbin",
                                      (char *)"HOME=/root", (char *)"TERM=dumb", NULL};

                sigemptyset(&none);
                sigprocmask(SIG_SETMASK, &none, NULL);
                execve(AGENT_PATH, argv, envp);
                _exit(127);
        }
        if (pid < 0)
                say(errno, "%s", "fork agent");
        return pid;
}

/* forklet.root=LABEL: run from that disk (read-only, under an overlay) instead of the initramfs. */
static void switch_root(const char *cmdline)
{
        char label[32];
        int r;

        if (!cmdline_get(cmdline, "forklet.root", label, sizeof(label)))
                return;
        r = ga_init_switch_root(label, BUSYBOX_RUN);
        if (r < 0)
                say(-r, "switch to the root disk labelled %s (staying in the initramfs)", label);
        else
                busybox = BUSYBOX_RUN;
}

static int read_cmdline(char *buf, size_t size)
{
        FILE *f = fopen("/proc/cmdline", "re");
        bool ok;

        if (!f)
                return -errno;
        ok = fgets(buf, (int)size, f) != NULL;
        fclose(f);
        return ok ? 0 : -EIO;
}

int ga_init_main(void)
{
        char cmdline[4096];
        pid_t agent;

        do_mount("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755");
        setup_console();
        do_mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
        do_mount("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
        do_mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "mode=0620,ptmxmode=0666");
        do_mount("tmpfs", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755");
        /* forkletd writes spec.secrets here through the agent (tmpfs: never on a disk) */
        (void)mkdir("/run/forklet", 0755);
        (void)mkdir("/run/forklet/secrets", 0700);
        do_mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777");
        load_modules();
        if (read_cmdline(cmdline, sizeof(cmdline)) < 0)
                cmdline[0] = 0;
        switch_root(cmdline);
        set_hostname(cmdline);
        loopback_up();
        setup_network(cmdline);
        mount_workspace();
        agent = spawn_agent();
        for (;;) {
                int status;
                pid_t pid = wait(&status);

                if (pid < 0 && errno == ECHILD) {
                        sleep(1);
                        agent = spawn_agent();
                        continue;
                }
                if (pid > 0 && pid == agent) {
                        say(0, "%s exited, restarting", "agent");
                        sleep(1); /* no tight loop if it keeps dying */
                        agent = spawn_agent();
                }
        }
}
