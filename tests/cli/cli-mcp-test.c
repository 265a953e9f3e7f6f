/* SPDX-License-Identifier: MIT */
/* forklet mcp without a daemon: JSON-RPC framing and dispatch through a fake transport
 * (initialize and version negotiation, notifications, tools/list, unknown methods, parse
 * errors, batches, bad params), the stdio transport over a pipe (CRLF, blank lines, a last
 * line without newline, an oversized message skipped), the tool table's schemas and the
 * argument check, and the UTF-8 cleaning of guest output. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/mcp-internal.h"
#include "common/util.h"

/* ---- a fake transport: input lines from an array, output lines collected ------------------- */

struct fake_io {
        const char *const *in; /* NULL-terminated */
        size_t next;
        json_t *out; /* array of parsed replies */
        int raw_lines;
};

static int fake_read(void *ud, char **ret, size_t *ret_size)
{
        struct fake_io *f = ud;
        const char *line = f->in[f->next];

        if (!line)
                return 0;
        f->next++;
        if (strcmp(line, "<oversized>") == 0)
                return -EMSGSIZE;
        *ret = strdup(line);
        *ret_size = strlen(line);
        return *ret ? 1 : -ENOMEM;
}

static int fake_write(void *ud, const char *data, size_t size)
{
        struct fake_io *f = ud;
        json_error_t jerr;
        json_t *j;

        /* one message a line: exactly one newline, at the end */
        assert_true(size > 1);
        assert_int_equal(data[size - 1], '\n');
        assert_null(memchr(data, '\n', size - 1));
        j = json_loadb(data, size - 1, 0, &jerr);
        if (!j)
                fail_msg("reply is not JSON: %.*s (%s)", (int)size, data, jerr.text);
        assert_string_equal(json_string_value(json_object_get(j, "jsonrpc")), "2.0");
        json_array_append_new(f->out, j);
        f->raw_lines++;
        return 0;
}

static json_t *serve(const char *const *lines)
{
        struct fake_io f = {.in = lines, .out = json_array()};
        struct mcp_transport t = {fake_read, fake_write, &f};
        struct cli c = {.socket = "/nonexistent/api.sock", .namespace = "default"};
        struct mcp_server s;

        mcp_server_init(&s, &c);
        assert_int_equal(mcp_serve(&s, &t), 0);
        return f.out;
}

static int error_code(const json_t *reply)
{
        json_t *e = json_object_get(reply, "error");

        assert_non_null(e);
        assert_true(json_is_string(json_object_get(e, "message")));
        return (int)json_integer_value(json_object_get(e, "code"));
}

static const char *error_message(const json_t *reply)
{
        return json_string_value(json_object_get(json_object_get(reply, "error"), "message"));
}

static void test_initialize(void **state)
{
        static const char *const in[] = {
                "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"
                "\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{"
                "\"name\":\"t\",\"version\":\"1\"}}}",
                "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}",
                "{\"jsonrpc\":\"2.0\",\"id\":\"two\",\"method\":\"initialize\",\"params\":{"
                "\"protocolVersion\":\"2099-01-01\"}}",
                "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"initialize\",\"params\":{}}",
                "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"ping\"}",
                "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{"
                "\"requestId\":1}}",
                "{\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{}}", /* a response: ignored */
                NULL,
        };
        json_t *out = serve(in), *r;

        (void)state;
        assert_int_equal(json_array_size(out), 4); /* no reply to notifications/responses */
        r = json_object_get(json_array_get(out, 0), "result");
        assert_int_equal(json_integer_value(json_object_get(json_array_get(out, 0), "id")), 1);
        assert_string_equal(json_string_value(json_object_get(r, "protocolVersion")), "2025-06-18");
        assert_true(json_is_object(json_object_get(json_object_get(r, "capabilities"), "tools")));
        assert_string_equal(
                json_string_value(json_object_get(json_object_get(r, "serverInfo"), "name")),
                "forklet");
        assert_non_null(
                json_string_value(json_object_get(json_object_get(r, "serverInfo"), "version")));
        /* a version this server does not speak: it answers with its own */
        r = json_array_get(out, 1);
        assert_string_equal(json_string_value(json_object_get(r, "id")), "two");
        assert_string_equal(
                json_string_value(json_object_get(json_object_get(r, "result"), "protocolVersion")),
                MCP_PROTOCOL_VERSION);
        r = json_array_get(out, 2);
        assert_int_equal(error_code(r), MCP_INVALID_PARAMS);
        assert_non_null(strstr(error_message(r), "protocolVersion"));
        r = json_array_get(out, 3);
        assert_int_equal(json_integer_value(json_object_get(r, "id")), 4);
        assert_int_equal(json_object_size(json_object_get(r, "result")), 0);
        json_decref(out);
}

