/* SPDX-License-Identifier: MIT */
/* Test harness: a loopback TCP proxy in front of etcd that the test can cut (close every
 * connection and refuse new ones) and restore, to disconnect a watch while etcd stays up. */
#pragma once

struct etcd_proxy;

/* Listens on a free 127.0.0.1 port forwarding to 127.0.0.1:target_port, on its own thread.
 * *ret owned by the caller (etcd_proxy_free()). 0 or -errno. */
int etcd_proxy_new(int target_port, struct etcd_proxy **ret);
/* "http://127.0.0.1:<port>" of the proxy; owned by it. */
const char *etcd_proxy_url(struct etcd_proxy *p);
/* Cuts (closes all connections, stops listening) or restores; returns once done. */
void etcd_proxy_set_up(struct etcd_proxy *p, int up);
/* Stops the thread, closes everything. Accepts NULL. */
void etcd_proxy_free(struct etcd_proxy *p);
