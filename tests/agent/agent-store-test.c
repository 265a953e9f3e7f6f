/* SPDX-License-Identifier: MIT */
/* agent/store: a record survives a reopen, a schemaVersion it does not know stops it with a clear
 * error, a garbage file is kept and never overwritten, a failed write changes nothing and leaves
 * no temporary, a planted symlink is never followed, and the old layout is upgraded. */
#include "agent/store/store.h"
#include "common/cleanup.h"
#include "common/error.h"
#include "common/util.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

static char dir[64];
static char state[96], run[96];

static int setup(void **s)
{
        (void)s;
        strcpy(dir, "/tmp/fk-store-XXXXXX");
        if (!mkdtemp(dir))
                return -1;
        snprintf(state, sizeof(state), "%s/state", dir);
        snprintf(run, sizeof(run), "%s/run", dir);
        return fk_mkdir_p(state, 0700) < 0 || fk_mkdir_p(run, 0700) < 0 ? -1 : 0;
}

static int teardown(void **s)
{
        (void)s;
        return fk_rm_rf(dir);
}

static char *path_of(const char *rel)
{
        char *p = NULL;

        assert_true(fk_asprintf(&p, "%s/%s", dir, rel) > 0);
        return p;
}

static void put(const char *rel, const char *text)
{
        cleanup_free char *p = path_of(rel), *d = strdup(p);

        *strrchr(d, '/') = '\0';
        assert_int_equal(fk_mkdir_p(d, 0700), 0);
        assert_int_equal(fk_write_file_atomic(p, text, strlen(text), 0600), 0);
}

static bool exists(const char *rel)
{
        cleanup_free char *p = path_of(rel);
        struct stat st;

        return lstat(p, &st) == 0;
}

/* Entries of the session dir whose name starts with ".state.json." (temporaries). */
static int temps(const char *key)
{
        cleanup_free char *p = NULL;
        struct dirent *de;
        int n = 0;
        DIR *dp;

        assert_true(fk_asprintf(&p, "%s/state/sessions/%s", dir, key) > 0);
        dp = opendir(p);

        while (dp && (de = readdir(dp)))
                n += strncmp(de->d_name, ".state.json.", 12) == 0;
        if (dp)
                closedir(dp);
        return n;
}

static void test_round_trip(void **s)
{
        struct fk_error err = {0};
        struct agent_store *st = NULL;
        struct stat sb;
        json_t *v;
        char *text = NULL, **keys = NULL;

        (void)s;
        assert_int_equal(agent_store_open(state, run, &st, &err), 0);
        assert_int_equal(agent_store_set(st, "default.a", AGENT_STORE_VM,
                                         json_pack("{s:i, s:I}", "pid", 42, "startTime", 7), &err),
                         0);
        assert_int_equal(agent_store_set_string(st, "default.a", AGENT_STORE_LINEAGE, "ck_1", &err),
                         0);
        assert_int_equal(
                agent_store_set_string(st, "default.a", AGENT_STORE_DISK, "w-1.qcow2", &err), 0);
        assert_int_equal(agent_store_set(st, "default.a", AGENT_STORE_SESSION,
                                         json_pack("{s:i}", "generation", 3), &err),
                         0);
        assert_int_equal(agent_store_set(st, "default.a", AGENT_STORE_LINEAGE, NULL, &err), 0);
        st = agent_store_free(st);

        assert_int_equal(agent_store_open(state, run, &st, &err), 0);
        v = agent_store_get(st, "default.a", AGENT_STORE_VM);
        assert_int_equal(json_integer_value(json_object_get(v, "pid")), 42);
        json_decref(v);
        assert_null(agent_store_get(st, "default.a", AGENT_STORE_LINEAGE));
        text = agent_store_get_string(st, "default.a", AGENT_STORE_DISK);
        assert_string_equal(text, "w-1.qcow2");
        free(text);
        assert_true(agent_store_keeps(st, "default.a")); /* it holds a session */
        assert_false(agent_store_keeps(st, "default.nope"));
        assert_int_equal(agent_store_keys(st, &keys), 0);
        assert_string_equal(keys[0], "default.a");
        assert_null(keys[1]);
        fk_strv_free(keys);
        agent_store_forget(st, "default.a");
        assert_null(agent_store_get(st, "default.a", AGENT_STORE_VM));
        st = agent_store_free(st);

        cleanup_free char *p = path_of("state/sessions/default.a/state.json");
        assert_int_equal(stat(p, &sb), 0);
        assert_int_equal(sb.st_mode & 07777, 0600);
        assert_int_equal(fk_read_file(p, 1 << 20, &text, NULL), 0);
        v = json_loads(text, 0, NULL);
        free(text);
        assert_int_equal(json_integer_value(json_object_get(v, "schemaVersion")), 1);
        assert_string_equal(json_string_value(json_object_get(v, "key")), "default.a");
        json_decref(v);
        assert_int_equal(temps("default.a"), 0);
}

