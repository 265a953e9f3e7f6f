/* SPDX-License-Identifier: MIT */
/* spec.secrets values for one boot: read from node files or minted by the node's mintCommand
 * (argv + --session/--parent/--fork-id, stdout captured and size-capped, bounded in time). */
#include "agent/secrets/secrets.h"
#include "common/cleanup.h"
#include "common/util.h"

#include <errno.h>
#include <jansson.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

void agent_secret_set_done(struct agent_secret_set *s)
{
        for (size_t i = 0; s->v && i < s->n; i++) {
                if (s->v[i].value)
                        explicit_bzero(s->v[i].value, s->v[i].size);
                free(s->v[i].value);
        }
        free(s->v);
        *s = (struct agent_secret_set){0};
}

int agent_secrets_mint_argv(char *const *cmd, const char *key, const char *parent,
                            const char *fork_id, char ***ret)
{
        const char *tail[] = {"--session",          key,         "--parent",
                              parent ? parent : "", "--fork-id", fork_id ? fork_id : ""};
        char **v = NULL;

        if (fk_strv_copy(cmd, &v) < 0)
                return -ENOMEM;
        for (size_t i = 0; i < ARRAY_SIZE(tail); i++)
                if (fk_strv_push(&v, tail[i]) < 0) {
                        fk_strv_free(v);
                        return -ENOMEM;
                }
        *ret = v;
        return 0;
}

/* Reads the child's stdout until EOF, the cap or the deadline. */
static int read_capped(int fd, size_t max, uint64_t deadline, unsigned char *buf, size_t *len)
{
        for (;;) {
                uint64_t now = fk_now_mono_ns();
                struct pollfd p = {.fd = fd, .events = POLLIN};
                ssize_t n;
                int r;

                if (now >= deadline)
                        return -ETIMEDOUT;
                r = poll(&p, 1, (int)((deadline - now) / 1000000 + 1));
                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0)
                        return -errno;
                if (r == 0)
                        continue;
                n = read(fd, buf + *len, max + 1 - *len);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        return 0;
                *len += (size_t)n;
                if (*len > max)
                        return -EFBIG;
        }
}

