# SPDX-License-Identifier: MIT
"""The exceptions the client raises: every failure is a ForkletError."""

import json


class ForkletError(Exception):
    """Base class of every error this package raises."""


class TransportError(ForkletError):
    """forkletd could not be reached (no socket, connection refused, TLS verification...)."""


class APIError(ForkletError):
    """forkletd answered with an error status.

    status: the HTTP status (404, 409, 422, ...); message: the API's message; reason: its
    reason word (NotFound, Conflict, Invalid, ...); details: further messages (for an invalid
    manifest, every error found, each as "manifest:LINE:COL: field: message").
    """

    def __init__(self, status, message, reason=None, details=(), body=b""):
        super().__init__(message)
        self.status = status
        self.message = message
        self.reason = reason
        self.details = list(details)
        self.body = body

    def __str__(self):
        text = "%s (HTTP %d%s)" % (self.message, self.status,
                                   ", " + self.reason if self.reason else "")
        extra = [d for d in self.details if d != self.message]
        return "\n  ".join([text] + extra)

    @classmethod
    def from_response(cls, status, body, http_reason=""):
        """Builds the error from a reply: the API's Status JSON, or the body as text."""
        try:
            j = json.loads(body.decode("utf-8", "replace")) if body else None
        except ValueError:
            j = None
        if isinstance(j, dict) and isinstance(j.get("message"), str):
            return cls(status, j["message"], j.get("reason"), _details(j.get("details")), body)
        text = body.decode("utf-8", "replace").strip()[:500] if body else ""
        return cls(status, text or http_reason or "error", None, (), body)


def _details(d):
    """forkletd's details: a list of messages, or a Kubernetes Status's {causes: [{field,
    message}]}."""
    if isinstance(d, list):
        return [x for x in d if isinstance(x, str)]
    if isinstance(d, dict):
        out = []
        for c in d.get("causes") or []:
            if isinstance(c, dict) and isinstance(c.get("message"), str):
                f = c.get("field")
                out.append("%s: %s" % (f, c["message"]) if isinstance(f, str) and f and
                           not c["message"].startswith(f) else c["message"])
        return out
    return []


class ExecError(ForkletError):
    """The command could not be run or its stream was cut (a missing binary: errno 2).

    stdout and stderr hold what arrived before the error.
    """

    def __init__(self, message, errno=None, stdout=b"", stderr=b""):
        super().__init__(message)
        self.message = message
        self.errno = errno
        self.stdout = stdout
        self.stderr = stderr


class WaitTimeout(ForkletError, TimeoutError):
    """Session.wait() ran out of time; phase is the last phase seen (None: not found)."""

    def __init__(self, message, phase=None):
        super().__init__(message)
        self.phase = phase


class SessionFailed(ForkletError):
    """Session.wait() saw the session Failed for good (restartPolicy is not OnFailure)."""

    def __init__(self, message, reason=None):
        super().__init__(message)
        self.reason = reason