static void test_decode(void **s)
{
        static const struct {
                const char *text;
                int r;
                const char *msg;
        } cases[] = {
                {"{\"schemaVersion\": 1, \"lineage\": \"ck_1\"}", 0, NULL},
                {"{\"schemaVersion\": 2}", -EPROTO,
                 "schemaVersion 2 is not one this forkletd knows"},
                {"{\"schemaVersion\": \"1\"}", -EPROTO, "schemaVersion ?"},
                {"{\"lineage\": \"ck_1\"}", -EINVAL, "no schemaVersion"},
                {"{\"schemaVersion\": 1, \"vm\": 3}", -EINVAL, "vm: must be an object"},
                {"{\"schemaVersion\": 1, \"disk\": \"../x\"}", -EINVAL,
                 "disk: must be a file name"},
                {"{\"schemaVersion\": 1, \"restored\": {}}", -EINVAL, "restored: must be a string"},
                {"{\"schemaVersion\": 1, \"sess", -EINVAL, "line 1"},
                {"", -EINVAL, "line"},
                {"[1]", -EINVAL, "no schemaVersion"},
        };

        (void)s;
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct fk_error err = {0};
                json_t *j = NULL;
                int r = agent_store_decode(cases[i].text, strlen(cases[i].text), &j, &err);

                assert_int_equal(r, cases[i].r);
                if (cases[i].msg)
                        assert_non_null(strstr(err.msg, cases[i].msg));
                else
                        assert_non_null(j);
                json_decref(j);
        }
}

static void test_unknown_version_refused(void **s)
{
        struct fk_error err = {0};
        struct agent_store *st = NULL;

        (void)s;
        put("state/sessions/default.new/state.json", "{\"schemaVersion\": 7, \"key\": \"x\"}");
        assert_int_equal(agent_store_open(state, run, &st, &err), -EPROTO);
        assert_null(st);
        assert_non_null(strstr(err.msg, "default.new/state.json: schemaVersion 7"));
        assert_non_null(strstr(err.msg, "run the forkletd that wrote it"));
        assert_true(exists("state/sessions/default.new/state.json")); /* untouched */
}

/* A record that cannot be parsed (torn by hand, garbage) is kept: no session, never rewritten. */
static void test_garbage_kept(void **s)
{
        const char *torn = "{\"schemaVersion\": 1, \"sess";
        struct fk_error err = {0};
        struct agent_store *st = NULL;
        cleanup_free char *p = path_of("state/sessions/default.torn/state.json");
        char *text = NULL;

        (void)s;
        put("state/sessions/default.torn/state.json", torn);
        put("state/sessions/default.torn/.state.json.0123456789abcdef", "left by a crash");
        assert_int_equal(agent_store_open(state, run, &st, &err), 0);
        assert_int_equal(temps("default.torn"), 0);
        assert_true(agent_store_keeps(st, "default.torn"));
        assert_null(agent_store_get(st, "default.torn", AGENT_STORE_SESSION));
        assert_int_equal(
                agent_store_set_string(st, "default.torn", AGENT_STORE_LINEAGE, "ck", &err),
                -AGENT_STORE_EFAIL);
        assert_non_null(strstr(err.msg, "could not be read at start; repair or remove it"));
        agent_store_free(st);
        assert_int_equal(fk_read_file(p, 1024, &text, NULL), 0);
        assert_string_equal(text, torn);
        free(text);
}

/* The write fails (state.json is a directory here): memory keeps what the disk has, and no
 * temporary stays behind. */
static void test_failed_write_changes_nothing(void **s)
{
        struct fk_error err = {0};
        struct agent_store *st = NULL;
        cleanup_free char *p = path_of("state/sessions/default.f/state.json");
        char *v;

        (void)s;
        assert_int_equal(agent_store_open(state, run, &st, &err), 0);
        assert_int_equal(
                agent_store_set_string(st, "default.f", AGENT_STORE_LINEAGE, "ck_old", &err), 0);
        assert_int_equal(unlink(p), 0);
        assert_int_equal(mkdir(p, 0700), 0);
        assert_int_equal(
                agent_store_set_string(st, "default.f", AGENT_STORE_LINEAGE, "ck_new", &err),
                -AGENT_STORE_EFAIL);
        assert_non_null(strstr(err.msg, "store session default.f: write "));
        assert_non_null(strstr(err.msg, strerror(EISDIR)));
        v = agent_store_get_string(st, "default.f", AGENT_STORE_LINEAGE);
        assert_string_equal(v, "ck_old");
        free(v);
        assert_int_equal(temps("default.f"), 0);
        agent_store_free(st);
}

/* Symlinks planted where the store writes: one at state.json is replaced, never written
 * through; a session dir that is a symlink is refused. */
