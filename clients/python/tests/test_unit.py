# SPDX-License-Identifier: MIT
"""Unit tests of the forklet package without root or forkletd: a small HTTP server on a unix
socket in a temp dir answers what the test scripts (chunked exec streams cut mid-line, Status
errors, apply headers), and records what the client sent."""

import base64
import http.server
import json
import os
import shutil
import socketserver
import sys
import tempfile
import threading
import unittest
import urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import forklet  # noqa: E402
from forklet import execstream, manifest  # noqa: E402


def b64(data):
    return base64.b64encode(data).decode("ascii")


def status_error(code, reason, message, details=()):
    return json.dumps({"kind": "Status", "code": code, "reason": reason, "message": message,
                       "details": list(details)}).encode()


class FakeServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True

    def __init__(self, path):
        self.routes = {}    # (method, path without query) -> fn(request) -> reply
        self.requests = []  # (method, path with query, headers, body)
        super().__init__(path, Handler)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _serve(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        req = (self.command, self.path, self.headers, body)
        self.server.requests.append(req)
        fn = self.server.routes.get((self.command, urllib.parse.urlsplit(self.path).path))
        status, headers, payload = fn(req) if fn else (
            404, {}, status_error(404, "NotFound", "no route %s" % self.path))
        self.send_response(status)
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Connection", "close")
        if isinstance(payload, list):  # chunked, one chunk per element
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for chunk in payload:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.write(b"0\r\n\r\n")
        else:
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

    do_GET = do_POST = do_PUT = do_DELETE = _serve


SESSION = "/api/v1alpha1/namespaces/default/sessions/web"


def session_obj(name="web", phase="Running", ns="default", **extra):
    st = {"phase": phase}
    st.update(extra)
    return {"metadata": {"name": name, "namespace": ns}, "spec": {}, "status": st}


def json_reply(obj, status=200, headers=None):
    h = {"Content-Type": "application/json"}
    h.update(headers or {})
    return status, h, json.dumps(obj).encode()


class FakeTestCase(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="fk-pyclient-")
        self.sock = os.path.join(self.dir, "api.sock")
        self.server = FakeServer(self.sock)
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,),
                                       daemon=True)
        self.thread.start()
        self.client = forklet.Client(socket=self.sock, timeout=10)

    def tearDown(self):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)
        shutil.rmtree(self.dir)

    def route(self, method, path, fn):
        self.server.routes[(method, path)] = fn


