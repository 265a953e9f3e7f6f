/* SPDX-License-Identifier: MIT */
/* forklet port-forward NAME LOCAL:REMOTE: listens on 127.0.0.1 and ::1 only; every accepted
 * connection opens its own API connection that forkletd upgrades into a relay to the guest port
 * (connected from inside the session netns). Ends when the session stops, fails or is deleted;
 * a rollback or a restart (Starting, Pending, Paused in between) does not end it. */
#include "cli/cli.h"
#include "common/cleanup.h"
#include "common/util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define PF_CHECK_INTERVAL_MS 2000
#define PF_HEADER_MAX        16384
#define PF_WAIT_RUNNING_MS   30000 /* a connection waits this long for a session not Running */
#define PF_RETRY_MS          250

static int parse_port(const char *s, uint16_t *ret)
{
        unsigned long v;
        char *end;

        errno = 0;
        v = strtoul(s, &end, 10);
        if (errno || end == s || *end || v == 0 || v > 65535)
                return -EINVAL;
        *ret = (uint16_t)v;
        return 0;
}

int cli_parse_portforward(int argc, char **argv, struct cli_portforward_args *ret,
                          struct fk_error *err)
{
        char local[8];
        const char *colon;

        if (argc != 3)
                return fk_error_set(err, -EINVAL, "port-forward: want NAME LOCAL:REMOTE");
        colon = strchr(argv[2], ':');
        if (!colon || (size_t)(colon - argv[2]) >= sizeof(local))
                return fk_error_set(err, -EINVAL,
                                    "port-forward: \"%s\": want LOCAL:REMOTE, e.g. 8080:80",
                                    argv[2]);
        snprintf(local, sizeof(local), "%.*s", (int)(colon - argv[2]), argv[2]);
        if (parse_port(local, &ret->local) < 0 || parse_port(colon + 1, &ret->remote) < 0)
                return fk_error_set(err, -EINVAL, "port-forward: \"%s\": ports must be 1..65535",
                                    argv[2]);
        ret->name = argv[1];
        return 0;
}

static int listen_on(int family, uint16_t port)
{
        struct sockaddr_storage ss = {0};
        struct sockaddr_in *v4 = (struct sockaddr_in *)&ss;
        struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&ss;
        cleanup_close int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int one = 1;

        if (fd < 0)
                return -errno;
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (family == AF_INET) {
                v4->sin_family = AF_INET;
                v4->sin_port = htons(port);
                v4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        } else {
                (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
                v6->sin6_family = AF_INET6;
                v6->sin6_port = htons(port);
                v6->sin6_addr = in6addr_loopback;
        }
        if (bind(fd, (struct sockaddr *)&ss, family == AF_INET ? sizeof(*v4) : sizeof(*v6)) < 0 ||
            listen(fd, 64) < 0)
                return -errno;
        return TAKE_FD(fd);
}

struct conn {
        const struct cli *c;
        const char *path; /* API path with ?port= */
        int fd;           /* accepted client, owned */
};

static int api_connect(const char *socket_path)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        cleanup_close int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

        if (fd < 0)
                return -errno;
        if (strlen(socket_path) >= sizeof(sa.sun_path))
                return -ENAMETOOLONG;
        strcpy(sa.sun_path, socket_path);
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
                return -errno;
        return TAKE_FD(fd);
}

/* Sends the upgrade request and reads the reply head. Returns the HTTP status; bytes read past
 * the head go to the client (guest data) or, for an error, are printed as the API's message. */
