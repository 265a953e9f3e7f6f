/* SPDX-License-Identifier: MIT */
/* meta.k8s.io/v1 Table responses, what `kubectl get` prints: NAME, PHASE, PID, AGE, and with
 * -o wide (priority 1) READY, STATE, IMAGE, CLASS, NETNS. */
#include "agent/api/api-internal.h"
#include "common/cleanup.h"
#include "common/util.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static const struct {
        const char *name, *type, *format, *description;
        int priority;
} columns[] = {
        {"Name", "string", "name", "metadata.name", 0},
        {"Phase", "string", "", "status.phase", 0},
        {"PID", "integer", "", "status.vm.pid: the QEMU process", 0},
        {"Age", "string", "", "since metadata.creationTimestamp", 0},
        {"Ready", "string", "", "the Ready condition", 1},
        {"State", "string", "", "spec.state (desired)", 1},
        {"Image", "string", "", "spec.image", 1},
        {"Class", "string", "", "spec.sizeClass", 1},
        {"Netns", "string", "", "status.network.netns", 1},
};

bool api_kube_wants_table(const char *accept)
{
        return accept && strstr(accept, "as=Table") && strstr(accept, "g=meta.k8s.io");
}

void api_kube_age(int64_t s, char *buf, size_t size)
{
        if (s < 0)
                s = 0;
        if (s < 120)
                snprintf(buf, size, "%llds", (long long)s);
        else if (s < 3600 * 2)
                snprintf(buf, size, "%lldm", (long long)(s / 60));
        else if (s < 86400 * 2)
                snprintf(buf, size, "%lldh", (long long)(s / 3600));
        else
                snprintf(buf, size, "%lldd", (long long)(s / 86400));
}

/* Seconds since the epoch of "YYYY-MM-DDTHH:MM:SS[.frac]Z"; -1 when it is not one. */
static int64_t rfc3339_s(const char *t)
{
        struct tm tm = {0};
        const char *e = t ? strptime(t, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;

        return e ? (int64_t)timegm(&tm) : -1;
}

static const char *str_at(const json_t *o, const char *a, const char *b)
{
        const char *s = json_string_value(json_object_get(json_object_get(o, a), b));

        return s ? s : "<none>";
}

static const char *ready(const json_t *obj)
{
        json_t *c;
        size_t i;

        json_array_foreach(json_object_get(json_object_get(obj, "status"), "conditions"), i, c)
        {
                if (json_is_string(json_object_get(c, "type")) &&
                    strcmp(json_string_value(json_object_get(c, "type")), "Ready") == 0)
                        return json_string_value(json_object_get(c, "status"));
        }
        return "Unknown";
}

static json_t *cells(const json_t *obj, int64_t now_s)
{
        const json_t *status = json_object_get(obj, "status");
        json_t *pid = json_object_get(json_object_get(status, "vm"), "pid");
        int64_t created = rfc3339_s(str_at(obj, "metadata", "creationTimestamp"));
        char age[32] = "<unknown>";

        if (created >= 0)
                api_kube_age(now_s - created, age, sizeof(age));
        return json_pack("[s, s, o, s, s, s, s, s, s]", str_at(obj, "metadata", "name"),
                         str_at(obj, "status", "phase"),
                         json_is_integer(pid) && json_integer_value(pid) > 0 ? json_copy(pid)
                                                                             : json_string("-"),
                         age, ready(obj) ? ready(obj) : "Unknown", str_at(obj, "spec", "state"),
                         str_at(obj, "spec", "image"), str_at(obj, "spec", "sizeClass"),
                         json_string_value(json_object_get(
                                 json_object_get((json_t *)status, "network"), "netns"))
                                 ?: "-");
}

static json_t *row_object(const json_t *obj, const char *include)
{
        if (include && strcmp(include, "None") == 0)
                return NULL;
        if (include && strcmp(include, "Object") == 0)
                return json_deep_copy(obj);
        return json_pack("{s:s, s:s, s:O}", "kind", "PartialObjectMetadata", "apiVersion",
                         "meta.k8s.io/v1", "metadata", json_object_get(obj, "metadata"));
}

static json_t *column_defs(void)
{
        json_t *a = json_array();

        for (size_t i = 0; a && i < ARRAY_SIZE(columns); i++)
                json_array_append_new(
                        a, json_pack("{s:s, s:s, s:s, s:s, s:i}", "name", columns[i].name, "type",
                                     columns[i].type, "format", columns[i].format, "description",
                                     columns[i].description, "priority", columns[i].priority));
        return a;
}

json_t *api_kube_table(json_t *const *objs, size_t n, const char *include, bool with_columns,
                       const char *rv, int64_t now_s)
{
        json_t *t =
                json_pack("{s:s, s:s, s:{s:s}, s:[]}", "kind", "Table", "apiVersion",
                          "meta.k8s.io/v1", "metadata", "resourceVersion", rv ? rv : "", "rows");
        json_t *rows = json_object_get(t, "rows");

        if (!t)
                return NULL;
        if (with_columns && json_object_set_new(t, "columnDefinitions", column_defs()) < 0) {
                json_decref(t);
                return NULL;
        }
        for (size_t i = 0; i < n; i++) {
                json_t *row = json_pack("{s:o}", "cells", cells(objs[i], now_s));
                json_t *o = row_object(objs[i], include);

                if (!row || (o && json_object_set_new(row, "object", o) < 0) ||
                    json_array_append_new(rows, row) < 0) {
                        json_decref(t);
                        return NULL;
                }
        }
        return t;
}
