/* SPDX-License-Identifier: MIT */
/* The EBUSY race of parallel boots: a tap created in a threaded process while other threads
 * fork children (QEMU spawns in their pre-exec hooks) must be attachable by its own QEMU at
 * once. A tun fd opened in the process is inherited by a child forked meanwhile and keeps the
 * tap attached until that child execs or exits, so TUNSETIFF from the tap's owner fails with
 * EBUSY; net_tap_create_here keeps the fd in a child of its own. The control loop creates taps
 * the old way (in-process) and shows the race is there on this host. Root; own netns. */
#include "net/net-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ROUNDS   300
#define SPAWNERS 3

static atomic_bool stop;

/* A child that lives 5 ms holding whatever fds it inherited, as QEMU's child does during
 * its pre-exec hooks (cgroup join, mounts). */
static void *spawner(void *arg)
{
        (void)arg;
        while (!atomic_load(&stop)) {
                pid_t pid = fork();

                if (pid == 0) {
                        struct timespec ts = {0, 5 * 1000 * 1000};

                        nanosleep(&ts, NULL);
                        _exit(0);
                }
                if (pid > 0)
                        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                                ;
        }
        return NULL;
}

/* The old way: the tun fd lives in this process for the ioctls. */
static int create_in_process(const char *name)
{
        struct ifreq ifr = {0};
        int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC), r = 0;

        if (fd < 0)
                return -errno;
        ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
        snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
        if (ioctl(fd, TUNSETIFF, &ifr) < 0 || ioctl(fd, TUNSETPERSIST, 1UL) < 0)
                r = -errno;
        close(fd);
        return r;
}

/* What the jail's give_tap does next; then the tap goes (not persistent, fd closed). */
static int attach_and_remove(const char *name)
{
        struct ifreq ifr = {0};
        int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC), r = 0;

        if (fd < 0)
                return -errno;
        ifr.ifr_flags = IFF_TAP | IFF_NO_PI;
        snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
        if (ioctl(fd, TUNSETIFF, &ifr) < 0)
                r = -errno;
        /* on EBUSY the tap stays attached elsewhere: wait for that child, then remove it */
        for (int i = 0; r == -EBUSY && i < 200; i++) {
                struct timespec ts = {0, 2 * 1000 * 1000};

                nanosleep(&ts, NULL);
                if (ioctl(fd, TUNSETIFF, &ifr) == 0) {
                        (void)ioctl(fd, TUNSETPERSIST, 0UL);
                        close(fd);
                        return -EBUSY;
                }
        }
        if (r == 0)
                (void)ioctl(fd, TUNSETPERSIST, 0UL);
        close(fd);
        return r;
}

/* EBUSY count over ROUNDS taps made by create, or -errno on another failure. */
static int rounds(int (*create)(const char *name), const char *tag)
{
        int busy = 0;

        for (int i = 0; i < ROUNDS; i++) {
                char name[IFNAMSIZ];
                int r;

                snprintf(name, sizeof(name), "%s%d", tag, i);
                r = create(name);
                if (r < 0) {
                        fprintf(stderr, "create %s: %s\n", name, strerror(-r));
                        return r;
                }
                r = attach_and_remove(name);
                if (r == -EBUSY)
                        busy++;
                else if (r < 0) {
                        fprintf(stderr, "attach %s: %s\n", name, strerror(-r));
                        return r;
                }
        }
        return busy;
}

int main(void)
{
        pthread_t t[SPAWNERS];
        int control, fixed;

        if (geteuid() != 0 || access("/dev/net/tun", R_OK | W_OK) < 0) {
                fprintf(stderr, "SKIP: needs root and /dev/net/tun\n");
                return 77;
        }
        /* before any thread: they all live in this private netns, gone with the process */
        if (unshare(CLONE_NEWNET) < 0) {
                perror("unshare(CLONE_NEWNET)");
                return 1;
        }
        for (int i = 0; i < SPAWNERS; i++)
                if (pthread_create(&t[i], NULL, spawner, NULL) != 0)
                        return perror("pthread_create"), 1;
        control = rounds(create_in_process, "old");
        fixed = control < 0 ? control : rounds(net_tap_create_here, "new");
        atomic_store(&stop, true);
        for (int i = 0; i < SPAWNERS; i++)
                pthread_join(t[i], NULL);
        if (control < 0 || fixed < 0)
                return 1;
        printf("taps created in-process: %d of %d attaches got EBUSY (the race); "
               "by net_tap_create_here: %d of %d\n",
               control, ROUNDS, fixed, ROUNDS);
        if (fixed != 0) {
                fprintf(stderr, "FAIL: a tap made by net_tap_create_here was busy\n");
                return 1;
        }
        return 0;
}
