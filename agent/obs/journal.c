/* SPDX-License-Identifier: MIT */
/* The operation journal: <stateDir>/journal/<id>.json written before a multi-step operation
 * and removed after it; on restart each leftover entry goes to its op's recovery handler. */
#include "agent/obs/obs.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/util.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define JOURNAL_MAX_OPS  16
#define JOURNAL_MAX_SIZE (256 * 1024)

static struct {
        pthread_mutex_t lock;
        char op[JOURNAL_MAX_OPS][32];
        agent_journal_recover_fn fn[JOURNAL_MAX_OPS];
        size_t n;
} handlers = {.lock = PTHREAD_MUTEX_INITIALIZER};

int agent_journal_register(const char *op, agent_journal_recover_fn fn)
{
        int r = 0;

        if (!op || strlen(op) >= sizeof(handlers.op[0]) || !fn)
                return -EINVAL;
        pthread_mutex_lock(&handlers.lock);
        for (size_t i = 0; i < handlers.n; i++)
                if (strcmp(handlers.op[i], op) == 0) {
                        handlers.fn[i] = fn;
                        goto out;
                }
        if (handlers.n == JOURNAL_MAX_OPS) {
                r = -ENOSPC;
                goto out;
        }
        strcpy(handlers.op[handlers.n], op);
        handlers.fn[handlers.n++] = fn;
out:
        pthread_mutex_unlock(&handlers.lock);
        return r;
}

static agent_journal_recover_fn find_handler(const char *op)
{
        agent_journal_recover_fn fn = NULL;

        pthread_mutex_lock(&handlers.lock);
        for (size_t i = 0; i < handlers.n; i++)
                if (strcmp(handlers.op[i], op) == 0)
                        fn = handlers.fn[i];
        pthread_mutex_unlock(&handlers.lock);
        return fn;
}

static int journal_path(const char *state_dir, const char *id, char **ret)
{
        if (strchr(id, '/') || id[0] == '.')
                return -EINVAL;
        return fk_asprintf(ret, "%s/journal/%s.json", state_dir, id);
}

static int journal_write(const char *state_dir, const char *id, const char *op, const char *key,
                         json_t *data)
{
        cleanup_free char *dir = NULL, *path = NULL, *text = NULL;
        json_t *j;
        int r;

        j = json_pack("{s:s, s:s, s:s, s:I, s:o}", "id", id, "op", op, "key", key, "startedNs",
                      (json_int_t)fk_now_real_ns(), "data", data ? data : json_object());
        if (!j)
                return -ENOMEM;
        text = json_dumps(j, JSON_INDENT(2));
        json_decref(j);
        if (!text || fk_asprintf(&dir, "%s/journal", state_dir) < 0)
                return -ENOMEM;
        r = fk_mkdir_p(dir, 0700);
        if (r < 0)
                return r;
        r = journal_path(state_dir, id, &path);
        if (r < 0)
                return r;
        return fk_write_file_atomic(path, text, strlen(text), 0600);
}

int agent_journal_begin(const char *state_dir, const char *op, const char *key, json_t *data,
                        char **ret_id)
{
        cleanup_free char *id = NULL;
        uint8_t rnd[6];
        char hex[13];
        int r;

        r = fk_random_bytes(rnd, sizeof(rnd));
        if (r < 0) {
                json_decref(data);
                return r;
        }
        fk_hex(rnd, sizeof(rnd), hex);
        if (fk_asprintf(&id, "%s-%s-%s", op, key, hex) < 0) {
                json_decref(data);
                return -ENOMEM;
        }
        r = journal_write(state_dir, id, op, key, data);
        if (r < 0)
                return r;
        *ret_id = TAKE_PTR(id);
        return 0;
}

static int journal_read(const char *path, json_t **ret)
{
        cleanup_free char *buf = NULL;
        json_t *j;
        int r;

        r = fk_read_file(path, JOURNAL_MAX_SIZE, &buf, NULL);
        if (r < 0)
                return r;
        j = json_loads(buf, 0, NULL);
        if (!json_is_string(json_object_get(j, "op")) ||
            !json_is_string(json_object_get(j, "key"))) {
                json_decref(j);
                return -EBADMSG;
        }
        *ret = j;
        return 0;
}

int agent_journal_update(const char *state_dir, const char *id, json_t *data)
{
        cleanup_free char *path = NULL;
        json_t *old = NULL;
        int r;

        r = journal_path(state_dir, id, &path);
        if (r >= 0)
                r = journal_read(path, &old);
        if (r < 0) {
                json_decref(data);
                return r;
        }
        r = journal_write(state_dir, id, json_string_value(json_object_get(old, "op")),
                          json_string_value(json_object_get(old, "key")), data);
        json_decref(old);
        return r;
}

int agent_journal_end(const char *state_dir, const char *id)
{
        cleanup_free char *path = NULL;
        int r;

        r = journal_path(state_dir, id, &path);
        if (r < 0)
                return r;
        if (unlink(path) < 0 && errno != ENOENT)
                return -errno;
        return 0;
}

/* One leftover entry: hand it to its handler; drop it when done (or unknown and unreadable). */
static void recover_one(struct agent_daemon *d, const char *path)
{
        agent_journal_recover_fn fn;
        json_t *j = NULL;
        const char *op, *key;
        int r;

        r = journal_read(path, &j);
        if (r < 0) {
                log_warning_errno(r, "journal %s: unreadable, removing: %m", path);
                (void)unlink(path);
                return;
        }
        op = json_string_value(json_object_get(j, "op"));
        key = json_string_value(json_object_get(j, "key"));
        fn = find_handler(op);
        if (!fn) {
                log_warning("journal %s: no recovery for operation \"%s\" (kept)", path, op);
                json_decref(j);
                return;
        }
        r = fn(d, key, json_object_get(j, "data"));
        if (r < 0)
                log_warning_errno(r, "journal: %s of %s not recovered (kept): %m", op, key);
        else {
                log_info("journal: interrupted %s of %s recovered", op, key);
                (void)unlink(path);
        }
        json_decref(j);
}

void agent_journal_recover_all(struct agent_daemon *d, const char *state_dir)
{
        cleanup_free char *dir = NULL;
        struct dirent *de;
        DIR *dp;

        if (fk_asprintf(&dir, "%s/journal", state_dir) < 0)
                return;
        dp = opendir(dir);
        if (!dp)
                return;
        while ((de = readdir(dp))) {
                cleanup_free char *path = NULL;
                size_t n = strlen(de->d_name);

                if (de->d_name[0] == '.' || n < 6 || strcmp(de->d_name + n - 5, ".json") != 0)
                        continue;
                if (fk_asprintf(&path, "%s/%s", dir, de->d_name) >= 0)
                        recover_one(d, path);
        }
        closedir(dp);
}

char *agent_boot_journal_begin(const char *state_dir, const char *key, const char *run_dir)
{
        char *id = NULL;
        int r;

        r = agent_journal_begin(state_dir, "boot", key, json_pack("{s:s}", "runDir", run_dir), &id);
        if (r < 0) {
                log_warning_errno(r, "session %s: write boot journal: %m", key);
                return NULL;
        }
        return id;
}

void agent_boot_journal_end(const char *state_dir, const char *id)
{
        int r;

        if (!id)
                return;
        r = agent_journal_end(state_dir, id);
        if (r < 0)
                log_warning_errno(r, "remove journal entry %s: %m", id);
}
