# SPDX-License-Identifier: MIT
"""HTTP to forkletd: its unix socket, or its TLS listener with a bearer token.

One connection per request (http.client), so a Client may be shared between threads.
"""

import http.client
import os
import socket as _socket
import ssl
import urllib.parse

from .errors import APIError, TransportError

DEFAULT_SOCKET = "/run/forklet/api.sock"
DEFAULT = object()  # "the transport's timeout", where None means no timeout


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self):
        s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            s.settimeout(self.timeout)
            s.connect(self._path)
        except BaseException:
            s.close()
            raise
        self.sock = s


class Response:
    """A whole reply: status, headers (a Message), body (bytes)."""

    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body


def _read_token(path):
    try:
        with open(path, "r", encoding="utf-8") as f:
            token = f.read().strip()
    except OSError as e:
        raise ValueError("token_file %s: %s" % (path, e.strerror)) from None
    if not token or any(c.isspace() for c in token):
        raise ValueError("token_file %s: empty or not one token" % path)
    return token


class Transport:
    """Where requests go. Explicit arguments win; then $FORKLET_SERVER (with
    $FORKLET_TOKEN_FILE and $FORKLET_CA), then $FORKLET_SOCKET, then DEFAULT_SOCKET."""

    def __init__(self, socket=None, server=None, token=None, ca=None, token_file=None,
                 timeout=300.0):
        env = os.environ
        if socket is None and server is None and env.get("FORKLET_SERVER"):
            server = env["FORKLET_SERVER"]
        self.timeout = timeout
        self.server = server
        self.socket = None
        if server is None:
            self.socket = socket or env.get("FORKLET_SOCKET") or DEFAULT_SOCKET
            return
        u = urllib.parse.urlsplit(server)
        if u.scheme != "https" or not u.hostname:
            raise ValueError("server %s: expected https://HOST:PORT (the API is only served "
                             "to other hosts over TLS)" % server)
        self._host, self._port = u.hostname, u.port or 443
        if token is None:
            token_file = token_file or env.get("FORKLET_TOKEN_FILE")
            if not token_file:
                raise ValueError("server %s: the TCP API needs a bearer token: token=, "
                                 "token_file= or $FORKLET_TOKEN_FILE" % server)
            token = _read_token(token_file)
        self._token = token
        ca = ca or env.get("FORKLET_CA") or None
        # the CA's signature and the host name (an IP SAN for an address); else the system store
        self._ssl = ssl.create_default_context(cafile=ca)
        self._ssl.minimum_version = ssl.TLSVersion.TLSv1_2

    @property
    def target(self):
        """The socket path or the server URL, for messages."""
        return self.server or self.socket

    def _connection(self, timeout):
        if self.server is None:
            return _UnixConnection(self.socket, timeout)
        return http.client.HTTPSConnection(self._host, self._port, timeout=timeout,
                                           context=self._ssl)

    def _unreachable(self, e):
        hint = ("server=, ca= and token= select the server and its credentials" if self.server
                else "socket= or $FORKLET_SOCKET selects the socket")
        return TransportError("cannot reach forkletd at %s: %s (is it running? %s)"
                              % (self.target, e, hint))

    def open(self, method, path, body=None, content_type="application/json",
             timeout=DEFAULT):
        """Sends one request and returns the open Stream (the caller reads and closes it).
        timeout: seconds per socket operation, None: none; by default the transport's.
        Raises TransportError when forkletd cannot be reached."""
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        if self.server is not None:
            headers["Authorization"] = "Bearer " + self._token
        conn = self._connection(self.timeout if timeout is DEFAULT else timeout)
        try:
            conn.request(method, path, body=body, headers=headers)
            resp = conn.getresponse()
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise self._unreachable(e) from None
        return Stream(self, conn, resp)

    def request(self, method, path, body=None, content_type="application/json",
                timeout=DEFAULT, ok=(200, 201)):
        """One whole request; a status outside ok raises APIError with the API's message."""
        with self.open(method, path, body, content_type, timeout) as s:
            data = s.read()
        if s.status not in ok:
            raise APIError.from_response(s.status, data, s.reason)
        return Response(s.status, s.headers, data)


class Stream:
    """An open reply read as it arrives (chunked bodies are decoded by http.client)."""

    def __init__(self, transport, conn, resp):
        self._transport, self._conn, self._resp = transport, conn, resp
        self.status, self.reason, self.headers = resp.status, resp.reason, resp.headers

    def readline(self):
        """The next line (with its newline), b"" at the end."""
        try:
            return self._resp.readline()
        except (OSError, http.client.HTTPException) as e:
            raise self._transport._unreachable(e) from None

    def read(self):
        try:
            return self._resp.read()
        except (OSError, http.client.HTTPException) as e:
            raise self._transport._unreachable(e) from None

    def close(self):
        self._resp.close()
        self._conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
