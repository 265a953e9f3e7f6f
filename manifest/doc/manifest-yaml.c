/* SPDX-License-Identifier: MIT */
/* Renders a JSON value as block-style YAML for `-o yaml`: stable key order, strings quoted
 * whenever a YAML reader could take them for something else, so the output re-parses equal. */
#include "manifest/doc/doc.h"
#include "common/cleanup.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Decodes one UTF-8 sequence (jansson strings are valid UTF-8); returns its length. */
static size_t utf8_decode(const unsigned char *s, uint32_t *cp)
{
        if (s[0] < 0x80) {
                *cp = s[0];
                return 1;
        }
        if ((s[0] & 0xE0) == 0xC0) {
                *cp = ((uint32_t)(s[0] & 0x1F) << 6) | (s[1] & 0x3F);
                return 2;
        }
        if ((s[0] & 0xF0) == 0xE0) {
                *cp = ((uint32_t)(s[0] & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) |
                      (s[2] & 0x3F);
                return 3;
        }
        *cp = ((uint32_t)(s[0] & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
              ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
        return 4;
}

/* YAML's printable set, minus the characters we would rather escape. */
static bool yaml_printable(uint32_t cp)
{
        return (cp >= 0x20 && cp <= 0x7E) || (cp >= 0xA0 && cp <= 0xD7FF) ||
               (cp >= 0xE000 && cp <= 0xFFFD && cp != 0xFEFF) || (cp >= 0x10000 && cp <= 0x10FFFF);
}

static bool needs_quotes(const char *s, size_t len)
{
        static const char *const words[] = {"y",  "Y",   "yes", "Yes", "YES", "n",
                                            "N",  "no",  "No",  "NO",  "on",  "On",
                                            "ON", "off", "Off", "OFF", "<<",  "="};

        if (len == 0 || strlen(s) != len || mscalar_resolve(s) != MSCALAR_STRING)
                return true;
        for (size_t i = 0; i < ARRAY_SIZE(words); i++)
                if (strcmp(s, words[i]) == 0)
                        return true;
        if (strchr("-?:,[]{}#&*!|>'\"%@` \t", s[0]) || s[len - 1] == ' ' || s[len - 1] == ':')
                return true;
        /* YAML 1.1 readers take 0x1F, 1_000, 1:20 (base 60) and 2001-12-14 for numbers/dates */
        if (strchr("0123456789+.", s[0]) && strspn(s, "0123456789_:.+-eEabcdefABCDEFxXoO") == len)
                return true;
        if (strstr(s, ": ") || strstr(s, " #") || strstr(s, ":\t") || strstr(s, "\t#"))
                return true;
        for (size_t i = 0; i < len;) {
                uint32_t cp;

                i += utf8_decode((const unsigned char *)s + i, &cp);
                if (!yaml_printable(cp) || cp == '\t')
                        return true;
        }
        return false;
}

static void emit_string(FILE *f, const char *s, size_t len)
{
        if (!needs_quotes(s, len)) {
                fputs(s, f);
                return;
        }
        fputc('"', f);
        for (size_t i = 0; i < len;) {
                uint32_t cp;
                size_t k = utf8_decode((const unsigned char *)s + i, &cp);

                if (cp == '"' || cp == '\\')
                        fprintf(f, "\\%c", (char)cp);
                else if (cp == '\n')
                        fputs("\\n", f);
                else if (cp == '\t')
                        fputs("\\t", f);
                else if (!yaml_printable(cp))
                        fprintf(f, cp > 0xFFFF ? "\\U%08X" : "\\u%04X", (unsigned)cp);
                else
                        fwrite(s + i, 1, k, f);
                i += k;
        }
        fputc('"', f);
}

static void emit_real(FILE *f, double d)
{
        char buf[64];

        if (isnan(d) || isinf(d)) {
                fputs(isnan(d) ? ".nan" : d > 0 ? ".inf" : "-.inf", f);
                return;
        }
        for (int prec = 1; prec <= 17; prec++) {
                snprintf(buf, sizeof(buf), "%.*g", prec, d);
                if (strtod(buf, NULL) == d)
                        break;
        }
        /* Keep it a float when read back: 1 -> 1.0 */
        if (!strpbrk(buf, ".eEn"))
                strcat(buf, ".0");
        fputs(buf, f);
}

static void emit_scalar(FILE *f, const json_t *j)
{
        switch (json_typeof(j)) {
        case JSON_STRING:
                emit_string(f, json_string_value(j), json_string_length(j));
                break;
        case JSON_INTEGER:
                fprintf(f, "%" JSON_INTEGER_FORMAT, json_integer_value(j));
                break;
        case JSON_REAL:
                emit_real(f, json_real_value(j));
                break;
        case JSON_TRUE:
                fputs("true", f);
                break;
        case JSON_FALSE:
                fputs("false", f);
                break;
        case JSON_OBJECT:
                fputs("{}", f);
                break;
        case JSON_ARRAY:
                fputs("[]", f);
                break;
        default:
                fputs("null", f);
                break;
        }
}

static bool is_block(const json_t *j)
{
        return (json_is_object(j) && json_object_size(j) > 0) ||
               (json_is_array(j) && json_array_size(j) > 0);
}

/* Emits a non-empty container at indent. When inline_first, the first line's indentation was
 * already written (after "- "). */
static void emit_block(FILE *f, const json_t *j, int indent, bool inline_first)
{
        bool first = true;
        const char *key;
        json_t *v;
        size_t i;

        if (json_is_object(j)) {
                json_object_foreach((json_t *)j, key, v)
                {
                        fprintf(f, "%*s", first && inline_first ? 0 : indent, "");
                        first = false;
                        emit_string(f, key, strlen(key));
                        fputc(':', f);
                        if (is_block(v)) {
                                fputc('\n', f);
                                emit_block(f, v, indent + 2, false);
                        } else {
                                fputc(' ', f);
                                emit_scalar(f, v);
                                fputc('\n', f);
                        }
                }
                return;
        }
        json_array_foreach(j, i, v)
        {
                fprintf(f, "%*s- ", first && inline_first ? 0 : indent, "");
                first = false;
                if (is_block(v)) {
                        emit_block(f, v, indent + 2, true);
                } else {
                        emit_scalar(f, v);
                        fputc('\n', f);
                }
        }
}

int manifest_json_to_yaml(const json_t *j, char **ret)
{
        char *buf = NULL;
        size_t size = 0;
        FILE *f;

        if (!j)
                return -EINVAL;
        f = open_memstream(&buf, &size);
        if (!f)
                return -ENOMEM;
        if (is_block(j)) {
                emit_block(f, j, 0, false);
        } else {
                emit_scalar(f, j);
                fputc('\n', f);
        }
        if (fclose(f) != 0 || !buf) {
                free(buf);
                return -ENOMEM;
        }
        *ret = buf;
        return 0;
}