static int spawn_piped(char *const *argv, int *ret_fd, pid_t *ret_pid)
{
        posix_spawn_file_actions_t fa;
        int p[2], r;

        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        posix_spawn_file_actions_adddup2(&fa, p[1], 1);
        r = -posix_spawn(ret_pid, argv[0], &fa, NULL, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        close(p[1]);
        if (r < 0) {
                close(p[0]);
                return r;
        }
        *ret_fd = p[0];
        return 0;
}

int agent_secrets_run(char *const *argv, size_t max, unsigned timeout_ms, unsigned char **ret,
                      size_t *ret_size, struct fk_error *err)
{
        uint64_t deadline = fk_now_mono_ns() + (uint64_t)timeout_ms * 1000000;
        cleanup_free unsigned char *buf = malloc(max + 1);
        cleanup_close int fd = -1;
        size_t len = 0;
        int r, status = 0;
        pid_t pid;

        if (!buf)
                return fk_error_set(err, -ENOMEM, "out of memory");
        r = spawn_piped(argv, &fd, &pid);
        if (r < 0)
                return fk_error_set(err, r, "run %s: %s", argv[0], strerror(-r));
        r = read_capped(fd, max, deadline, buf, &len);
        if (r < 0)
                (void)kill(pid, SIGKILL);
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        if (r == 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
                r = -EPROTO;
        if (r < 0) {
                explicit_bzero(buf, max + 1);
                return fk_error_set(err, r, "%s: %s", argv[0],
                                    r == -EFBIG       ? "printed more than the size cap"
                                    : r == -ETIMEDOUT ? "timed out"
                                    : r == -EPROTO    ? "failed (non-zero exit or signal)"
                                                      : strerror(-r));
        }
        if (len == 0)
                return fk_error_set(err, -ENODATA, "%s: printed nothing", argv[0]);
        *ret = TAKE_PTR(buf);
        *ret_size = len;
        return 0;
}

/* The file, with symlinks resolved, is a regular file under a resolved secrets.fileDirs entry
 * (the manifest check is lexical; a symlink must not lead out). */
static int check_file(const struct node_config *cfg, const char *file)
{
        cleanup_free char *real = realpath(file, NULL);
        struct stat st;

        if (!real)
                return -errno;
        if (stat(real, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EINVAL;
        for (size_t i = 0; cfg->secret_file_dirs && cfg->secret_file_dirs[i]; i++) {
                cleanup_free char *dir = realpath(cfg->secret_file_dirs[i], NULL);
                size_t n = dir ? strlen(dir) : 0;

                if (dir && (n == 1 || (strncmp(real, dir, n) == 0 && real[n] == '/')))
                        return 0;
        }
        return -EPERM;
}

static int resolve_one(const struct node_config *cfg, const struct secret_spec *sp, const char *key,
                       const char *parent, const char *fork_id, struct agent_secret *ret,
                       struct fk_error *err)
{
        char **argv = NULL, *buf = NULL;
        char msg[FK_ERROR_MSG_MAX];
        size_t size = 0;
        int r;

        snprintf(ret->name, sizeof(ret->name), "%s", sp->name);
        ret->minted = sp->mint;
        if (!sp->mint) {
                r = check_file(cfg, sp->file);
                if (r < 0)
                        return fk_error_set(err, r, "secret %s: %s: %s", sp->name, sp->file,
                                            r == -EPERM ? "resolves outside secrets.fileDirs"
                                                        : strerror(-r));
                r = fk_read_file(sp->file, AGENT_SECRET_MAX, &buf, &size);
                if (r < 0)
                        return fk_error_set(err, r, "secret %s: read %s: %s", sp->name, sp->file,
                                            r == -EFBIG ? "larger than the size cap"
                                                        : strerror(-r));
                ret->value = (unsigned char *)buf;
                ret->size = size;
                return 0;
        }
        if (!cfg->mint_command)
                return fk_error_set(err, -ENOEXEC, "secret %s: no secrets.mintCommand on this node",
                                    sp->name);
        if (agent_secrets_mint_argv(cfg->mint_command, key, parent, fork_id, &argv) < 0)
                return fk_error_set(err, -ENOMEM, "out of memory");
        r = agent_secrets_run(argv, AGENT_SECRET_MAX, AGENT_MINT_TIMEOUT_MS, &ret->value,
                              &ret->size, err);
        fk_strv_free(argv);
        if (r < 0) {
                snprintf(msg, sizeof(msg), "%s", err->msg);
                return fk_error_set(err, r, "secret %s: mint: %s", sp->name, msg);
        }
        return 0;
}

int agent_secrets_resolve(const struct node_config *cfg, const struct session_manifest *m,
                          const char *key, const char *parent, const char *fork_id,
                          struct agent_secret_set *ret, struct fk_error *err)
{
        struct agent_secret_set s = {0};
        int r;

        *ret = s;
        if (!m || m->n_secrets == 0)
                return 0;
        if (!(s.v = calloc(m->n_secrets, sizeof(*s.v))))
                return fk_error_set(err, -ENOMEM, "out of memory");
        for (; s.n < m->n_secrets; s.n++) {
                r = resolve_one(cfg, &m->secrets[s.n], key, parent, fork_id, &s.v[s.n], err);
                if (r < 0) {
                        s.n++;
                        agent_secret_set_done(&s);
                        return r;
                }
        }
        *ret = s;
        return 0;
}

json_t *agent_identity_ledger(const char *fork_id, const char *checkpoint,
                              const struct agent_secret_set *secrets, bool restored, bool reseeded)
{
        json_t *inh = json_array(), *minted = json_array();

        for (size_t i = 0; inh && minted && i < secrets->n; i++)
                /* a restore copies the parent's memory: a file secret is the same value */
                if (secrets->v[i].minted || restored)
                        json_array_append_new(secrets->v[i].minted ? minted : inh,
                                              json_string(secrets->v[i].name));
        return json_pack("{s:s?, s:s?, s:o*, s:o*, s:b}", "forkId", fork_id, "checkpoint",
                         checkpoint, "inheritedSecrets", inh, "mintedSecrets", minted,
                         "kernelReseeded", reseeded);
}
