/* SPDX-License-Identifier: MIT */
/* forklet-scheduler: parses arguments and runs the scheduler loop until SIGTERM/SIGINT. */
#include "scheduler/sched.h"
#include "common/log.h"
#include "common/util.h"

#include <curl/curl.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f)
{
        fprintf(f, "Usage: forklet-scheduler --etcd URL[,URL...] [--prefix P] [--policy "
                   "spread|pack] [--id NAME] [--log-level LEVEL]\n"
                   "\n"
                   "Places unplaced forklet Sessions on Ready nodes (size class, nodeSelector,\n"
                   "policy) with an etcd compare-and-swap; marks sessions of expired nodes Lost.\n"
                   "  --etcd URLS   etcd endpoints (default $FORKLET_ETCD)\n"
                   "  --prefix P    key prefix (default $FORKLET_ETCD_PREFIX or /forklet)\n"
                   "  --policy P    spread (default): most free memory; pack: fullest that fits\n"
                   "  --id NAME     this instance in logs (default the PID)\n"
                   "Exit status: 0 after SIGTERM/SIGINT (prints placed/raced counts), 1 on an\n"
                   "error, 2 on usage errors.\n");
}

struct args {
        char **endpoints;
        struct sched_options o;
        enum log_level level;
        char id[32];
};

static int split_endpoints(const char *s, char ***ret)
{
        char *copy = strdup(s), *save = NULL;
        int r = copy ? 0 : -1;

        for (char *t = copy ? strtok_r(copy, ",", &save) : NULL; t && r >= 0;
             t = strtok_r(NULL, ",", &save))
                r = fk_strv_push(ret, t);
        free(copy);
        return r;
}

static int parse_args(int argc, char **argv, struct args *a)
{
        static const struct option opts[] = {
                {"etcd", required_argument, NULL, 'e'},
                {"prefix", required_argument, NULL, 'p'},
                {"policy", required_argument, NULL, 'P'},
                {"id", required_argument, NULL, 'i'},
                {"log-level", required_argument, NULL, 'l'},
                {"help", no_argument, NULL, 'h'},
                {},
        };
        const char *etcd = getenv("FORKLET_ETCD"), *prefix = getenv("FORKLET_ETCD_PREFIX");
        int c;

        a->level = LOG_LEVEL_INFO;
        a->o.policy = SCHED_POLICY_SPREAD;
        snprintf(a->id, sizeof(a->id), "%d", (int)getpid());
        a->o.id = a->id;
        while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
                if (c == 'e')
                        etcd = optarg;
                else if (c == 'p')
                        prefix = optarg;
                else if (c == 'i')
                        a->o.id = optarg;
                else if (c == 'P' && sched_policy_from_string(optarg) >= 0)
                        a->o.policy = sched_policy_from_string(optarg);
                else if (c == 'l' && log_level_from_string(optarg, &a->level) >= 0)
                        continue;
                else if (c == 'h') {
                        usage(stdout);
                        return 0;
                } else {
                        usage(stderr);
                        return 2;
                }
        }
        if (optind < argc || !etcd || !*etcd || (prefix && prefix[0] != '/')) {
                fprintf(stderr, "forklet-scheduler: %s\n",
                        optind < argc                ? "unexpected argument"
                        : prefix && prefix[0] != '/' ? "--prefix must start with '/'"
                                                     : "--etcd (or FORKLET_ETCD) is required");
                return 2;
        }
        a->o.prefix = prefix && *prefix ? prefix : "/forklet";
        if (split_endpoints(etcd, &a->endpoints) < 0 || !a->endpoints)
                return 2;
        a->o.endpoints = (const char *const *)a->endpoints;
        return -1;
}

struct thread_args {
        struct args *a;
        volatile bool stop;
        struct sched_stats stats;
        int r;
};

static void *run_thread(void *p)
{
        struct thread_args *t = p;

        t->r = sched_run(&t->a->o, &t->stop, &t->stats);
        kill(getpid(), SIGTERM); /* a setup failure ends the process too */
        return NULL;
}

int main(int argc, char **argv)
{
        struct args a = {0};
        struct thread_args t = {.a = &a};
        pthread_t th;
        sigset_t mask;
        int r, sig;

        r = parse_args(argc, argv, &a);
        if (r >= 0) {
                fk_strv_free(a.endpoints);
                return r;
        }
        log_set_max_level(a.level);
        signal(SIGPIPE, SIG_IGN);
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        pthread_sigmask(SIG_BLOCK, &mask, NULL);
        curl_global_init(CURL_GLOBAL_DEFAULT);
        if (pthread_create(&th, NULL, run_thread, &t) != 0) {
                fk_strv_free(a.endpoints);
                return 1;
        }
        (void)sigwait(&mask, &sig);
        t.stop = true;
        pthread_join(th, NULL);
        printf("scheduler %s: placed %u, lost races %u, marked lost %u\n", a.o.id, t.stats.placed,
               t.stats.lost_races, t.stats.lost);
        fflush(stdout);
        curl_global_cleanup();
        fk_strv_free(a.endpoints);
        return t.r < 0 ? 1 : 0;
}