static void test_protocol_errors(void **state)
{
        static const char *const in[] = {
                "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"resources/list\"}",
                "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":",
                "[{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}]",
                "{\"id\":4,\"method\":\"ping\"}",
                "{\"jsonrpc\":\"2.0\",\"id\":5}",
                "{\"jsonrpc\":\"2.0\",\"id\":[6],\"method\":\"ping\"}",
                "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\",\"params\":[1]}",
                "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/call\",\"params\":{}}",
                "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":{\"name\":"
                "\"frobnicate\"}}",
                "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"tools/call\",\"params\":{\"name\":"
                "\"exec\",\"arguments\":{\"session\":\"hello\",\"argv\":\"uname\"}}}",
                "{\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"tools/call\",\"params\":{\"name\":"
                "\"exec\",\"arguments\":[]}}",
                "<oversized>",
                "{\"jsonrpc\":\"2.0\",\"id\":12,\"id\":13,\"method\":\"ping\"}",
                "{\"jsonrpc\":\"2.0\",\"method\":\"no/such/notification\"}",
                NULL,
        };
        static const struct {
                json_int_t id; /* -1: null */
                int code;
                const char *says;
        } want[] = {
                {1, MCP_METHOD_NOT_FOUND, "resources/list"},
                {-1, MCP_PARSE_ERROR, "parse error"},
                {-1, MCP_INVALID_REQUEST, "batch"},
                {4, MCP_INVALID_REQUEST, "jsonrpc"},
                {5, MCP_INVALID_REQUEST, "method"},
                {-1, MCP_INVALID_REQUEST, "id"},
                {7, MCP_INVALID_PARAMS, "params"},
                {8, MCP_INVALID_PARAMS, "params.name"},
                {9, MCP_INVALID_PARAMS, "unknown tool \"frobnicate\""},
                {10, MCP_INVALID_PARAMS, "arguments.argv: must be a non-empty array"},
                {11, MCP_INVALID_PARAMS, "arguments must be an object"},
                {-1, MCP_PARSE_ERROR, "longer than"},
                {-1, MCP_PARSE_ERROR, "duplicate"},
        };
        json_t *out = serve(in), *r, *id;

        (void)state;
        assert_int_equal(json_array_size(out), ARRAY_SIZE(want));
        for (size_t i = 0; i < ARRAY_SIZE(want); i++) {
                r = json_array_get(out, i);
                id = json_object_get(r, "id");
                if (want[i].id < 0)
                        assert_true(json_is_null(id));
                else
                        assert_int_equal(json_integer_value(id), want[i].id);
                assert_int_equal(error_code(r), want[i].code);
                if (!strstr(error_message(r), want[i].says))
                        fail_msg("reply %zu: \"%s\" lacks \"%s\"", i, error_message(r),
                                 want[i].says);
                assert_null(json_object_get(r, "result"));
        }
        json_decref(out);
}

/* The tools/list result: every tool of the brief, each with an object inputSchema whose
 * required names are properties, additionalProperties false, and annotations. */
static void test_tools_list(void **state)
{
        static const char *const in[] = {
                "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{}}",
                NULL,
        };
        static const char *const names[] = {
                "list_sessions",
                "describe_session",
                "create_session",
                "delete_session",
                "exec",
                "read_file",
                "write_file",
                "checkpoint_create",
                "checkpoint_list",
                "checkpoint_delete",
                "snapshot_create",
                "snapshot_list",
                "snapshot_delete",
                "restore",
                "fork",
                "rollback",
                "pause",
                "resume",
        };
        json_t *out = serve(in), *tools, *t, *schema, *v;
        size_t i, k;

        (void)state;
        tools = json_object_get(json_object_get(json_array_get(out, 0), "result"), "tools");
        assert_int_equal(json_array_size(tools), ARRAY_SIZE(names));
        json_array_foreach(tools, i, t)
        {
                assert_string_equal(json_string_value(json_object_get(t, "name")), names[i]);
                assert_true(json_string_length(json_object_get(t, "description")) > 20);
                schema = json_object_get(t, "inputSchema");
                assert_string_equal(json_string_value(json_object_get(schema, "type")), "object");
                assert_true(json_is_false(json_object_get(schema, "additionalProperties")));
                assert_true(json_is_object(json_object_get(schema, "properties")));
                json_array_foreach(json_object_get(schema, "required"), k, v)
                        assert_non_null(json_object_get(json_object_get(schema, "properties"),
                                                        json_string_value(v)));
                assert_true(json_is_boolean(
                        json_object_get(json_object_get(t, "annotations"), "readOnlyHint")));
                assert_non_null(mcp_tool_find(names[i]));
        }
        /* a few schemas in detail */
        t = mcp_tool_json(mcp_tool_find("exec"));
        schema = json_object_get(json_object_get(t, "inputSchema"), "properties");
        assert_string_equal(
                json_string_value(json_object_get(json_object_get(schema, "argv"), "type")),
                "array");
        assert_int_equal(json_integer_value(json_object_get(
                                 json_object_get(schema, "timeout_seconds"), "default")),
                         300);
        assert_non_null(json_object_get(json_object_get(schema, "session"), "pattern"));
        assert_int_equal(
                json_array_size(json_object_get(json_object_get(t, "inputSchema"), "required")), 2);
        json_decref(t);
        t = mcp_tool_json(mcp_tool_find("read_file"));
        schema = json_object_get(json_object_get(t, "inputSchema"), "properties");
        assert_int_equal(
                json_array_size(json_object_get(json_object_get(schema, "encoding"), "enum")), 2);
        json_decref(t);
        t = mcp_tool_json(mcp_tool_find("checkpoint_delete"));
        schema = json_object_get(json_object_get(t, "inputSchema"), "properties");
        assert_string_equal(
                json_string_value(json_object_get(json_object_get(schema, "cascade"), "type")),
                "boolean");
        assert_true(json_is_true(
                json_object_get(json_object_get(t, "annotations"), "destructiveHint")));
        json_decref(t);
        assert_null(mcp_tool_find("nope"));
        json_decref(out);
}

static void check_fails(const char *tool, const char *args, const char *says)
{
        json_t *a = json_loads(args, 0, NULL);
        char msg[400] = "";

        assert_non_null(a);
        assert_int_equal(mcp_tool_check_args(mcp_tool_find(tool), a, msg, sizeof(msg)), -EINVAL);
        if (!strstr(msg, says))
                fail_msg("%s %s: \"%s\" lacks \"%s\"", tool, args, msg, says);
        json_decref(a);
}

static void test_check_args(void **state)
{
        const struct mcp_tool *exec = mcp_tool_find("exec");
        char msg[400];
        json_t *a;

        (void)state;
        check_fails("exec", "{\"argv\":[\"true\"]}", "session: required");
        check_fails("exec", "{\"session\":\"Hello\",\"argv\":[\"true\"]}",
                    "session: \"Hello\" is not a valid name");
        check_fails("exec", "{\"session\":\"a/b\",\"argv\":[\"true\"]}", "not a valid name");
        check_fails("exec", "{\"session\":\"s\",\"argv\":[]}", "argv: must be a non-empty");
        check_fails("exec", "{\"session\":\"s\",\"argv\":[\"a\",2]}", "argv[1]: must be a string");
        check_fails("exec", "{\"session\":\"s\",\"argv\":[\"a\"],\"timeout_seconds\":-1}",
                    "timeout_seconds: -1 is out of range (0..86400)");
        check_fails("exec", "{\"session\":\"s\",\"argv\":[\"a\"],\"timeout_seconds\":\"5\"}",
                    "timeout_seconds: must be an integer");
        check_fails("exec", "{\"session\":\"s\",\"argv\":[\"a\"],\"shell\":true}",
                    "shell: unknown argument");
        check_fails("exec", "{\"session\":\"s\",\"argv\":[\"a\"],\"stdin\":5}",
                    "stdin: must be a string");
        check_fails("read_file", "{\"session\":\"s\",\"path\":\"/x\",\"encoding\":\"latin1\"}",
                    "encoding: \"latin1\" is not one of");
        check_fails("fork", "{\"session\":\"s\",\"checkpoint\":\"ck_1\",\"count\":0}",
                    "count: 0 is out of range (1..1000)");
        check_fails("create_session", "{\"manifest\":\"x\",\"wait_seconds\":true}",
                    "wait_seconds: must be an integer");

        a = json_pack("{s:s, s:[s, s], s:i}", "session", "hello", "argv", "uname", "-s",
                      "timeout_seconds", 10);
        assert_int_equal(mcp_tool_check_args(exec, a, msg, sizeof(msg)), 0);
        assert_int_equal(mcp_arg_int(exec, a, "timeout_seconds"), 10);
        assert_int_equal(mcp_arg_int(exec, a, "output_cap_bytes"), 1024 * 1024);
        assert_string_equal(mcp_arg_string(a, "namespace", "dflt"), "dflt");
        json_decref(a);
        /* no arguments at all: fine for list_sessions, not for exec */
        assert_int_equal(
                mcp_tool_check_args(mcp_tool_find("list_sessions"), NULL, msg, sizeof(msg)), 0);
        assert_int_equal(mcp_tool_check_args(exec, NULL, msg, sizeof(msg)), -EINVAL);
}

static void text_is(const char *in, size_t n, const char *want, bool want_lossy)
{
        bool lossy = !want_lossy;
        json_t *j = mcp_text_json(in, n, &lossy);

        assert_non_null(j);
        assert_int_equal(json_string_length(j), strlen(want));
        assert_memory_equal(json_string_value(j), want, strlen(want));
        assert_int_equal(lossy, want_lossy);
        json_decref(j);
}

#define TEXT_IS(in, want, lossy) text_is(in, sizeof(in) - 1, want, lossy)

static void test_text(void **state)
{
        (void)state;
        TEXT_IS("Linux\n", "Linux\n", false);
        TEXT_IS("gr\xc3\xbc\xc3\x9f \xe2\x82\xac \xf0\x9f\x90\xa7",
                "gr\xc3\xbc\xc3\x9f \xe2\x82\xac \xf0\x9f\x90\xa7", false);
        TEXT_IS("a\xff"
                "b",
                "a\xef\xbf\xbd"
                "b",
                true);
        TEXT_IS("\xc0\xaf", "\xef\xbf\xbd\xef\xbf\xbd", true);                 /* overlong '/' */
        TEXT_IS("\xed\xa0\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd", true); /* surrogate */
        TEXT_IS("\xe2\x82", "\xef\xbf\xbd\xef\xbf\xbd", true);                 /* cut short */
        TEXT_IS("\xf4\x90\x80\x80", "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd",
                true); /* past U+10FFFF */
        /* a NUL byte is text too (JSON escapes it) */
        json_t *j = mcp_text_json("nul\0byte", 8, NULL);
        assert_int_equal(json_string_length(j), 8);
        assert_memory_equal(json_string_value(j), "nul\0byte", 8);
        json_decref(j);
}

/* ---- the stdio transport over a pipe -------------------------------------------------------- */

struct writer {
        int fd;
        bool big;
};

static void *write_input(void *ud)
{
        struct writer *w = ud;
        static const char head[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\r\n"
                                   "\n"
                                   "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\n";
        static const char tail[] = "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}";
        char *junk;

        assert_int_equal(fk_write_all(w->fd, head, sizeof(head) - 1), 0);
        if (w->big) {
                /* one message over the limit, then the stream goes on */
                junk = malloc(MCP_MAX_MESSAGE + 2);
                assert_non_null(junk);
                memset(junk, 'x', MCP_MAX_MESSAGE + 1);
                junk[MCP_MAX_MESSAGE + 1] = '\n';
                assert_int_equal(fk_write_all(w->fd, junk, MCP_MAX_MESSAGE + 2), 0);
                free(junk);
        }
        assert_int_equal(fk_write_all(w->fd, tail, sizeof(tail) - 1), 0); /* no newline */
        close(w->fd);
        return NULL;
}

static void test_fd_transport(void **state)
{
        struct cli c = {.socket = "/nonexistent/api.sock", .namespace = "default"};
        int in[2], out[2];
        char *text = NULL;
        size_t size = 0;

        (void)state;
        for (int big = 0; big < 2; big++) {
                struct mcp_fd_transport ft;
                struct mcp_transport t;
                struct mcp_server s;
                struct writer w;
                pthread_t th;

                assert_int_equal(pipe2(in, O_CLOEXEC), 0);
                assert_int_equal(pipe2(out, O_CLOEXEC), 0);
                w = (struct writer){.fd = in[1], .big = big};
                assert_int_equal(pthread_create(&th, NULL, write_input, &w), 0);
                mcp_server_init(&s, &c);
                mcp_fd_transport_init(&ft, in[0], out[1], &t);
                assert_int_equal(mcp_serve(&s, &t), 0);
                mcp_fd_transport_done(&ft);
                pthread_join(th, NULL);
                close(in[0]);
                close(out[1]);
                assert_int_equal(fk_read_fd(out[0], 1 << 20, &text, &size), 0);
                close(out[0]);
                if (big)
                        assert_non_null(strstr(text, "\"code\":-32700"));
                assert_non_null(strstr(text, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n"
                                             "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\n"));
                assert_non_null(strstr(text, "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}\n"));
                free(text);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_initialize), cmocka_unit_test(test_protocol_errors),
                cmocka_unit_test(test_tools_list), cmocka_unit_test(test_check_args),
                cmocka_unit_test(test_text),       cmocka_unit_test(test_fd_transport),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
