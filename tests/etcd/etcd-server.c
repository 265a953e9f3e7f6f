/* SPDX-License-Identifier: MIT */
/* Test harness: start/stop a private etcd on loopback ports with a temp data dir. */
#include "tests/etcd/etcd-server.h"
#include "common/util.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

const char *etcd_server_binary(void)
{
        static const char *const paths[] = {"/usr/bin/etcd", "/usr/local/bin/etcd"};

        for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
                if (access(paths[i], X_OK) == 0)
                        return paths[i];
        return NULL;
}

int etcd_server_free_port(void)
{
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof(sa);
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port = -errno;

        if (fd < 0)
                return port;
        if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
            getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
                port = ntohs(sa.sin_port);
        else
                port = -errno;
        close(fd);
        return port;
}

int etcd_server_init(struct etcd_server *s)
{
        *s = (struct etcd_server){};
        snprintf(s->dir, sizeof(s->dir), "/tmp/etcd-test-%d-XXXXXX", (int)getpid());
        if (!mkdtemp(s->dir))
                return -errno;
        s->client_port = etcd_server_free_port();
        s->peer_port = etcd_server_free_port();
        while (s->peer_port == s->client_port && s->peer_port > 0)
                s->peer_port = etcd_server_free_port();
        if (s->client_port < 0 || s->peer_port < 0)
                return -EADDRNOTAVAIL;
        snprintf(s->url, sizeof(s->url), "http://127.0.0.1:%d", s->client_port);
        return 0;
}

static void exec_etcd(struct etcd_server *s)
{
        char data[128], log[128], peer[64], cluster[96];
        int fd;

        snprintf(data, sizeof(data), "%s/data", s->dir);
        snprintf(log, sizeof(log), "%s/etcd.log", s->dir);
        snprintf(peer, sizeof(peer), "http://127.0.0.1:%d", s->peer_port);
        snprintf(cluster, sizeof(cluster), "t=%s", peer);
        /* Die with the test even if it crashes before its teardown. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
        if (fd >= 0) {
                dup2(fd, STDOUT_FILENO);
                dup2(fd, STDERR_FILENO);
        }
        execl(etcd_server_binary(), "etcd", "--name", "t", "--data-dir", data,
              "--listen-client-urls", s->url, "--advertise-client-urls", s->url,
              "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
              "--initial-cluster", cluster, "--initial-cluster-state", "new", (char *)NULL);
        _exit(127);
}

static size_t discard(char *p, size_t size, size_t n, void *userdata)
{
        char *buf = userdata;
        size_t len = strlen(buf), k = size * n;

        if (len + k < 256) {
                memcpy(buf + len, p, k);
                buf[len + k] = '\0';
        }
        return k;
}

static bool healthy(struct etcd_server *s)
{
        char url[96], body[256] = "";
        CURL *h = curl_easy_init();
        CURLcode rc;

        if (!h)
                return false;
        snprintf(url, sizeof(url), "%s/health", s->url);
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 1000L);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, body);
        rc = curl_easy_perform(h);
        curl_easy_cleanup(h);
        return rc == CURLE_OK && strstr(body, "\"health\":\"true\"");
}

static void dump_log(struct etcd_server *s)
{
        char path[128], *text = NULL;
        size_t n;

        snprintf(path, sizeof(path), "%s/etcd.log", s->dir);
        if (fk_read_file(path, 1 << 20, &text, &n) >= 0)
                fprintf(stderr, "---- %s ----\n%s\n----\n", path, text);
        free(text);
}

int etcd_server_start(struct etcd_server *s)
{
        pid_t pid = fork();

        if (pid < 0)
                return -errno;
        if (pid == 0)
                exec_etcd(s);
        s->pid = pid;
        for (int i = 0; i < 200; i++) {
                struct timespec ts = {0, 100 * 1000 * 1000};
                int status;

                if (healthy(s))
                        return 0;
                if (waitpid(pid, &status, WNOHANG) == pid) {
                        s->pid = 0;
                        dump_log(s);
                        return -ECHILD;
                }
                nanosleep(&ts, NULL);
        }
        dump_log(s);
        etcd_server_stop(s, SIGKILL);
        return -ETIMEDOUT;
}

void etcd_server_stop(struct etcd_server *s, int sig)
{
        if (s->pid <= 0)
                return;
        kill(s->pid, sig);
        while (waitpid(s->pid, NULL, 0) < 0 && errno == EINTR)
                ;
        s->pid = 0;
}

void etcd_server_cleanup(struct etcd_server *s)
{
        etcd_server_stop(s, SIGKILL);
        if (s->dir[0])
                fk_rm_rf(s->dir);
        s->dir[0] = '\0';
}

int etcd_server_post(struct etcd_server *s, const char *path, const char *body)
{
        char url[128], reply[256] = "";
        CURL *h = curl_easy_init();
        long status = 0;
        CURLcode rc;

        if (!h)
                return -ENOMEM;
        snprintf(url, sizeof(url), "%s%s", s->url, path);
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 5000L);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, reply);
        rc = curl_easy_perform(h);
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_cleanup(h);
        return rc == CURLE_OK && status == 200 ? 0 : -EIO;
}
