/* SPDX-License-Identifier: MIT */
/* .../sessions/NAME/portforward?port=P: GET checks that P may be reached (Running, listed in
 * spec.ports); POST with "Upgrade: forklet-portforward" connects to the guest port from inside
 * the session netns and, once connected, switches the API connection to a raw byte relay
 * (101 Switching Protocols). One API connection per forwarded TCP connection. */
#include "agent/api/api-internal.h"
#include "common/log.h"
#include "common/util.h"

#include <errno.h>
#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define PORTFORWARD_PROTOCOL "forklet-portforward"

struct fwd_job {
        struct agent_daemon *d;
        char key[2 * API_PATH_SEGMENT_MAX + 2];
        int guest_fd; /* owned */
        int api_fd;   /* MHD's, closed through urh */
        struct MHD_UpgradeResponseHandle *urh;
        char *extra; /* bytes the client sent after the request, owned */
        size_t extra_size;
};

static void *relay_thread(void *userdata)
{
        struct fwd_job *j = userdata;
        struct agent_daemon *d;
        struct agent_fwd *f = NULL;
        int r = 0;

        if (j->extra_size)
                r = fk_write_all(j->guest_fd, j->extra, j->extra_size);
        if (r >= 0)
                r = agent_fwd_register(j->d, j->key, j->api_fd, j->guest_fd, &f);
        if (r >= 0)
                r = fk_relay(j->api_fd, j->guest_fd);
        if (f)
                agent_fwd_unregister(j->d, f);
        if (r < 0)
                log_debug("port-forward %s: relay ended: %s", j->key, strerror(-r));
        close(j->guest_fd);
        MHD_upgrade_action(j->urh, MHD_UPGRADE_ACTION_CLOSE);
        d = j->d;
        free(j->extra);
        free(j);
        agent_fwd_thread_end(d);
        return NULL;
}

static void on_upgrade(void *cls, struct MHD_Connection *c, void *con_cls, const char *extra_in,
                       size_t extra_in_size, MHD_socket sock, struct MHD_UpgradeResponseHandle *urh)
{
        struct fwd_job *j = cls;
        pthread_attr_t attr;
        pthread_t t;

        (void)c;
        (void)con_cls;
        j->api_fd = sock;
        j->urh = urh;
        if (extra_in_size && (j->extra = malloc(extra_in_size))) {
                memcpy(j->extra, extra_in, extra_in_size);
                j->extra_size = extra_in_size;
        }
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        agent_fwd_thread_begin(j->d);
        if (pthread_create(&t, &attr, relay_thread, j) != 0) {
                agent_fwd_thread_end(j->d);
                close(j->guest_fd);
                MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
                free(j->extra);
                free(j);
        }
        pthread_attr_destroy(&attr);
}

static int parse_port(struct MHD_Connection *c, uint16_t *ret)
{
        const char *v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "port");
        unsigned long p;
        char *end;

        if (!v || !*v)
                return -EINVAL;
        errno = 0;
        p = strtoul(v, &end, 10);
        if (errno || *end || p == 0 || p > 65535)
                return -EINVAL;
        *ret = (uint16_t)p;
        return 0;
}

static int reply_errno(struct MHD_Connection *c, int r, const struct fk_error *err)
{
        const char *reason = NULL;
        unsigned status;

        if (r == -EPERM) {
                status = MHD_HTTP_FORBIDDEN;
                reason = "PortNotAllowed";
        } else if (r == -ECONNREFUSED || r == -ETIMEDOUT || r == -EHOSTUNREACH) {
                status = MHD_HTTP_BAD_GATEWAY;
                reason = "GuestUnreachable";
        } else
                status = api_status_from_errno(r, &reason);
        return api_reply_error(c, status, reason, NULL, "%s",
                               err->msg[0] ? err->msg : strerror(-r));
}

int api_handle_portforward(struct MHD_Connection *c, struct api_request *req)
{
        const char *up = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Upgrade");
        struct fk_error err = {0};
        struct MHD_Response *resp;
        struct fwd_job *j;
        uint16_t port = 0;
        int fd, ret;

        if (parse_port(c, &port) < 0)
                return api_reply_error(c, MHD_HTTP_BAD_REQUEST, "BadRequest", NULL,
                                       "want ?port=1..65535");
        if (strcmp(req->method, "GET") == 0) {
                fd = agent_daemon_port_connect_check(req->d, req->route.ns, req->route.name, port,
                                                     &err);
                if (fd < 0)
                        return reply_errno(c, fd, &err);
                return api_reply_json(c, MHD_HTTP_OK,
                                      json_pack("{s:s, s:i, s:s}", "kind", "PortForward", "port",
                                                (int)port, "guestIP", "10.0.2.15"),
                                      NULL);
        }
        if (strcmp(req->method, "POST") != 0)
                return api_reply_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "MethodNotAllowed", NULL,
                                       "use GET (check) or POST with Upgrade");
        if (!up || strcasecmp(up, PORTFORWARD_PROTOCOL) != 0)
                return api_reply_error(c, MHD_HTTP_BAD_REQUEST, "BadRequest", NULL,
                                       "POST needs \"Upgrade: " PORTFORWARD_PROTOCOL "\"");
        fd = agent_daemon_port_connect(req->d, req->route.ns, req->route.name, port, &err);
        if (fd < 0)
                return reply_errno(c, fd, &err);
        j = calloc(1, sizeof(*j));
        resp = j ? MHD_create_response_for_upgrade(on_upgrade, j) : NULL;
        if (!resp) {
                free(j);
                close(fd);
                return api_reply_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "InternalError", NULL,
                                       "out of memory");
        }
        j->d = req->d;
        j->guest_fd = fd;
        snprintf(j->key, sizeof(j->key), "%s.%s", req->route.ns, req->route.name);
        MHD_add_response_header(resp, MHD_HTTP_HEADER_UPGRADE, PORTFORWARD_PROTOCOL);
        ret = MHD_queue_response(c, MHD_HTTP_SWITCHING_PROTOCOLS, resp);
        MHD_destroy_response(resp);
        if (ret != MHD_YES) { /* the upgrade handler will not run */
                close(fd);
                free(j);
        }
        return ret;
}
