/* SPDX-License-Identifier: MIT */
/* Syntax of names: DNS-1123 labels, environment variable names, label keys/values, and egress
 * entries (host, *.wildcard, IPv4/IPv6 address or CIDR, each with an optional :port). */
#include "manifest/doc/doc.h"
#include "common/cleanup.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

static bool is_lower_alnum(char ch)
{
        return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9');
}

const char *manifest_name_problem(const char *name)
{
        size_t len = strlen(name);

        if (len == 0)
                return "must not be empty";
        if (len > MANIFEST_NAME_MAX)
                return "must be at most 63 characters";
        for (size_t i = 0; i < len; i++)
                if (!is_lower_alnum(name[i]) && name[i] != '-')
                        return "must contain only lowercase letters, digits and '-'";
        if (name[0] == '-' || name[len - 1] == '-')
                return "must start and end with a lowercase letter or digit";
        return NULL;
}

bool manifest_name_is_valid(const char *name)
{
        return name && !manifest_name_problem(name);
}

const char *manifest_env_name_problem(const char *name)
{
        if (name[0] == 0)
                return "must not be empty";
        if (isdigit((unsigned char)name[0]))
                return "must not start with a digit";
        for (const char *p = name; *p; p++)
                if (!isalnum((unsigned char)*p) && *p != '_')
                        return "must contain only letters, digits and '_'";
        return NULL;
}

/* [A-Za-z0-9] at both ends, [-_.A-Za-z0-9] inside, at most 63. */
static const char *label_part_problem(const char *s, size_t len)
{
        if (len > MANIFEST_NAME_MAX)
                return "must be at most 63 characters";
        for (size_t i = 0; i < len; i++)
                if (!isalnum((unsigned char)s[i]) && !strchr("-_.", s[i]))
                        return "must contain only letters, digits, '-', '_' and '.'";
        if (len > 0 && (!isalnum((unsigned char)s[0]) || !isalnum((unsigned char)s[len - 1])))
                return "must start and end with a letter or digit";
        return NULL;
}

const char *manifest_label_key_problem(const char *key)
{
        const char *slash = strchr(key, '/');
        const char *name = slash ? slash + 1 : key;

        if (slash) {
                struct fk_error e;
                struct egress_rule r = {0};
                cleanup_free char *prefix = strndup(key, (size_t)(slash - key));

                if (!prefix)
                        return "out of memory";
                if (manifest_egress_parse(prefix, &r, &e) < 0 || r.kind != EGRESS_HOST ||
                    strchr(prefix, ':') || strcmp(r.raw, r.host) != 0) {
                        egress_rule_done(&r);
                        return "prefix must be a lowercase DNS name";
                }
                egress_rule_done(&r);
        }
        if (name[0] == 0)
                return "name part must not be empty";
        return label_part_problem(name, strlen(name));
}

const char *manifest_label_value_problem(const char *value)
{
        return label_part_problem(value, strlen(value));
}

void egress_rule_done(struct egress_rule *r)
{
        if (!r)
                return;
        free(r->raw);
        free(r->host);
        r->raw = r->host = NULL;
}

static int parse_port(const char *s, uint16_t *ret, struct fk_error *err)
{
        unsigned long v = 0;

        if (!*s || strlen(s) > 5 || strspn(s, "0123456789") != strlen(s))
                return fk_error_set(err, -EINVAL, "invalid port \"%s\"", s);
        v = strtoul(s, NULL, 10);
        if (v < 1 || v > 65535)
                return fk_error_set(err, -EINVAL, "port %lu is out of range (1..65535)", v);
        *ret = (uint16_t)v;
        return 0;
}

static bool host_bits_clear(const uint8_t *a, size_t bytes, unsigned prefix)
{
        for (size_t i = 0; i < bytes; i++) {
                unsigned bit = (unsigned)i * 8;
                uint8_t mask = bit >= prefix       ? 0xff
                               : prefix - bit >= 8 ? 0
                                                   : (uint8_t)(0xff >> (prefix - bit));

                if (a[i] & mask)
                        return false;
        }
        return true;
}

/* An address or CIDR; returns 1 when parsed, 0 when it is not an address, <0 on error. */
static int parse_cidr(char *s, struct egress_rule *r, struct fk_error *err)
{
        char *slash = strchr(s, '/');
        unsigned long prefix;

        if (slash)
                *slash = 0;
        if (inet_pton(AF_INET, s, r->addr) == 1)
                r->family = AF_INET;
        else if (inet_pton(AF_INET6, s, r->addr) == 1)
                r->family = AF_INET6;
        else if (slash || strchr(s, ':'))
                return fk_error_set(err, -EINVAL, "invalid IP address \"%s\"", s);
        else
                return 0;
        r->kind = EGRESS_CIDR;
        r->prefix_len = r->family == AF_INET ? 32 : 128;
        if (!slash)
                return 1;
        slash++;
        if (!*slash || strlen(slash) > 3 || strspn(slash, "0123456789") != strlen(slash))
                return fk_error_set(err, -EINVAL, "invalid prefix length \"%s\"", slash);
        prefix = strtoul(slash, NULL, 10);
        if (prefix > r->prefix_len)
                return fk_error_set(err, -EINVAL, "prefix length %lu is out of range (0..%u)",
                                    prefix, r->prefix_len);
        r->prefix_len = (uint8_t)prefix;
        if (!host_bits_clear(r->addr, r->family == AF_INET ? 4 : 16, r->prefix_len))
                return fk_error_set(err, -EINVAL, "address has bits set beyond the /%lu prefix",
                                    prefix);
        return 1;
}

