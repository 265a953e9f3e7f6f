/* SPDX-License-Identifier: MIT */
/* forklet image list [-o json] | inspect IMAGE | rm IMAGE: the node's OCI images (IMAGE is a
 * reference or 12+ hex digits of a digest). pull is cli/image-pull.c. */
#include "cli/cli.h"
#include "common/cleanup.h"
#include "common/util.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

int cli_parse_image(int argc, char **argv, struct cli_image_args *ret, struct fk_error *err)
{
        struct cli_image_args a = {0};
        int pos = 0;

        for (int i = 1; i < argc; i++) {
                if (strcmp(argv[i], "-o") == 0 && i + 1 < argc) {
                        if (strcmp(argv[++i], "json") != 0)
                                return fk_error_set(err, -EINVAL,
                                                    "image: -o: unknown format \"%s\" (json)",
                                                    argv[i]);
                        a.json = true;
                } else if (argv[i][0] == '-' && argv[i][1]) {
                        return fk_error_set(err, -EINVAL, "image: unknown option \"%s\"", argv[i]);
                } else if (pos == 0) {
                        a.verb = argv[i], pos++;
                } else if (pos == 1) {
                        a.image = argv[i], pos++;
                } else {
                        return fk_error_set(err, -EINVAL, "image: unexpected argument \"%s\"",
                                            argv[i]);
                }
        }
        if (!a.verb || (strcmp(a.verb, "list") != 0 && strcmp(a.verb, "pull") != 0 &&
                        strcmp(a.verb, "inspect") != 0 && strcmp(a.verb, "rm") != 0))
                return fk_error_set(err, -EINVAL, "image: expected list, pull, inspect or rm%s%s%s",
                                    a.verb ? " (got \"" : "", a.verb ? a.verb : "",
                                    a.verb ? "\")" : "");
        if ((strcmp(a.verb, "list") == 0) != !a.image)
                return fk_error_set(err, -EINVAL, "image %s: %s", a.verb,
                                    a.image ? "takes no IMAGE"
                                            : "IMAGE is required (a reference "
                                              "or a digest)");
        *ret = a;
        return 0;
}

static json_t *get_json(const struct cli *c, const char *method, const char *path, const char *what)
{
        struct cli_response resp = {0};
        struct fk_error err = {0};
        json_t *j = NULL;

        if (cli_request(c, method, path, NULL, &resp, &err) < 0) {
                fprintf(stderr, "forklet %s: %s\n", what, err.msg);
                return NULL;
        }
        if (resp.status / 100 == 2)
                j = json_loads(resp.body, 0, NULL);
        if (!j)
                cli_print_api_error(what, &resp);
        cli_response_done(&resp);
        return j;
}

static void print_list(const json_t *items)
{
        json_t *it, *r;
        size_t i, k;

        printf("%-14s %-10s %-8s %s\n", "ID", "SIZE", "USERS", "REFERENCES");
        json_array_foreach(items, i, it)
        {
                const char *d = json_string_value(json_object_get(it, "digest"));
                double mib = (double)json_integer_value(json_object_get(it, "rootfsBytes")) /
                             (1024.0 * 1024.0);

                printf("%-14.12s %7.1fMiB %-8zu", d && strlen(d) > 7 ? d + 7 : "?", mib,
                       json_array_size(json_object_get(it, "usedBy")));
                json_array_foreach(json_object_get(it, "references"), k, r)
                        printf("%s%s", k ? ", " : " ", json_string_value(r));
                printf("\n");
        }
}

/* The store id of image (a reference as the list names it, or a digest prefix). */
static int image_id(const struct cli *c, const char *image, char *ret, size_t size)
{
        json_t *list = get_json(c, "GET", "/api/v1alpha1/images", "image"), *it, *r;
        const char *found = NULL;
        size_t i, k;

        if (!list)
                return -EIO;
        json_array_foreach(json_object_get(list, "items"), i, it)
        {
                json_array_foreach(json_object_get(it, "references"), k, r)
                {
                        if (strcmp(json_string_value(r), image) == 0)
                                found = json_string_value(json_object_get(it, "digest"));
                }
        }
        snprintf(ret, size, "%s", found ? found + 7 : image);
        if (strncmp(ret, "sha256:", 7) == 0)
                memmove(ret, ret + 7, strlen(ret + 7) + 1);
        json_decref(list);
        return 0;
}

int cli_image(const struct cli *c, int argc, char **argv)
{
        struct cli_image_args a;
        struct fk_error err = {0};
        cleanup_free char *path = NULL, *text = NULL;
        char id[80];
        json_t *j;

        if (cli_parse_image(argc, argv, &a, &err) < 0) {
                fprintf(stderr, "forklet %s\n", err.msg);
                return CLI_EXIT_USAGE;
        }
        if (strcmp(a.verb, "pull") == 0)
                return cli_image_pull(c, a.image);
        if (strcmp(a.verb, "list") == 0) {
                j = get_json(c, "GET", "/api/v1alpha1/images", "image list");
                if (j && !a.json)
                        print_list(json_object_get(j, "items"));
        } else {
                if (image_id(c, a.image, id, sizeof(id)) < 0 ||
                    fk_asprintf(&path, "/api/v1alpha1/images/%s", id) < 0)
                        return CLI_EXIT_FAILURE;
                j = get_json(c, strcmp(a.verb, "rm") == 0 ? "DELETE" : "GET", path,
                             strcmp(a.verb, "rm") == 0 ? "image rm" : "image inspect");
                if (j && strcmp(a.verb, "rm") == 0 && !a.json)
                        printf("image %s deleted\n",
                               json_string_value(json_object_get(j, "digest")));
        }
        if (j && (a.json || strcmp(a.verb, "inspect") == 0) &&
            (text = json_dumps(j, JSON_INDENT(2))))
                puts(text);
        json_decref(j);
        return j ? CLI_EXIT_OK : CLI_EXIT_FAILURE;
}
