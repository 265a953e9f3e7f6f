/* SPDX-License-Identifier: MIT */
/* Reading the resolver sets back from the kernel (GETSET + GETSETELEM dumps) with each
 * element's remaining timeout and its name tag, so a restarted forkletd keeps them. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <libmnl/libmnl.h>
#include <libnftnl/common.h>
#include <libnftnl/set.h>
#include <libnftnl/udata.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>

#include "common/cleanup.h"
#include "common/util.h"
#include "net/net-internal.h"
#include "net/net.h"

#define DUMP_TIMEOUT_MS 5000
#define DUMP_SETS_MAX   256
#define DUMP_ELEMS_MAX  65536 /* far above what a resolver learns (4096 per session) */

DEFINE_CLEANUP_FUNC(struct mnl_socket *, mnl_socket_close)

int net_nft_set_parse_name(const char *name, int *ret_family, uint16_t *ret_port)
{
        unsigned long port = 0;
        char *end;

        if (strncmp(name, "allow", 5) != 0 || (name[5] != '4' && name[5] != '6'))
                return -EINVAL;
        if (name[6] == '_') {
                errno = 0;
                port = strtoul(name + 7, &end, 10);
                if (errno || *end || end == name + 7 || name[7] == '0' || port > 65535)
                        return -EINVAL;
        } else if (name[6] != '\0')
                return -EINVAL;
        *ret_family = name[5] == '4' ? AF_INET : AF_INET6;
        *ret_port = (uint16_t)port;
        return 0;
}

static int comment_cb(const struct nftnl_udata *attr, void *data)
{
        char *name = data;
        uint8_t len = nftnl_udata_len(attr);
        const char *v = nftnl_udata_get(attr);

        if (nftnl_udata_type(attr) != NFTNL_UDATA_SET_ELEM_COMMENT || len == 0 ||
            len > NET_NFT_ELEM_NAME_MAX || v[len - 1] != '\0')
                return MNL_CB_OK; /* not ours: the element stays untagged */
        memcpy(name, v, len);
        return MNL_CB_OK;
}

struct elems_ctx {
        int family;
        uint16_t port;
        struct net_nft_elem **v;
        size_t *n;
        int err;
};

static int elem_cb(struct nftnl_set_elem *el, void *data)
{
        struct elems_ctx *c = data;
        struct net_nft_elem e = {.family = c->family, .port = c->port};
        uint32_t klen = 0, ulen = 0;
        const void *key = nftnl_set_elem_get(el, NFTNL_SET_ELEM_KEY, &klen);
        const void *udata = nftnl_set_elem_get(el, NFTNL_SET_ELEM_USERDATA, &ulen);
        struct net_nft_elem *v;

        if (!key || klen != (c->family == AF_INET ? 4u : 16u))
                return 0;
        if (nftnl_set_elem_is_set(el, NFTNL_SET_ELEM_EXPIRATION))
                e.timeout_ms = nftnl_set_elem_get_u64(el, NFTNL_SET_ELEM_EXPIRATION);
        else if (nftnl_set_elem_is_set(el, NFTNL_SET_ELEM_TIMEOUT))
                e.timeout_ms = nftnl_set_elem_get_u64(el, NFTNL_SET_ELEM_TIMEOUT);
        if (e.timeout_ms == 0 || *c->n >= DUMP_ELEMS_MAX)
                return 0; /* resolver elements always time out */
        memcpy(e.addr, key, klen);
        if (udata && ulen > 0)
                (void)nftnl_udata_parse(udata, ulen, comment_cb, e.name);
        e.name[NET_NFT_ELEM_NAME_MAX - 1] = '\0';
        v = realloc(*c->v, (*c->n + 1) * sizeof(*v));
        if (!v) {
                c->err = -ENOMEM;
                return -1;
        }
        v[(*c->n)++] = e;
        *c->v = v;
        return 0;
}

int net_nft_elems_from_msg(const struct nlmsghdr *nlh, struct net_nft_elem **v, size_t *n)
{
        struct nftnl_set *s = nftnl_set_alloc();
        struct elems_ctx c = {.v = v, .n = n};
        const char *name;

        if (!s)
                return -ENOMEM;
        if (nftnl_set_elems_nlmsg_parse(nlh, s) < 0) {
                nftnl_set_free(s);
                return -EBADMSG;
        }
        name = nftnl_set_get_str(s, NFTNL_SET_NAME);
        if (name && net_nft_set_parse_name(name, &c.family, &c.port) >= 0)
                (void)nftnl_set_elem_foreach(s, elem_cb, &c);
        nftnl_set_free(s);
        return c.err;
}