class ExecTest(FakeTestCase):
    def test_stream_cut_anywhere(self):
        lines = [{"stream": "stdout", "data": b64(b"out\x00\xff")},
                 {"stream": "stderr", "data": b64(b"err\n")},
                 {"stream": "stdout", "data": b64(b"more")},
                 {"exit_code": 3}]
        text = b"".join(json.dumps(x).encode() + b"\n" for x in lines)
        # chunks of 7 bytes: lines and base64 split across chunk boundaries
        chunks = [text[i:i + 7] for i in range(0, len(text), 7)]
        self.route("POST", SESSION + "/exec", lambda r: (200, {}, chunks))
        res = self.client.session("web").exec(["sh", "-c", "x"], stdin=b"in\x01put",
                                              timeout=2.5, env={"A": "b"})
        self.assertEqual(res.stdout, b"out\x00\xffmore")
        self.assertEqual(res.stderr, b"err\n")
        self.assertEqual(res.exit_code, 3)
        self.assertIsNone(res.signal)
        self.assertFalse(res.ok)
        sent = json.loads(self.server.requests[-1][3])
        self.assertEqual(sent, {"argv": ["sh", "-c", "x"], "env": {"A": "b"},
                                "stdin": b64(b"in\x01put"), "timeout_ms": 2500})
        self.assertEqual(self.server.requests[-1][2]["Content-Type"], "application/json")

    def test_signal_timeout_cap_detach(self):
        self.assertEqual(execstream.decode(['{"signal": 9, "timed_out": true}']).signal, 9)
        r = execstream.decode([b'{"exit_code": 0, "output_capped": true}\n'])
        self.assertTrue(r.output_capped and r.ok and not r.timed_out)
        r = execstream.decode(['{"signal": 9, "timed_out": true}'])
        self.assertTrue(r.timed_out)
        self.assertIsNone(r.exit_code)
        self.assertEqual(execstream.decode(['{"pid": 77}']).pid, 77)
        self.assertIn("pid=77", repr(execstream.decode(['{"pid": 77}'])))

    def test_error_lines(self):
        with self.assertRaises(forklet.ExecError) as cm:
            execstream.decode([json.dumps({"stream": "stdout", "data": b64(b"part")}),
                               '{"error": "exec /nosuch: No such file or directory", '
                               '"errno": 2}'])
        self.assertEqual(cm.exception.errno, 2)
        self.assertEqual(cm.exception.stdout, b"part")
        self.assertIn("/nosuch", str(cm.exception))
        # forkletd's shutdown line begins with a newline that ends a half-written line
        with self.assertRaises(forklet.ExecError) as cm:
            execstream.decode(["", '{"error": "forkletd is shutting down", "errno": 108}'])
        self.assertEqual(cm.exception.errno, 108)
        with self.assertRaisesRegex(forklet.ForkletError, "ended before the command's result"):
            execstream.decode([json.dumps({"stream": "stdout", "data": b64(b"x")})])
        with self.assertRaisesRegex(forklet.ForkletError, "not base64"):
            execstream.decode(['{"stream": "stdout", "data": "!!"}'])
        with self.assertRaisesRegex(forklet.ForkletError, "unreadable stream line"):
            execstream.decode(["{half"])

    def test_bad_arguments(self):
        s = self.client.session("web")
        with self.assertRaisesRegex(TypeError, r"\['sh', '-c', LINE\]"):
            s.exec("uname -a")
        with self.assertRaises(TypeError):
            s.exec([])
        with self.assertRaisesRegex(ValueError, "timeout"):
            s.exec(["true"], timeout=0)
        with self.assertRaisesRegex(ValueError, "env"):
            s.exec(["true"], env={"A=B": "c"})
        self.assertEqual(self.server.requests, [])

    def test_api_errors_before_the_stream(self):
        self.route("POST", SESSION + "/exec", lambda r: (409, {}, status_error(
            409, "NotRunning", "session default/web is Paused: resume it first")))
        with self.assertRaises(forklet.APIError) as cm:
            self.client.session("web").exec(["true"])
        self.assertEqual(cm.exception.status, 409)
        self.assertEqual(cm.exception.reason, "NotRunning")
        self.assertEqual(cm.exception.message, "session default/web is Paused: resume it first")


