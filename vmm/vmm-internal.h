/* SPDX-License-Identifier: MIT */
/* Internals of the vmm module shared between its files and its unit tests: the pure QMP
 * protocol layer (encode, line splitting, decode/classify) and test seams for accel. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "vmm/vmm.h"

typedef struct json_t json_t; /* jansson */

/* ---- accel ------------------------------------------------------------------------------ */

/* vmm_accel_resolve() with the KVM device path injectable (unit tests use a temp file) and the
 * run probe optional (a temp file cannot run a guest). */
int vmm_accel_resolve_at(const char *want, const char *kvm_path, bool probe, enum vmm_accel *ret,
                         struct fk_error *err);
/* 0 when kvm_path runs a tiny real-mode guest and is not a paravirtual-only KVM (PVM), else
 * -errno (-ENOTSUP: present but unusable for ordinary guests). Takes ~1 ms. Does not log. */
int vmm_kvm_probe(const char *kvm_path);

/* ---- host facts ------------------------------------------------------------------------- */

/* ---- QMP wire protocol (pure: no I/O) ------------------------------------------------- */

/* QEMU sends one JSON object per line; a line longer than this is a protocol error. */
#define QMP_LINE_MAX (16U * 1024U * 1024U)

enum qmp_msg_kind {
        QMP_MSG_GREETING, /* {"QMP": {...}} */
        QMP_MSG_RETURN,   /* {"return": ..., "id": ...} */
        QMP_MSG_ERROR,    /* {"error": {"class": ..., "desc": ...}, "id": ...} */
        QMP_MSG_EVENT,    /* {"event": ..., "data": ..., "timestamp": ...} */
};
const char *qmp_msg_kind_to_string(enum qmp_msg_kind k);

/* Encodes {"execute": command, "arguments": args, "id": id} followed by "\n" into an owned
 * NUL-terminated string (*ret, length in *ret_len). args may be NULL (borrowed). */
int qmp_proto_encode(const char *command, json_t *args, uint64_t id, char **ret, size_t *ret_len);

/* Decodes one line (without or with its trailing "\r\n") into a message. *ret gets a new
 * reference. -EBADMSG with err filled when the line is not JSON or not a QMP message. */
int qmp_proto_decode(const char *line, size_t len, json_t **ret, enum qmp_msg_kind *ret_kind,
                     struct fk_error *err);

/* The message's "id" as a number: 1 and *ret filled if it has an integer id, 0 if none. */
int qmp_proto_msg_id(json_t *msg, uint64_t *ret);

/* Fills err with "Class: desc" from an error message and returns -EIO. */
int qmp_proto_error_to_fk(json_t *msg, const char *command, struct fk_error *err);

/* Accumulates bytes from partial reads and hands out complete lines. */
struct qmp_linebuf {
        char *data;
        size_t len;
        size_t cap;
};
/* Appends size bytes. -EMSGSIZE when a pending line would exceed QMP_LINE_MAX. */
int qmp_linebuf_feed(struct qmp_linebuf *b, const void *data, size_t size);
/* 1 and an owned NUL-terminated line (without "\n") in *ret, or 0 when no full line yet.
 * Blank lines are skipped. */
int qmp_linebuf_next(struct qmp_linebuf *b, char **ret);
void qmp_linebuf_done(struct qmp_linebuf *b);
