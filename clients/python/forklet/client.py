# SPDX-License-Identifier: MIT
"""The entry point: a Client for one forkletd, over its unix socket or its TLS listener."""

import json
import urllib.parse

from .manifest import split_documents
from .session import Session
from .transport import Transport


class Client:
    """forkletd's API.

    socket: the API socket (default $FORKLET_SOCKET, else /run/forklet/api.sock).
    server: "https://HOST:PORT" of the TLS listener instead (default $FORKLET_SERVER), with
    token (the bearer token; or token_file=, default $FORKLET_TOKEN_FILE) and ca (the PEM CA
    that signed the server's certificate, default $FORKLET_CA, else the system store).
    namespace: of session(NAME). timeout: seconds per socket operation of plain requests.
    """

    def __init__(self, socket=None, server=None, token=None, ca=None, *, token_file=None,
                 namespace="default", timeout=300.0):
        self._transport = Transport(socket, server, token, ca, token_file, timeout)
        self.namespace = namespace

    def __repr__(self):
        return "Client(%s)" % self._transport.target

    def _get(self, path):
        return json.loads(self._transport.request("GET", path).body.decode("utf-8"))

    def version(self):
        """{version, apiVersion} of forkletd."""
        return self._get("/version")

    def node(self):
        """The node's capacity: what `forklet node -o json` prints."""
        return self._get("/api/v1alpha1/node")

    def apply(self, manifest):
        """Creates or updates sessions; returns their Sessions in order, each with .applied
        ("created", "configured" or "unchanged").

        manifest: YAML text (one or more Session documents, sent one per request as
        application/yaml, so forkletd's validator checks them and its messages name
        "manifest:LINE:COL" of this text), or a dict (a Session as JSON), or a list of
        dicts. An invalid manifest raises APIError 422 with every error in .details; the
        documents before it are applied."""
        if isinstance(manifest, str):
            docs = [(d.encode("utf-8"), "application/yaml") for _, d in
                    split_documents(manifest)]
            if not docs:
                raise ValueError("manifest: no document in the text")
        elif isinstance(manifest, dict):
            docs = [(json.dumps(manifest).encode("utf-8"), "application/json")]
        elif isinstance(manifest, (list, tuple)) and all(isinstance(m, dict) for m in manifest):
            docs = [(json.dumps(m).encode("utf-8"), "application/json") for m in manifest]
        else:
            raise TypeError("manifest: YAML text, a dict or a list of dicts is required")
        out = []
        for body, ctype in docs:
            r = self._transport.request("POST", "/api/v1alpha1/sessions", body,
                                        content_type=ctype)
            md = json.loads(r.body.decode("utf-8")).get("metadata") or {}
            out.append(Session(self, md.get("name"), md.get("namespace") or "default",
                               r.headers.get("X-Forklet-Apply")))
        return out

    def sessions(self, namespace=None):
        """Every session of the node (as `forklet get sessions`), or of one namespace."""
        path = "/api/v1alpha1/sessions"
        if namespace is not None:
            path = "/api/v1alpha1/namespaces/%s/sessions" % urllib.parse.quote(namespace, safe="")
        out = []
        for item in self._get(path).get("items") or []:
            md = item.get("metadata") or {}
            out.append(Session(self, md.get("name"), md.get("namespace") or "default"))
        return out

    def session(self, name, namespace=None):
        """A handle on session name (nothing is asked until it is used)."""
        return Session(self, name, namespace or self.namespace)
