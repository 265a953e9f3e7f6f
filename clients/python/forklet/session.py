# SPDX-License-Identifier: MIT
"""One session of a forkletd node: status, wait, exec, files, checkpoints, forks, rollback,
pause/resume and delete. A Session is a handle (a name); every call asks the API."""

import json
import time
import urllib.parse

from . import execstream
from .errors import APIError, SessionFailed, WaitTimeout

PHASES = ("Pending", "Starting", "Running", "Paused", "Stopped", "Failed", "Deleted")
WAIT_POLL_S = 0.5
ACTION_TIMEOUT_S = 180
# added to a socket timeout beyond what the server is asked to wait
SLACK_S = 60


class Session:
    """A session by name. applied says what the apply that returned it did ("created",
    "configured" or "unchanged"; None otherwise)."""

    def __init__(self, client, name, namespace="default", applied=None):
        self._client = client
        self.name = name
        self.namespace = namespace
        self.applied = applied

    def __repr__(self):
        return "Session(%s/%s)" % (self.namespace, self.name)

    def __eq__(self, other):
        return (isinstance(other, Session) and
                (self.namespace, self.name) == (other.namespace, other.name))

    def __hash__(self):
        return hash((self.namespace, self.name))

    def _path(self, suffix=""):
        return "/api/v1alpha1/namespaces/%s/sessions/%s%s" % (
            urllib.parse.quote(self.namespace, safe=""), urllib.parse.quote(self.name, safe=""),
            suffix)

    def _call(self, method, suffix="", body=None, timeout=None, ok=(200, 201)):
        data = None if body is None else json.dumps(body).encode("utf-8")
        t = self._client._transport
        r = t.request(method, self._path(suffix), data,
                      timeout=t.timeout if timeout is None else timeout, ok=ok)
        return json.loads(r.body.decode("utf-8")) if r.body else None

    # ---- reading ---------------------------------------------------------------------------

    def get(self):
        """The whole Session object: metadata, spec, status."""
        return self._call("GET")

    def status(self):
        """status: phase, conditions, vm, checkpoints, forks, forkOf, ..."""
        return self.get().get("status") or {}

    def phase(self):
        return self.status().get("phase")

    def logs(self, previous=False):
        """The tail of the serial console (bytes); previous: the boot before."""
        t = self._client._transport
        return t.request("GET", self._path("/log" + ("?previous=1" if previous else ""))).body

    def wait(self, phase="Running", timeout=300):
        """Polls until the session is in phase ("Deleted": until it is gone) and returns the
        object (None for Deleted). Raises WaitTimeout, or SessionFailed when it went Failed
        for good (restartPolicy OnFailure keeps waiting)."""
        if phase not in PHASES:
            raise ValueError("phase: unknown phase %r (%s)" % (phase, ", ".join(PHASES)))
        deadline = time.monotonic() + timeout
        seen = None
        while True:
            try:
                obj = self.get()
            except APIError as e:
                if e.status != 404:
                    raise
                if phase == "Deleted":
                    return None
                obj = None
            if obj is not None:
                seen = (obj.get("status") or {}).get("phase")
                if seen == phase:
                    return obj
                if seen == "Failed" and phase != "Deleted" and not _restarts(obj):
                    why = _ready_message(obj) or "no reason recorded"
                    raise SessionFailed("session/%s is Failed: %s" % (self.name, why), why)
            if time.monotonic() >= deadline:
                raise WaitTimeout("timed out after %gs waiting for session/%s to be %s (it is "
                                  "%s)" % (timeout, self.name, phase, seen or "not found"), seen)
            time.sleep(min(WAIT_POLL_S, max(0.0, deadline - time.monotonic())))

    # ---- running things in the guest -------------------------------------------------------

    def exec(self, argv, stdin=None, timeout=None, env=None, output_cap=None, detach=False):
        """Runs argv (a list of strings) in the guest and returns an ExecResult with stdout,
        stderr (bytes) and exit_code. stdin: bytes or str; timeout: seconds, then the guest
        process group is killed (result.timed_out); env: extra variables; output_cap: bytes
        kept per command; detach: start it in the background (result.pid).
        Raises APIError (404 unknown session, 409 not Running) or ExecError (not started:
        errno 2 for a missing binary)."""
        body = execstream.request_body(argv, stdin, timeout, env, output_cap, detach)
        # no socket timeout of our own unless the command has one: output may pause for long
        sock_timeout = None if timeout is None else timeout + SLACK_S
        t = self._client._transport
        with t.open("POST", self._path("/exec"), body, timeout=sock_timeout) as s:
            if s.status != 200:
                raise APIError.from_response(s.status, s.read(), s.reason)
            return execstream.decode(iter(s.readline, b""))

    def read_file(self, path):
        """The bytes of a guest file (absolute path, up to 64 MiB)."""
        q = urllib.parse.urlencode({"path": path})
        return self._client._transport.request("GET", self._path("/files?" + q)).body

    def write_file(self, path, data, mode=0o644):
        """Writes data (bytes or str) to a guest file (absolute path), replacing it."""
        if isinstance(data, str):
            data = data.encode("utf-8")
        q = urllib.parse.urlencode({"path": path, "mode": format(mode, "o")})
        self._client._transport.request("PUT", self._path("/files?" + q), bytes(data),
                                        content_type="application/octet-stream")

    # ---- the fork engine -------------------------------------------------------------------

    def checkpoint(self):
        """Takes a checkpoint of the running machine; returns its id ("ck_...")."""
        return self._call("POST", "/checkpoints", {})["id"]

    def checkpoints(self):
        """Every checkpoint: [{id, name, parent, createdNs, sizeBytes, ramBytes, ...}]."""
        return self._call("GET", "/checkpoints").get("items") or []

    def delete_checkpoint(self, checkpoint, cascade=False):
        """Deletes a checkpoint; refused (APIError 409) while forks depend on it, unless
        cascade, which deletes those forks too."""
        q = "?cascade=true" if cascade else ""
        self._call("DELETE", "/checkpoints/%s%s" % (urllib.parse.quote(checkpoint, safe=""), q))

    def fork(self, checkpoint, count=1):
        """count copies of the machine at checkpoint; returns their Sessions (NAME-fork-N),
        which boot in the background (wait("Running") on each)."""
        reply = self._call("POST", "/forks", {"from": checkpoint, "count": int(count)})
        return [Session(self._client, n, self.namespace) for n in reply.get("names") or []]

    def rollback(self, checkpoint):
        """Puts the session back to one of its own checkpoints, in place; returns once the
        restored machine runs."""
        self._call("POST", "/rollback", {"checkpoint": checkpoint})

    # ---- lifecycle -------------------------------------------------------------------------

    def _action(self, verb, wait, timeout):
        w = int(timeout) if wait else 0
        return self._call("POST", "/%s?wait=%d" % (verb, w),
                          timeout=(w + SLACK_S) if wait else None)

    def pause(self, wait=True, timeout=ACTION_TIMEOUT_S):
        """spec.state Paused (QEMU stopped, cgroup frozen); by default waits for Paused."""
        return self._action("pause", wait, timeout)

    def resume(self, wait=True, timeout=ACTION_TIMEOUT_S):
        """spec.state Running again; by default waits for Running."""
        return self._action("resume", wait, timeout)

    def stop(self, wait=True, timeout=ACTION_TIMEOUT_S):
        return self._action("stop", wait, timeout)

    def start(self, wait=True, timeout=ACTION_TIMEOUT_S):
        return self._action("start", wait, timeout)

    def delete(self, wait=False, timeout=300):
        """Deletes the session (the VM is stopped gracefully, its files removed in the
        background); wait: until it is gone. Deleting a gone session succeeds."""
        try:
            self._call("DELETE")
        except APIError as e:
            if e.status != 404:
                raise
        if wait:
            self.wait("Deleted", timeout)


def _restarts(obj):
    return (obj.get("spec") or {}).get("restartPolicy") == "OnFailure"


def _ready_message(obj):
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            return c.get("message")
    return None