static void test_no_symlink_followed(void **s)
{
        struct fk_error err = {0};
        struct agent_store *st = NULL;
        cleanup_free char *victim = path_of("victim"), *away = path_of("away");
        cleanup_free char *at = path_of("state/sessions/default.l/state.json");
        cleanup_free char *sd = path_of("state/sessions/default.m");
        char *text = NULL;
        struct stat sb;

        (void)s;
        put("victim", "precious");
        put("state/sessions/default.l/keep", "x");
        assert_int_equal(agent_store_open(state, run, &st, &err), 0);
        assert_int_equal(symlink(victim, at), 0);
        assert_int_equal(mkdir(away, 0700), 0);
        assert_int_equal(symlink(away, sd), 0);
        assert_int_equal(agent_store_set_string(st, "default.l", AGENT_STORE_LINEAGE, "ck", &err),
                         0);
        assert_int_equal(lstat(at, &sb), 0);
        assert_true(S_ISREG(sb.st_mode));
        assert_int_equal(fk_read_file(victim, 64, &text, NULL), 0);
        assert_string_equal(text, "precious");
        free(text);
        assert_int_equal(agent_store_set_string(st, "default.m", AGENT_STORE_LINEAGE, "ck", &err),
                         -AGENT_STORE_EFAIL);
        assert_false(exists("away/state.json"));
        assert_int_equal(agent_store_set_string(st, "../escape", AGENT_STORE_LINEAGE, "ck", &err),
                         -AGENT_STORE_EFAIL);
        agent_store_free(st);
}

static void test_upgrade(void **s)
{
        struct fk_error err = {0};
        struct agent_store *st = NULL;
        json_t *v;
        char *t;

        (void)s;
        put("state/sessions/default.old/session.json",
            "{\"manifest\": {\"kind\": \"Session\"}, \"generation\": 4, \"source\": \"api\"}");
        put("state/sessions/default.old/identity.json", "{\"forkId\": \"old.1\"}");
        put("state/sessions/default.old/restored", "old.1");
        put("state/sessions/default.old/lineage", "ck_9\n");
        put("state/sessions/default.old/disk/active", "workspace-2.qcow2");
        put("run/sessions/default.old/vm.json", "{\"pid\": 4242, \"startTime\": 99}");
        /* a vm.json that is a symlink (the jail uid owns the run dir) is not believed */
        put("state/sessions/default.link/lineage", "ck_1");
        put("elsewhere.json", "{\"pid\": 1}");
        cleanup_free char *rl = path_of("run/sessions/default.link");
        assert_int_equal(fk_mkdir_p(rl, 0700), 0);
        cleanup_free char *link = path_of("run/sessions/default.link/vm.json");
        cleanup_free char *target = path_of("elsewhere.json");
        assert_int_equal(symlink(target, link), 0);
        /* an unreadable session.json: not upgraded, its files stay for the operator */
        put("state/sessions/default.bad/session.json", "{not json");

        assert_int_equal(agent_store_open(state, run, &st, &err), 0);
        v = agent_store_get(st, "default.old", AGENT_STORE_SESSION);
        assert_int_equal(json_integer_value(json_object_get(v, "generation")), 4);
        json_decref(v);
        v = agent_store_get(st, "default.old", AGENT_STORE_VM);
        assert_int_equal(json_integer_value(json_object_get(v, "pid")), 4242);
        json_decref(v);
        v = agent_store_get(st, "default.old", AGENT_STORE_IDENTITY);
        assert_string_equal(json_string_value(json_object_get(v, "forkId")), "old.1");
        json_decref(v);
        t = agent_store_get_string(st, "default.old", AGENT_STORE_LINEAGE);
        assert_string_equal(t, "ck_9");
        free(t);
        t = agent_store_get_string(st, "default.old", AGENT_STORE_DISK);
        assert_string_equal(t, "workspace-2.qcow2");
        free(t);
        t = agent_store_get_string(st, "default.old", AGENT_STORE_RESTORED);
        assert_string_equal(t, "old.1");
        free(t);
        assert_null(agent_store_get(st, "default.link", AGENT_STORE_VM));
        assert_true(agent_store_keeps(st, "default.bad")); /* kept, never written */
        assert_null(agent_store_get(st, "default.bad", AGENT_STORE_SESSION));
        agent_store_free(st);

        assert_true(exists("state/sessions/default.old/state.json"));
        assert_true(exists("state/sessions/default.link/state.json"));
        assert_true(exists("elsewhere.json"));
        for (const char *const *f =
                     (const char *const[]){"session.json", "identity.json", "restored", "lineage",
                                           "disk/active", NULL};
             *f; f++) {
                cleanup_free char *rel = NULL;

                assert_true(fk_asprintf(&rel, "state/sessions/default.old/%s", *f) > 0);
                assert_false(exists(rel));
        }
        assert_false(exists("run/sessions/default.old/vm.json"));
        assert_false(exists("run/sessions/default.link/vm.json"));
        assert_true(exists("state/sessions/default.bad/session.json"));
        assert_false(exists("state/sessions/default.bad/state.json"));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
                cmocka_unit_test(test_decode),
                cmocka_unit_test_setup_teardown(test_unknown_version_refused, setup, teardown),
                cmocka_unit_test_setup_teardown(test_garbage_kept, setup, teardown),
                cmocka_unit_test_setup_teardown(test_failed_write_changes_nothing, setup, teardown),
                cmocka_unit_test_setup_teardown(test_no_symlink_followed, setup, teardown),
                cmocka_unit_test_setup_teardown(test_upgrade, setup, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
