/* SPDX-License-Identifier: MIT */
/* Test harness: a private single-member etcd (from the etcd-server package) on free loopback
 * ports and a temporary data dir; started, health-checked, killed by PID and removed. */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

struct etcd_server {
        pid_t pid;       /* 0 when not running */
        char dir[64];    /* mkdtemp() dir holding data/ and etcd.log */
        int client_port; /* 127.0.0.1 */
        int peer_port;
        char url[64]; /* http://127.0.0.1:<client_port> */
};

/* Path of the etcd binary or NULL if not installed. */
const char *etcd_server_binary(void);
/* A loopback TCP port nobody listens on right now (bound and released). */
int etcd_server_free_port(void);
/* Makes the data dir and picks ports. 0 or -errno. */
int etcd_server_init(struct etcd_server *s);
/* Starts etcd on s (same ports and data dir every time) and waits (bounded, 20 s) until /health
 * says true. 0, or -errno (the log is printed to stderr on failure). */
int etcd_server_start(struct etcd_server *s);
/* Kills etcd by PID with sig (SIGKILL: crash, SIGTERM: clean) and reaps it. */
void etcd_server_stop(struct etcd_server *s, int sig);
/* Stops etcd if running and removes the data dir. */
void etcd_server_cleanup(struct etcd_server *s);
/* POSTs body to url+path with curl and returns 0 if HTTP 200 (for calls the client does not
 * offer, like compaction). */
int etcd_server_post(struct etcd_server *s, const char *path, const char *body);