static int upgrade(struct conn *k, int api, bool quiet_409)
{
        char *req = NULL, head[PF_HEADER_MAX + 1];
        size_t got = 0;
        char *end = NULL;
        int status = 0, r;

        r = fk_asprintf(&req,
                        "POST %s HTTP/1.1\r\nHost: forklet\r\nConnection: Upgrade\r\n"
                        "Upgrade: forklet-portforward\r\nContent-Length: 0\r\n\r\n",
                        k->path);
        if (r < 0)
                return r;
        r = fk_write_all(api, req, strlen(req));
        free(req);
        while (r >= 0 && !end && got < PF_HEADER_MAX) {
                ssize_t n = read(api, head + got, PF_HEADER_MAX - got);

                if (n <= 0)
                        return -ECONNRESET;
                got += (size_t)n;
                head[got] = '\0';
                end = strstr(head, "\r\n\r\n");
        }
        if (r < 0 || !end || sscanf(head, "HTTP/1.%*d %d", &status) != 1)
                return -EPROTO;
        end += 4;
        if (status == 101)
                return fk_write_all(k->fd, end, got - (size_t)(end - head)) < 0 ? -EIO : 101;
        if (status == 409 && quiet_409)
                return status;
        {
                json_t *j = json_loads(end, 0, NULL);
                const char *msg = json_string_value(json_object_get(j, "message"));

                fprintf(stderr, "forklet port-forward: %s\n", msg ? msg : "connection refused");
                json_decref(j);
        }
        return status;
}

static void *conn_thread(void *userdata)
{
        struct conn *k = userdata;
        uint64_t deadline = fk_now_mono_ns() + PF_WAIT_RUNNING_MS * 1000000ull;

        /* A session between two runs (a rollback, a restart, a pause) answers 409 NotRunning:
         * the client's connection waits for it to run again, PF_WAIT_RUNNING_MS at most. */
        for (;;) {
                int api = api_connect(k->c->socket), r;
                bool last = fk_now_mono_ns() >= deadline;

                if (api < 0) {
                        fprintf(stderr, "forklet port-forward: cannot reach forkletd at %s: %s\n",
                                k->c->socket, strerror(-api));
                        break;
                }
                r = upgrade(k, api, !last);
                if (r == 101)
                        (void)fk_relay(k->fd, api);
                close(api);
                if (r != 409 || last)
                        break;
                usleep(PF_RETRY_MS * 1000);
        }
        close(k->fd);
        free(k);
        return NULL;
}

static void accept_one(const struct cli *c, const char *path, int lfd)
{
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        struct conn *k;
        pthread_attr_t attr;
        pthread_t t;

        if (fd < 0)
                return;
        k = malloc(sizeof(*k));
        if (!k) {
                close(fd);
                return;
        }
        *k = (struct conn){.c = c, .path = path, .fd = fd};
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &attr, conn_thread, k) != 0) {
                close(fd);
                free(k);
        }
        pthread_attr_destroy(&attr);
}

enum cli_pf_verdict cli_portforward_verdict(const json_t *session, const char *created, char *why,
                                            size_t size)
{
        const json_t *meta = json_object_get(session, "metadata");
        const char *phase =
                json_string_value(json_object_get(json_object_get(session, "status"), "phase"));
        const char *now = json_string_value(json_object_get(meta, "creationTimestamp"));

        if (!session)
                return snprintf(why, size, "is gone"), CLI_PF_CLOSE;
        if (created && created[0] && now && strcmp(now, created) != 0)
                return snprintf(why, size, "was deleted and created again"), CLI_PF_CLOSE;
        if (json_object_get(meta, "deletionTimestamp"))
                return snprintf(why, size, "is being deleted"), CLI_PF_CLOSE;
        snprintf(why, size, "is %s", phase ? phase : "in no phase");
        if (!phase || strcmp(phase, "Stopped") == 0 || strcmp(phase, "Failed") == 0)
                return CLI_PF_CLOSE;
        return strcmp(phase, "Running") == 0 ? CLI_PF_SERVE : CLI_PF_WAIT;
}

/* One look at the session (every PF_CHECK_INTERVAL_MS while idle). Returns 1 to go on, 0 to
 * close (message printed), <0 on a transport error. *waiting remembers a WAIT already told. */
static int session_look(const struct cli *c, const char *name, char *created, size_t size,
                        bool *waiting)
{
        struct fk_error err = {0};
        enum cli_pf_verdict v;
        json_t *j = NULL;
        char why[96];
        int r;

        r = cli_get_session(c, name, &j, &err);
        if (r < 0 && r != -ENOENT)
                return r;
        v = cli_portforward_verdict(j, created, why, sizeof(why));
        if (!created[0] && j) /* the first look: the session this forward is for */
                snprintf(created, size, "%s",
                         json_string_value(json_object_get(json_object_get(j, "metadata"),
                                                           "creationTimestamp"))
                                 ?: "");
        json_decref(j);
        if (v == CLI_PF_CLOSE) {
                fprintf(stderr, "forklet port-forward: session %s %s; closing\n", name, why);
                return 0;
        }
        if (v == CLI_PF_WAIT && !*waiting)
                fprintf(stderr,
                        "forklet port-forward: session %s %s; connections wait (%d s at most) "
                        "until it runs again\n",
                        name, why, PF_WAIT_RUNNING_MS / 1000);
        else if (v == CLI_PF_SERVE && *waiting)
                fprintf(stderr, "forklet port-forward: session %s is Running again\n", name);
        *waiting = v == CLI_PF_WAIT;
        return 1;
}