class ErrorTest(FakeTestCase):
    def test_status_json(self):
        with self.assertRaises(forklet.APIError) as cm:
            self.client.session("nosuch").status()
        e = cm.exception
        self.assertEqual((e.status, e.reason), (404, "NotFound"))
        self.assertTrue(e.message.startswith("no route /api/v1alpha1/namespaces/default/"))
        self.assertIn("(HTTP 404, NotFound)", str(e))

    def test_details_and_plain_bodies(self):
        self.route("POST", "/api/v1alpha1/sessions", lambda r: (422, {}, status_error(
            422, "Invalid", "manifest:5:14: spec.sizeClass: unknown class \"huge\"",
            ["manifest:5:14: spec.sizeClass: unknown class \"huge\"",
             "manifest:6:10: spec.image: unknown image \"x\""])))
        with self.assertRaises(forklet.APIError) as cm:
            self.client.apply({"metadata": {"name": "x"}})
        self.assertEqual(len(cm.exception.details), 2)
        self.assertIn("spec.image", str(cm.exception))
        # a Kubernetes-style Status: details.causes[] with field and message
        self.route("GET", SESSION, lambda r: (422, {}, json.dumps({
            "kind": "Status", "code": 422, "reason": "Invalid", "message": "invalid",
            "details": {"causes": [{"field": "spec.sizeClass", "message": "unknown class"},
                                   {"message": "no field"}]}}).encode()))
        with self.assertRaises(forklet.APIError) as cm:
            self.client.session("web").get()
        self.assertEqual(cm.exception.details, ["spec.sizeClass: unknown class", "no field"])
        self.route("GET", "/version", lambda r: (502, {}, b"bad gateway\n"))
        with self.assertRaises(forklet.APIError) as cm:
            self.client.version()
        self.assertEqual((cm.exception.status, cm.exception.message), (502, "bad gateway"))

    def test_unreachable(self):
        c = forklet.Client(socket=os.path.join(self.dir, "none.sock"))
        with self.assertRaisesRegex(forklet.TransportError,
                                    "cannot reach forkletd at .*none.sock.*FORKLET_SOCKET"):
            c.sessions()

    def test_server_arguments(self):
        with self.assertRaisesRegex(ValueError, "expected https://HOST:PORT"):
            forklet.Client(server="http://127.0.0.1:7443", token="t")
        with self.assertRaisesRegex(ValueError, "needs a bearer token"):
            forklet.Client(server="https://127.0.0.1:7443", token_file="")
        bad = os.path.join(self.dir, "token")
        with open(bad, "w") as f:
            f.write("two words\n")
        with self.assertRaisesRegex(ValueError, "not one token"):
            forklet.Client(server="https://127.0.0.1:7443", token_file=bad)

    def test_environment(self):
        old = dict(os.environ)
        try:
            os.environ.pop("FORKLET_SERVER", None)
            os.environ["FORKLET_SOCKET"] = self.sock
            self.route("GET", "/version", lambda r: json_reply({"version": "0.1.0"}))
            self.assertEqual(forklet.Client().version()["version"], "0.1.0")
        finally:
            os.environ.clear()
            os.environ.update(old)


class ApplyTest(FakeTestCase):
    def test_yaml_documents(self):
        results = iter(["created", "unchanged"])

        def apply(req):
            text = req[3].decode()
            name = "a" if "name: a" in text else "b"
            return json_reply(session_obj(name), 201, {"X-Forklet-Apply": next(results)})

        self.route("POST", "/api/v1alpha1/sessions", apply)
        text = ("# two sessions\n---\napiVersion: forklet.dev/v1alpha1\nkind: Session\n"
                "metadata: {name: a}\n---\n# b\napiVersion: forklet.dev/v1alpha1\n"
                "kind: Session\nmetadata: {name: b}\n...\n")
        got = self.client.apply(text)
        self.assertEqual([(s.name, s.applied) for s in got], [("a", "created"),
                                                              ("b", "unchanged")])
        bodies = [r[3].decode() for r in self.server.requests]
        self.assertEqual([r[2]["Content-Type"] for r in self.server.requests],
                         ["application/yaml"] * 2)
        # each document keeps its line numbers within the whole text
        self.assertEqual(bodies[1].splitlines()[8], "kind: Session")
        self.assertEqual(text.splitlines()[8], "kind: Session")
        self.assertNotIn("name: b", bodies[0])
        self.assertNotIn("name: a", bodies[1])

    def test_split(self):
        self.assertEqual(manifest.split_documents("# only a comment\n---\n"), [])
        docs = manifest.split_documents("a: 1\n--- \nb: 2\n---\n---\n# c\nc: 3")
        # the empty document's marker (line 3) turns blank; line 4 starts the third one
        self.assertEqual([d for _, d in docs], ["a: 1\n", "\n--- \nb: 2\n",
                                                "\n\n\n\n---\n# c\nc: 3"])
        # "---" inside a line or indented is content, not a marker
        self.assertEqual(len(manifest.split_documents("a: |\n  ---\nb: '---x'\n---x: 1\n")),
                         1)
        with self.assertRaises(ValueError):
            self.client.apply("# nothing\n")
        with self.assertRaises(TypeError):
            self.client.apply(42)

    def test_json_dict(self):
        self.route("POST", "/api/v1alpha1/sessions",
                   lambda r: json_reply(session_obj("j", ns="team"), 201,
                                        {"X-Forklet-Apply": "created"}))
        s = self.client.apply({"metadata": {"name": "j", "namespace": "team"}})[0]
        self.assertEqual((s.namespace, s.name, s.applied), ("team", "j", "created"))
        self.assertEqual(self.server.requests[0][2]["Content-Type"], "application/json")


