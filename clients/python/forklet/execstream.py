# SPDX-License-Identifier: MIT
"""The exec protocol: the request body, and the reply's stream of JSON lines decoded into an
ExecResult.

POST .../sessions/NAME/exec {argv, env, stdin (base64), timeout_ms, output_cap, detach}
answers a chunked stream of lines: {"stream": "stdout"|"stderr", "data": BASE64} as the guest
writes, then one of {"exit_code": N[, "timed_out": true][, "output_capped": true]},
{"signal": N, ...}, {"pid": N} (detach) or {"error": MESSAGE, "errno": N}.
"""

import base64
import binascii
import json

from .errors import ExecError, ForkletError


class ExecResult:
    """What a command did: stdout and stderr (bytes), exit_code (None when a signal ended
    it), signal (or None), timed_out (killed at the timeout), output_capped (output beyond
    output_cap was dropped), pid (a detached command's guest pid, else None)."""

    __slots__ = ("stdout", "stderr", "exit_code", "signal", "timed_out", "output_capped", "pid")

    def __init__(self, stdout=b"", stderr=b"", exit_code=None, signal=None, timed_out=False,
                 output_capped=False, pid=None):
        self.stdout = stdout
        self.stderr = stderr
        self.exit_code = exit_code
        self.signal = signal
        self.timed_out = timed_out
        self.output_capped = output_capped
        self.pid = pid

    @property
    def ok(self):
        """The command exited with status 0."""
        return self.exit_code == 0

    def __repr__(self):
        end = ("pid=%d" % self.pid if self.pid is not None else
               "signal=%d" % self.signal if self.signal is not None else
               "exit_code=%r" % self.exit_code)
        return "ExecResult(%s, stdout=%d bytes, stderr=%d bytes%s%s)" % (
            end, len(self.stdout), len(self.stderr), ", timed_out" if self.timed_out else "",
            ", output_capped" if self.output_capped else "")


def request_body(argv, stdin=None, timeout=None, env=None, output_cap=None, detach=False):
    """The exec request as JSON bytes; bad arguments raise TypeError or ValueError naming
    the argument."""
    if isinstance(argv, (str, bytes)) or not isinstance(argv, (list, tuple)):
        raise TypeError("argv: a list of strings is required (a shell line: "
                        "['sh', '-c', LINE])")
    if not argv or not all(isinstance(a, str) for a in argv):
        raise TypeError("argv: a non-empty list of strings is required")
    body = {"argv": list(argv)}
    if env:
        for k, v in env.items():
            if not isinstance(k, str) or not k or "=" in k or not isinstance(v, str):
                raise ValueError("env: %r: names without '=' and string values are required"
                                 % (k,))
        body["env"] = dict(env)
    if stdin is not None:
        if detach:
            raise ValueError("stdin: a detached command takes no stdin")
        data = stdin.encode("utf-8") if isinstance(stdin, str) else bytes(stdin)
        body["stdin"] = base64.b64encode(data).decode("ascii")
    if timeout is not None:
        if timeout <= 0:
            raise ValueError("timeout: a positive number of seconds is required")
        body["timeout_ms"] = max(1, int(round(timeout * 1000)))
    if output_cap is not None:
        if int(output_cap) <= 0:
            raise ValueError("output_cap: a positive number of bytes is required")
        body["output_cap"] = int(output_cap)
    if detach:
        body["detach"] = True
    return json.dumps(body).encode("utf-8")


def decode(lines):
    """Reads the stream (an iterable of byte or text lines) up to its result line.

    Returns an ExecResult; an {"error"} line raises ExecError (errno 2: the binary is
    missing); a stream that ends without a result raises ForkletError."""
    out, err = bytearray(), bytearray()
    for raw in lines:
        line = raw.strip()
        if not line:
            continue  # forkletd's shutdown line starts with a newline
        try:
            msg = json.loads(line)
        except ValueError:
            raise ForkletError("exec: unreadable stream line %r" % (line[:80],)) from None
        if not isinstance(msg, dict):
            raise ForkletError("exec: unreadable stream line %r" % (line[:80],))
        if "stream" in msg:
            try:
                data = base64.b64decode(msg.get("data") or "", validate=True)
            except (binascii.Error, ValueError, TypeError):
                raise ForkletError("exec: %s data is not base64" % msg["stream"]) from None
            (err if msg["stream"] == "stderr" else out).extend(data)
            continue
        if "error" in msg:
            raise ExecError(str(msg["error"]), msg.get("errno"), bytes(out), bytes(err))
        if "exit_code" in msg or "signal" in msg or "pid" in msg:
            return ExecResult(bytes(out), bytes(err), msg.get("exit_code"), msg.get("signal"),
                              bool(msg.get("timed_out")), bool(msg.get("output_capped")),
                              msg.get("pid"))
    raise ForkletError("exec: the stream ended before the command's result (forkletd "
                       "stopped or the connection broke)")
