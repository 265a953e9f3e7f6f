/* SPDX-License-Identifier: MIT */
/* Label and field selectors of list and watch requests (labelSelector=, fieldSelector=), in
 * the Kubernetes syntax: a=b, a==b, a!=b, a, !a, a in (x,y), a notin (x,y), comma-joined. */
#include "agent/api/api-internal.h"
#include "common/cleanup.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

static const char *skip_ws(const char *p)
{
        while (*p == ' ' || *p == '\t')
                p++;
        return p;
}

/* Copies the token [p, e) without surrounding blanks into out (size bytes). */
static int token(const char *p, const char *e, char *out, size_t size)
{
        p = skip_ws(p);
        while (e > p && (e[-1] == ' ' || e[-1] == '\t'))
                e--;
        if ((size_t)(e - p) >= size)
                return -ENAMETOOLONG;
        memcpy(out, p, (size_t)(e - p));
        out[e - p] = '\0';
        return (int)(e - p);
}

/* "(x, y)" at p into r->values; *end after ')'. */
static int parse_set(const char *p, struct api_kube_req *r, const char **end, struct fk_error *err)
{
        const char *close;

        p = skip_ws(p);
        if (*p != '(')
                return fk_error_set(err, -EINVAL, "expected '(' after in/notin");
        close = strchr(p, ')');
        if (!close)
                return fk_error_set(err, -EINVAL, "missing ')'");
        for (p++; p < close;) {
                const char *comma = memchr(p, ',', (size_t)(close - p));
                const char *e = comma ? comma : close;

                if (r->n_values == ARRAY_SIZE(r->values) ||
                    token(p, e, r->values[r->n_values], sizeof(r->values[0])) < 0)
                        return fk_error_set(err, -EINVAL, "too many or too long values in a set");
                r->n_values++;
                p = e + 1;
        }
        *end = close + 1;
        return 0;
}

/* One requirement from p up to its end (a ',' outside parentheses or NUL). */
static int parse_req(const char *p, struct api_kube_req *r, const char **end, struct fk_error *err)
{
        const char *e = p, *op;
        int depth = 0;

        for (; *e && (depth > 0 || *e != ','); e++)
                depth += *e == '(' ? 1 : *e == ')' ? -1 : 0;
        *end = e;
        p = skip_ws(p);
        if (*p == '!') {
                r->op = KSEL_NOT_EXISTS;
                return token(p + 1, e, r->key, sizeof(r->key)) > 0
                               ? 0
                               : fk_error_set(err, -EINVAL, "'!' needs a key");
        }
        op = strpbrk(p, "=!");
        if (op && op < e) {
                r->op = op[0] == '!' ? KSEL_NE : KSEL_EQ;
                if (op[0] == '!' && op[1] != '=')
                        return fk_error_set(err, -EINVAL, "'!' must be followed by '='");
                if (token(p, op, r->key, sizeof(r->key)) <= 0)
                        return fk_error_set(err, -EINVAL, "a requirement needs a key");
                op += op[0] == '!' ? 2 : op[1] == '=' ? 2 : 1;
                r->n_values = 1;
                return token(op, e, r->values[0], sizeof(r->values[0])) >= 0
                               ? 0
                               : fk_error_set(err, -EINVAL, "value too long");
        }
        for (const char *q = p; q < e; q++) {
                bool in = strncmp(q, " in ", 4) == 0 || strncmp(q, " in(", 4) == 0;
                bool notin = strncmp(q, " notin ", 7) == 0 || strncmp(q, " notin(", 7) == 0;

                if (!in && !notin)
                        continue;
                r->op = in ? KSEL_IN : KSEL_NOT_IN;
                if (token(p, q, r->key, sizeof(r->key)) <= 0)
                        return fk_error_set(err, -EINVAL, "a set requirement needs a key");
                return parse_set(q + (in ? 3 : 6), r, end, err);
        }
        r->op = KSEL_EXISTS;
        return token(p, e, r->key, sizeof(r->key)) > 0
                       ? 0
                       : fk_error_set(err, -EINVAL, "empty requirement");
}

int api_kube_label_selector_parse(const char *s, struct api_kube_selector *ret,
                                  struct fk_error *err)
{
        struct api_kube_selector sel = {0};
        const char *p = s;
        int r;

        while (p && *skip_ws(p)) {
                const char *end;

                if (sel.n == API_KUBE_SELECTOR_MAX)
                        return fk_error_set(err, -EINVAL, "more than %d requirements",
                                            API_KUBE_SELECTOR_MAX);
                r = parse_req(p, &sel.reqs[sel.n], &end, err);
                if (r < 0)
                        return r;
                sel.n++;
                p = skip_ws(end);
                if (*p == ',')
                        p++;
                else if (*p)
                        return fk_error_set(err, -EINVAL, "unexpected \"%s\"", p);
        }
        *ret = sel;
        return 0;
}

int api_kube_field_selector_parse(const char *s, struct api_kube_selector *ret,
                                  struct fk_error *err)
{
        static const char *const fields[] = {"metadata.name", "metadata.namespace", "status.phase"};
        struct api_kube_selector sel;
        int r;

        r = api_kube_label_selector_parse(s, &sel, err);
        if (r < 0)
                return r;
        for (size_t i = 0; i < sel.n; i++) {
                bool known = false;

                for (size_t k = 0; k < ARRAY_SIZE(fields); k++)
                        known |= strcmp(sel.reqs[i].key, fields[k]) == 0;
                if (!known)
                        return fk_error_set(err, -EINVAL,
                                            "field label not supported: %s (supported: "
                                            "metadata.name, metadata.namespace, status.phase)",
                                            sel.reqs[i].key);
                if (sel.reqs[i].op != KSEL_EQ && sel.reqs[i].op != KSEL_NE)
                        return fk_error_set(err, -EINVAL,
                                            "field selector %s: only =, == and != are supported",
                                            sel.reqs[i].key);
        }
        *ret = sel;
        return 0;
}

static bool req_match(const struct api_kube_req *r, const char *v)
{
        bool in = false;

        switch (r->op) {
        case KSEL_EXISTS:
                return v != NULL;
        case KSEL_NOT_EXISTS:
                return v == NULL;
        case KSEL_EQ:
                return v && strcmp(v, r->values[0]) == 0;
        case KSEL_NE:
                return !v || strcmp(v, r->values[0]) != 0;
        case KSEL_IN:
        case KSEL_NOT_IN:
                for (size_t i = 0; v && i < r->n_values; i++)
                        in |= strcmp(v, r->values[i]) == 0;
                return r->op == KSEL_IN ? in : !in;
        }
        return false;
}

bool api_kube_labels_match(const struct api_kube_selector *s, const json_t *obj)
{
        const json_t *labels = json_object_get(json_object_get(obj, "metadata"), "labels");

        for (size_t i = 0; i < s->n; i++)
                if (!req_match(&s->reqs[i],
                               json_string_value(json_object_get(labels, s->reqs[i].key))))
                        return false;
        return true;
}

bool api_kube_fields_match(const struct api_kube_selector *s, const json_t *obj)
{
        for (size_t i = 0; i < s->n; i++) {
                const char *key = s->reqs[i].key, *dot = strchr(key, '.');
                char top[32];

                snprintf(top, sizeof(top), "%.*s", (int)(dot - key), key);
                if (!req_match(&s->reqs[i], json_string_value(json_object_get(
                                                    json_object_get(obj, top), dot + 1))))
                        return false;
        }
        return true;
}
