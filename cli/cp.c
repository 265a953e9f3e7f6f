/* SPDX-License-Identifier: MIT */
/* forklet cp NAME:/PATH LOCAL | LOCAL NAME:/PATH: copies one file between the host and a
 * Running session's guest (binary-safe, up to 64 MiB); LOCAL "-" is stdin/stdout. */
#include "cli/cli.h"
#include "common/cleanup.h"
#include "common/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CP_MAX (64u * 1024 * 1024)

static int read_local(const char *path, char **ret, size_t *ret_size, unsigned *ret_mode)
{
        cleanup_close int fd = -1;
        struct stat st;

        fd = strcmp(path, "-") == 0 ? dup(STDIN_FILENO) : open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        *ret_mode = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? st.st_mode & 07777 : 0644;
        return fk_read_fd(fd, CP_MAX, ret, ret_size);
}

static int write_local(const char *path, const void *data, size_t size)
{
        if (strcmp(path, "-") == 0)
                return fk_write_all(STDOUT_FILENO, data, size);
        return fk_write_file_atomic(path, data, size, 0644);
}

static int cp_request(const struct cli *c, const struct cli_cp_args *a, struct cli_response *resp,
                      struct fk_error *err)
{
        cleanup_free char *esc = NULL, *suffix = NULL, *path = NULL, *data = NULL;
        unsigned mode = 0644;
        size_t size = 0;
        int r;

        if (cli_url_escape(a->guest, &esc) < 0)
                return fk_error_set(err, -ENOMEM, "out of memory");
        if (a->upload) {
                r = read_local(a->local, &data, &size, &mode);
                if (r < 0)
                        return fk_error_set(err, r, "read %s: %s", a->local,
                                            r == -EFBIG ? "larger than 64 MiB" : strerror(-r));
        }
        if (fk_asprintf(&suffix, "/files?path=%s&mode=%o", esc, mode) < 0 ||
            cli_session_path(c, a->session, suffix, &path) < 0)
                return fk_error_set(err, -ENOMEM, "out of memory");
        if (a->upload)
                return cli_request_raw(c, "PUT", path, data, size, resp, err);
        return cli_request(c, "GET", path, NULL, resp, err);
}

int cli_cp(const struct cli *c, int argc, char **argv)
{
        struct cli_response resp = {0};
        struct cli_cp_args a = {0};
        struct fk_error err = {0};
        int r, ret = CLI_EXIT_OK;

        if (cli_parse_cp(argc, argv, &a, &err) < 0) {
                fprintf(stderr, "forklet %s\n", err.msg);
                return CLI_EXIT_USAGE;
        }
        if (cp_request(c, &a, &resp, &err) < 0) {
                fprintf(stderr, "forklet cp: %s\n", err.msg);
                return CLI_EXIT_FAILURE;
        }
        if (resp.status != 200) {
                cli_print_api_error("forklet cp", &resp);
                ret = CLI_EXIT_FAILURE;
        } else if (!a.upload && (r = write_local(a.local, resp.body ?: "", resp.size)) < 0) {
                fprintf(stderr, "forklet cp: write %s: %s\n", a.local, strerror(-r));
                ret = CLI_EXIT_FAILURE;
        }
        cli_response_done(&resp);
        return ret;
}
