/* SPDX-License-Identifier: MIT */
/* metav1.Status failures for the Kubernetes-convention paths: the HTTP code and reason of a
 * daemon error, and the validator's messages as details.causes[] with their fields. */
#include "agent/api/api-internal.h"
#include "common/cleanup.h"
#include "common/util.h"

#include <errno.h>
#include <jansson.h>
#include <microhttpd.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define KUBE_RESOURCE "sessions"
#define KUBE_GROUP    "forklet.dev"

json_t *api_kube_status_json(unsigned code, const char *reason, const char *name,
                             const char *message, json_t *causes)
{
        /* kubectl prints "The Session "x" is invalid" from the kind of a 422 */
        json_t *details = json_pack("{s:s, s:s}", "group", KUBE_GROUP, "kind",
                                    causes ? "Session" : KUBE_RESOURCE);
        json_t *st;

        if (details && name)
                json_object_set_new(details, "name", json_string(name));
        if (details && causes && json_array_size(causes))
                json_object_set(details, "causes", causes);
        json_decref(causes);
        st = json_pack("{s:s, s:s, s:{}, s:s, s:s, s:s, s:I}", "kind", "Status", "apiVersion", "v1",
                       "metadata", "status", code < 300 ? "Success" : "Failure", "message",
                       message ? message : "", "reason", reason ? reason : "", "code",
                       (json_int_t)code);
        if (!st || !details) {
                json_decref(st);
                json_decref(details);
                return NULL;
        }
        json_object_set_new(st, "details", details);
        return st;
}

unsigned api_kube_errno_status(int r, const char **ret_reason)
{
        static const struct {
                int err;
                unsigned status;
                const char *reason;
        } map[] = {
                {ENOENT, MHD_HTTP_NOT_FOUND, "NotFound"},
                {EEXIST, MHD_HTTP_CONFLICT, "AlreadyExists"},
                {EPERM, MHD_HTTP_CONFLICT, "Conflict"},
                {EBUSY, MHD_HTTP_CONFLICT, "Conflict"},
                {EAGAIN, MHD_HTTP_CONFLICT, "Conflict"},
                {ESTALE, MHD_HTTP_CONFLICT, "Conflict"},
                {EUSERS, MHD_HTTP_TOO_MANY_REQUESTS, "TooManyRequests"},
                {ENOSPC, MHD_HTTP_INSUFFICIENT_STORAGE, "InternalError"},
                {EINVAL, MHD_HTTP_BAD_REQUEST, "BadRequest"},
                {EBADMSG, MHD_HTTP_UNPROCESSABLE_CONTENT, "Invalid"},
                {EOPNOTSUPP, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, "UnsupportedMediaType"},
                {ETIMEDOUT, MHD_HTTP_GATEWAY_TIMEOUT, "Timeout"},
                {ENOMEM, MHD_HTTP_INTERNAL_SERVER_ERROR, "InternalError"},
        };

        for (size_t i = 0; i < ARRAY_SIZE(map); i++)
                if (-r == map[i].err) {
                        *ret_reason = map[i].reason;
                        return map[i].status;
                }
        *ret_reason = "InternalError";
        return MHD_HTTP_INTERNAL_SERVER_ERROR;
}

static const char *cause_reason(const char *msg)
{
        if (strstr(msg, "required field missing"))
                return "FieldValueRequired";
        if (strstr(msg, "duplicate"))
                return "FieldValueDuplicate";
        if (strstr(msg, "unknown field"))
                return "FieldValueNotSupported";
        return "FieldValueInvalid";
}

/* "SOURCE[:L:C]: FIELD: MESSAGE" -> FIELD and MESSAGE. The field is the first ": "-ended token
 * after the source that holds no blank (paths never do; messages usually do). */
static json_t *one_cause(const char *m)
{
        const char *p = strstr(m, ": "), *e;
        char field[512] = "";

        p = p ? p + 2 : m;
        e = strstr(p, ": ");
        if (e && (size_t)(e - p) < sizeof(field) && !memchr(p, ' ', (size_t)(e - p))) {
                memcpy(field, p, (size_t)(e - p));
                field[e - p] = '\0';
                p = e + 2;
        }
        return json_pack("{s:s, s:s, s:s}", "reason", cause_reason(p), "field", field, "message",
                         p);
}

json_t *api_kube_causes(char *const *messages, size_t n)
{
        json_t *a = json_array();

        for (size_t i = 0; a && i < n; i++)
                if (json_array_append_new(a, one_cause(messages[i])) < 0) {
                        json_decref(a);
                        return NULL;
                }
        return a;
}

int api_kube_reply_status(struct MHD_Connection *c, unsigned code, const char *reason,
                          const char *name, json_t *causes, const char *fmt, ...)
{
        char msg[1024];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        return api_reply_json(c, code, api_kube_status_json(code, reason, name, msg, causes), NULL);
}

int api_kube_reply_errno(struct MHD_Connection *c, int r, const char *name, const char *msg)
{
        const char *reason;
        unsigned code = api_kube_errno_status(r, &reason);

        if (r == -ENOENT && name)
                return api_kube_reply_status(c, code, reason, name, NULL,
                                             KUBE_RESOURCE "." KUBE_GROUP " \"%s\" not found",
                                             name);
        return api_kube_reply_status(c, code, reason, name, NULL, "%s",
                                     msg && *msg ? msg : strerror(-r));
}