class SessionTest(FakeTestCase):
    def test_wait(self):
        phases = iter(["Pending", "Starting", "Running"])
        self.route("GET", SESSION, lambda r: json_reply(session_obj(phase=next(phases))))
        self.assertEqual(self.client.session("web").wait("Running", 10)["status"]["phase"],
                         "Running")
        self.route("GET", SESSION, lambda r: json_reply(session_obj(phase="Starting")))
        with self.assertRaises(forklet.WaitTimeout) as cm:
            self.client.session("web").wait("Running", 0.6)
        self.assertEqual(cm.exception.phase, "Starting")
        self.assertIsInstance(cm.exception, TimeoutError)
        failed = session_obj(phase="Failed", conditions=[
            {"type": "Ready", "status": "False", "message": "QEMU exited with status 1"}])
        self.route("GET", SESSION, lambda r: json_reply(failed))
        with self.assertRaisesRegex(forklet.SessionFailed, "QEMU exited with status 1"):
            self.client.session("web").wait("Running", 10)
        self.assertIsNone(self.client.session("web2").wait("Deleted", 5))
        with self.assertRaisesRegex(ValueError, "unknown phase 'Up'"):
            self.client.session("web").wait("Up")

    def test_files(self):
        self.route("GET", SESSION + "/files", lambda r: (200, {}, b"\x00bytes\xff"))
        self.route("PUT", SESSION + "/files", lambda r: json_reply({"kind": "Status"}))
        s = self.client.session("web")
        self.assertEqual(s.read_file("/work space/a&b"), b"\x00bytes\xff")
        s.write_file("/tmp/x", "text", mode=0o600)
        get, put = self.server.requests
        self.assertEqual(urllib.parse.parse_qs(urllib.parse.urlsplit(get[1]).query),
                         {"path": ["/work space/a&b"]})
        self.assertEqual(urllib.parse.parse_qs(urllib.parse.urlsplit(put[1]).query),
                         {"path": ["/tmp/x"], "mode": ["600"]})
        self.assertEqual((put[2]["Content-Type"], put[3]), ("application/octet-stream", b"text"))

    def test_fork_engine_and_actions(self):
        self.route("POST", SESSION + "/checkpoints",
                   lambda r: json_reply({"kind": "Checkpoint", "id": "ck_1"}, 201))
        self.route("POST", SESSION + "/forks", lambda r: json_reply(
            {"kind": "ForkList", "names": ["web-fork-0", "web-fork-1"]}, 201))
        self.route("POST", SESSION + "/rollback", lambda r: json_reply({"status": "Success"}))
        self.route("POST", SESSION + "/pause", lambda r: json_reply(
            session_obj(phase="Paused"), 200, {"X-Forklet-Apply": "configured"}))
        self.route("DELETE", SESSION, lambda r: (404, {}, status_error(404, "NotFound", "gone")))
        s = self.client.session("web")
        self.assertEqual(s.checkpoint(), "ck_1")
        forks = s.fork("ck_1", 2)
        self.assertEqual([f.name for f in forks], ["web-fork-0", "web-fork-1"])
        self.assertEqual(forks[0], self.client.session("web-fork-0"))
        s.rollback("ck_1")
        self.assertEqual(s.pause()["status"]["phase"], "Paused")
        s.delete()  # a gone session is deleted already
        sent = [(r[0], r[1], r[3]) for r in self.server.requests]
        self.assertEqual(sent[1][2], b'{"from": "ck_1", "count": 2}')
        self.assertEqual(sent[2][2], b'{"checkpoint": "ck_1"}')
        self.assertEqual(sent[3][1], SESSION + "/pause?wait=180")

    def test_sessions(self):
        self.route("GET", "/api/v1alpha1/sessions", lambda r: json_reply(
            {"kind": "SessionList", "items": [session_obj("a"), session_obj("b", ns="x")]}))
        got = self.client.sessions()
        self.assertEqual([(s.namespace, s.name) for s in got], [("default", "a"), ("x", "b")])


if __name__ == "__main__":
    unittest.main()