/* The pre-flight check: Running and the port listed in spec.ports. */
static int check(const struct cli *c, const char *path)
{
        struct cli_response resp = {0};
        struct fk_error err = {0};
        int r;

        r = cli_request(c, "GET", path, NULL, &resp, &err);
        if (r < 0)
                fprintf(stderr, "forklet port-forward: %s\n", err.msg);
        else if (resp.status != 200) {
                cli_print_api_error("forklet port-forward", &resp);
                r = -EPERM;
        }
        cli_response_done(&resp);
        return r;
}

static int serve(const struct cli *c, const struct cli_portforward_args *a, const char *path,
                 int fd4, int fd6)
{
        unsigned failures = 0;
        char created[64] = "";
        bool waiting = false;

        if (session_look(c, a->name, created, sizeof(created), &waiting) == 0)
                return CLI_EXIT_OK;
        for (;;) {
                struct pollfd p[2] = {{.fd = fd4, .events = POLLIN}, {.fd = fd6, .events = POLLIN}};
                int r = poll(p, 2, PF_CHECK_INTERVAL_MS);

                if (r < 0 && errno != EINTR)
                        return CLI_EXIT_FAILURE;
                for (int i = 0; i < 2; i++)
                        if (p[i].revents & POLLIN)
                                accept_one(c, path, p[i].fd);
                if (r != 0)
                        continue;
                r = session_look(c, a->name, created, sizeof(created), &waiting);
                if (r == 0)
                        return CLI_EXIT_OK;
                failures = r < 0 ? failures + 1 : 0;
                if (failures >= 3) {
                        fprintf(stderr, "forklet port-forward: lost forkletd at %s\n", c->socket);
                        return CLI_EXIT_FAILURE;
                }
        }
}

int cli_portforward(const struct cli *c, int argc, char **argv)
{
        struct cli_portforward_args a = {0};
        struct fk_error err = {0};
        cleanup_free char *path = NULL, *suffix = NULL;
        cleanup_close int fd4 = -1, fd6 = -1;

        if (cli_parse_portforward(argc, argv, &a, &err) < 0) {
                fprintf(stderr, "forklet %s\n", err.msg);
                return CLI_EXIT_USAGE;
        }
        if (c->server) {
                fprintf(stderr,
                        "forklet port-forward: needs the node's API socket; it does not "
                        "run over the TCP listener (%s) yet\n",
                        c->server);
                return CLI_EXIT_FAILURE;
        }
        if (fk_asprintf(&suffix, "/portforward?port=%u", a.remote) < 0 ||
            cli_session_path(c, a.name, suffix, &path) < 0)
                return CLI_EXIT_FAILURE;
        if (check(c, path) < 0)
                return CLI_EXIT_FAILURE;
        fd4 = listen_on(AF_INET, a.local);
        if (fd4 < 0) {
                fprintf(stderr, "forklet port-forward: listen on 127.0.0.1:%u: %s\n", a.local,
                        strerror(-fd4));
                return CLI_EXIT_FAILURE;
        }
        printf("Forwarding from 127.0.0.1:%u -> %s:%u\n", a.local, a.name, a.remote);
        fd6 = listen_on(AF_INET6, a.local);
        if (fd6 >= 0)
                printf("Forwarding from [::1]:%u -> %s:%u\n", a.local, a.name, a.remote);
        else
                fprintf(stderr, "forklet port-forward: [::1]:%u unavailable (%s); IPv4 only\n",
                        a.local, strerror(-fd6));
        fflush(stdout);
        return serve(c, &a, path, fd4, fd6);
}
