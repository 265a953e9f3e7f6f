/* SPDX-License-Identifier: MIT */
/* The QMP wire protocol without I/O: encode commands with an id, split a byte stream into
 * lines, decode and classify greetings, replies, errors and events. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/error.h"
#include "vmm/vmm-internal.h"

const char *qmp_msg_kind_to_string(enum qmp_msg_kind k)
{
        static const char *const names[] = {
                [QMP_MSG_GREETING] = "greeting",
                [QMP_MSG_RETURN] = "return",
                [QMP_MSG_ERROR] = "error",
                [QMP_MSG_EVENT] = "event",
        };
        return (unsigned)k < ARRAY_SIZE(names) ? names[k] : NULL;
}

int qmp_proto_encode(const char *command, json_t *args, uint64_t id, char **ret, size_t *ret_len)
{
        _cleanup_(json_decrefp) json_t *msg = NULL;
        char *s;

        if (!command || !*command || !ret)
                return -EINVAL;
        if (args && !json_is_object(args))
                return -EINVAL;
        msg = json_pack("{s:s, s:I}", "execute", command, "id", (json_int_t)id);
        if (!msg)
                return -ENOMEM;
        if (args && json_object_set(msg, "arguments", args) < 0)
                return -ENOMEM;
        /* Compact, one line: QMP frames are newline-delimited. */
        s = json_dumps(msg, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (!s)
                return -ENOMEM;
        {
                size_t n = strlen(s);
                char *line = realloc(s, n + 2);
                if (!line) {
                        free(s);
                        return -ENOMEM;
                }
                line[n] = '\n';
                line[n + 1] = '\0';
                *ret = line;
                if (ret_len)
                        *ret_len = n + 1;
        }
        return 0;
}

static int classify(json_t *msg, enum qmp_msg_kind *ret)
{
        json_t *e;

        if (!json_is_object(msg))
                return -EBADMSG;
        if (json_object_get(msg, "QMP")) {
                *ret = QMP_MSG_GREETING;
                return 0;
        }
        if (json_object_get(msg, "return")) {
                *ret = QMP_MSG_RETURN;
                return 0;
        }
        e = json_object_get(msg, "error");
        if (json_is_object(e)) {
                *ret = QMP_MSG_ERROR;
                return 0;
        }
        if (json_is_string(json_object_get(msg, "event"))) {
                *ret = QMP_MSG_EVENT;
                return 0;
        }
        return -EBADMSG;
}

int qmp_proto_decode(const char *line, size_t len, json_t **ret, enum qmp_msg_kind *ret_kind,
                     struct fk_error *err)
{
        _cleanup_(json_decrefp) json_t *msg = NULL;
        enum qmp_msg_kind kind;
        json_error_t jerr;

        if (!line || !ret || !ret_kind)
                return -EINVAL;
        msg = json_loadb(line, len, JSON_REJECT_DUPLICATES, &jerr);
        if (!msg)
                return fk_error_set(err, -EBADMSG, "QMP: malformed message (%s): %.60s", jerr.text,
                                    line);
        if (classify(msg, &kind) < 0)
                return fk_error_set(err, -EBADMSG, "QMP: unknown message: %.80s", line);
        *ret = TAKE_PTR(msg);
        *ret_kind = kind;
        return 0;
}

int qmp_proto_msg_id(json_t *msg, uint64_t *ret)
{
        json_t *id = json_object_get(msg, "id");

        if (!json_is_integer(id) || json_integer_value(id) < 0)
                return 0;
        if (ret)
                *ret = (uint64_t)json_integer_value(id);
        return 1;
}

int qmp_proto_error_to_fk(json_t *msg, const char *command, struct fk_error *err)
{
        json_t *e = json_object_get(msg, "error");
        const char *cls = json_string_value(json_object_get(e, "class"));
        const char *desc = json_string_value(json_object_get(e, "desc"));

        return fk_error_set(err, -EIO, "QMP %s: %s: %s", command ? command : "command",
                            cls ? cls : "UnknownError", desc ? desc : "(no description)");
}

/* ---- line splitting --------------------------------------------------------------------- */

int qmp_linebuf_feed(struct qmp_linebuf *b, const void *data, size_t size)
{
        size_t need;

        if (size == 0)
                return 0;
        need = b->len + size;
        /* Callers drain complete lines after each feed, so what is buffered is one partial
         * line (plus this chunk): bound it. */
        if (need > QMP_LINE_MAX)
                return -EMSGSIZE;
        if (need + 1 > b->cap) {
                size_t cap = b->cap ? b->cap : 4096;
                char *n;

                while (cap < need + 1)
                        cap *= 2;
                n = realloc(b->data, cap);
                if (!n)
                        return -ENOMEM;
                b->data = n;
                b->cap = cap;
        }
        memcpy(b->data + b->len, data, size);
        b->len += size;
        return 0;
}

int qmp_linebuf_next(struct qmp_linebuf *b, char **ret)
{
        for (;;) {
                char *nl = b->len ? memchr(b->data, '\n', b->len) : NULL;
                size_t n, rest;
                char *line;

                if (!nl)
                        return 0;
                n = (size_t)(nl - b->data);
                rest = b->len - n - 1;
                /* QEMU ends lines with "\r\n". */
                while (n > 0 && (b->data[n - 1] == '\r' || b->data[n - 1] == ' '))
                        n--;
                line = n > 0 ? strndup(b->data, n) : NULL;
                if (n > 0 && !line)
                        return -ENOMEM;
                memmove(b->data, nl + 1, rest);
                b->len = rest;
                if (line) {
                        *ret = line;
                        return 1;
                }
        }
}

void qmp_linebuf_done(struct qmp_linebuf *b)
{
        free(b->data);
        *b = (struct qmp_linebuf){};
}