/* Sends one dump request and feeds every answer to cb until NLMSG_DONE. */
static int dump_run(struct mnl_socket *nl, const struct nlmsghdr *req, mnl_cb_t cb, void *data)
{
        cleanup_free char *buf = malloc(MNL_SOCKET_BUFFER_SIZE);
        uint32_t portid = mnl_socket_get_portid(nl);
        int r = MNL_CB_OK;

        if (!buf)
                return -ENOMEM;
        if (mnl_socket_sendto(nl, req, req->nlmsg_len) < 0)
                return -errno;
        while (r > MNL_CB_STOP) {
                struct pollfd pfd = {.fd = mnl_socket_get_fd(nl), .events = POLLIN};
                ssize_t k;

                r = poll(&pfd, 1, DUMP_TIMEOUT_MS);
                if (r < 0 && errno == EINTR)
                        continue;
                if (r <= 0)
                        return r < 0 ? -errno : -ETIMEDOUT;
                k = mnl_socket_recvfrom(nl, buf, MNL_SOCKET_BUFFER_SIZE);
                if (k < 0)
                        return -errno;
                errno = 0;
                r = mnl_cb_run(buf, (size_t)k, req->nlmsg_seq, portid, cb, data);
                if (r == MNL_CB_ERROR)
                        return errno ? -errno : -EBADMSG;
        }
        return 0;
}

struct sets_ctx {
        char **names;
        size_t n;
};

static int set_cb(const struct nlmsghdr *nlh, void *data)
{
        struct sets_ctx *c = data;
        struct nftnl_set *s = nftnl_set_alloc();
        const char *name;
        int family, r = MNL_CB_OK;
        uint16_t port;

        if (!s)
                return MNL_CB_ERROR;
        if (nftnl_set_nlmsg_parse(nlh, s) >= 0 && (name = nftnl_set_get_str(s, NFTNL_SET_NAME)) &&
            net_nft_set_parse_name(name, &family, &port) >= 0 && c->n < DUMP_SETS_MAX) {
                c->names[c->n] = strdup(name);
                r = c->names[c->n] ? MNL_CB_OK : MNL_CB_ERROR;
                c->n += c->names[c->n] != NULL;
        }
        nftnl_set_free(s);
        return r;
}

struct msg_ctx {
        struct net_nft_elem **v;
        size_t *n;
};

static int setelem_cb(const struct nlmsghdr *nlh, void *data)
{
        struct msg_ctx *c = data;

        return net_nft_elems_from_msg(nlh, c->v, c->n) == -ENOMEM ? MNL_CB_ERROR : MNL_CB_OK;
}

/* A dump request for the sets of table (name NULL) or the elements of one set. */
static struct nlmsghdr *request(char *buf, uint16_t type, const char *table, const char *name,
                                uint32_t seq)
{
        struct nftnl_set *s = nftnl_set_alloc();
        struct nlmsghdr *nlh;

        if (!s)
                return NULL;
        nftnl_set_set_str(s, NFTNL_SET_TABLE, table);
        if (name)
                nftnl_set_set_str(s, NFTNL_SET_NAME, name);
        nlh = nftnl_nlmsg_build_hdr(buf, type, NFPROTO_INET, NLM_F_DUMP, seq);
        if (name)
                nftnl_set_elems_nlmsg_build_payload(nlh, s);
        else
                nftnl_set_nlmsg_build_payload(nlh, s);
        nftnl_set_free(s);
        return nlh;
}

int net_nft_dump_elems(int nsfd, const char *table, struct net_nft_elem **ret, size_t *ret_n)
{
        _cleanup_(mnl_socket_closep) struct mnl_socket *nl = NULL;
        char *names[DUMP_SETS_MAX];
        struct sets_ctx sets = {.names = names};
        struct net_nft_elem *v = NULL;
        size_t n = 0;
        struct msg_ctx m = {.v = &v, .n = &n};
        char req[8192];
        struct nlmsghdr *nlh;
        uint32_t seq = 1;
        int r;

        r = net_nft_open(nsfd, &nl);
        if (r < 0)
                return r;
        nlh = request(req, NFT_MSG_GETSET, table, NULL, seq++);
        r = nlh ? dump_run(nl, nlh, set_cb, &sets) : -ENOMEM;
        for (size_t i = 0; i < sets.n && r >= 0; i++) {
                nlh = request(req, NFT_MSG_GETSETELEM, table, names[i], seq++);
                r = nlh ? dump_run(nl, nlh, setelem_cb, &m) : -ENOMEM;
                r = r == -ENOENT ? 0 : r;
        }
        for (size_t i = 0; i < sets.n; i++)
                free(names[i]);
        if (r == -ENOENT) /* no table (a fresh netns) or the set went away */
                r = 0;
        if (r < 0) {
                free(v);
                return r;
        }
        *ret = v;
        *ret_n = n;
        return 0;
}