static int parse_host(const char *s, struct egress_rule *r, struct fk_error *err)
{
        size_t len = strlen(s), label = 0;
        const char *last;

        if (len == 0)
                return fk_error_set(err, -EINVAL, "empty host name");
        if (len > 253)
                return fk_error_set(err, -EINVAL, "host name longer than 253 characters");
        for (size_t i = 0; i <= len; i++) {
                char ch = s[i];

                if (ch == '.' || ch == 0) {
                        if (label == 0 || label > 63)
                                return fk_error_set(err, -EINVAL,
                                                    "each dot-separated part of a host name "
                                                    "must have 1..63 characters");
                        if (s[i - 1] == '-' || s[i - label] == '-')
                                return fk_error_set(err, -EINVAL,
                                                    "host name parts must not start or end "
                                                    "with '-'");
                        label = 0;
                        continue;
                }
                if (ch == '*')
                        return fk_error_set(err, -EINVAL,
                                            "a wildcard is only allowed as a leading \"*.\"");
                if (!isalnum((unsigned char)ch) && ch != '-')
                        return fk_error_set(err, -EINVAL,
                                            "not a host name, *.wildcard, IP address or CIDR");
                label++;
        }
        last = strrchr(s, '.');
        last = last ? last + 1 : s;
        if (strspn(last, "0123456789") == strlen(last))
                return fk_error_set(err, -EINVAL, "not a valid IPv4 address or host name");
        r->host = strdup(s);
        if (!r->host)
                return -ENOMEM;
        for (char *p = r->host; *p; p++)
                *p = (char)tolower((unsigned char)*p);
        return 0;
}

/* Splits off ":port" (and "[v6]" brackets); leaves the address or name in s. */
static int split_port(char *s, uint16_t *port, struct fk_error *err)
{
        char *colon, *close;
        int r;

        if (s[0] == '[') {
                close = strchr(s, ']');

                if (!close || close[1] != ':')
                        return fk_error_set(err, -EINVAL,
                                            "brackets are only for an IPv6 address with a port, "
                                            "as in [2001:db8::1]:443");
                r = parse_port(close + 2, port, err);
                if (r < 0)
                        return r;
                memmove(s, s + 1, (size_t)(close - s - 1));
                close[-1] = 0;
                if (!strchr(s, ':'))
                        return fk_error_set(err, -EINVAL, "\"%s\" in brackets is not IPv6", s);
                return 0;
        }
        colon = strchr(s, ':');
        if (!colon || strchr(colon + 1, ':'))
                return 0; /* no port, or a bare IPv6 address */
        *colon = 0;
        return parse_port(colon + 1, port, err);
}

static int egress_parse_into(const char *text, struct egress_rule *r, struct fk_error *err)
{
        cleanup_free char *s = strdup(text);
        int k;

        if (!s)
                return -ENOMEM;
        if (!*s)
                return fk_error_set(err, -EINVAL, "empty entry");
        if (strpbrk(s, " \t\r\n"))
                return fk_error_set(err, -EINVAL, "must not contain whitespace");
        k = split_port(s, &r->port, err);
        if (k < 0)
                return k;
        k = parse_cidr(s, r, err);
        if (k != 0)
                return k < 0 ? k : 0;
        if (strncmp(s, "*.", 2) == 0) {
                r->kind = EGRESS_WILDCARD;
                return parse_host(s + 2, r, err);
        }
        if (strchr(s, '/'))
                return fk_error_set(err, -EINVAL, "invalid CIDR");
        r->kind = EGRESS_HOST;
        return parse_host(s, r, err);
}

int manifest_egress_parse(const char *text, struct egress_rule *ret, struct fk_error *err)
{
        struct egress_rule r = {0};
        int k;

        k = egress_parse_into(text, &r, err);
        if (k == 0) {
                r.raw = strdup(text);
                if (!r.raw)
                        k = -ENOMEM;
        }
        if (k < 0) {
                egress_rule_done(&r);
                if (k == -ENOMEM)
                        fk_error_set(err, -ENOMEM, "out of memory");
                return k;
        }
        *ret = r;
        return 0;
}
