# SPDX-License-Identifier: MIT
"""The forklet package against a real forkletd and microVM (run by
tests/clients/client-python.sh, which starts forkletd and sets the environment):

  FORKLET_SOCKET          the node's API socket
  FK_PY_SERVER, FK_PY_TOKEN_FILE, FK_PY_CA, FK_PY_WRONG_TOKEN_FILE
                          its TLS listener on loopback, the bearer token and the test CA
  FORKLET                 the forklet CLI (for the `forklet tree` and describe checks)
  FK_PY_BOOT_TIMEOUT      seconds a boot or fork may take (TCG on a loaded host)

The steps build on each other (one guest is booted for all of them), so they run in order
with --failfast: test_01 ... test_11.
"""

import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import forklet  # noqa: E402

NAME = "pyweb"
BOOT_S = float(os.environ.get("FK_PY_BOOT_TIMEOUT", "300"))
MANIFEST = """\
# the Python client's test session
apiVersion: forklet.dev/v1alpha1
kind: Session
metadata:
  name: %s
spec:
  sizeClass: small
  image: minimal
  env: {GREETING: hello-from-python}
""" % NAME
NOTE = b"written by python\n\x00\xff binary tail"


def cli(*args):
    return subprocess.run([os.environ["FORKLET"], *args], capture_output=True, text=True,
                          timeout=120)


class IntegrationTest(unittest.TestCase):
    client = None
    web = None
    ck = None
    fork = None
    fork2 = None

    @classmethod
    def setUpClass(cls):
        cls.client = forklet.Client()  # FORKLET_SOCKET from the script

    def test_01_apply_and_wait(self):
        c = self.client
        self.assertEqual(c.sessions(), [])
        (web,) = c.apply(MANIFEST)
        self.assertEqual((web.name, web.namespace, web.applied), (NAME, "default", "created"))
        self.assertEqual(c.apply(MANIFEST)[0].applied, "unchanged")
        obj = web.wait("Running", BOOT_S)
        self.assertEqual(obj["status"]["phase"], "Running")
        self.assertGreater(obj["status"]["vm"]["pid"], 0)
        self.assertEqual(web.status()["phase"], "Running")
        self.assertEqual(c.sessions(), [web])
        type(self).web = web

    def test_02_invalid_manifest(self):
        bad = MANIFEST.replace("name: %s" % NAME, "name: pybad").replace("small", "huge")
        with self.assertRaises(forklet.APIError) as cm:
            self.client.apply(bad)
        e = cm.exception
        self.assertEqual((e.status, e.reason), (422, "Invalid"))
        # line 7, column 14 of the text given: the validator's position, through the client
        self.assertRegex(e.message, r'^manifest:7:14: spec\.sizeClass: unknown class "huge"')
        print("invalid manifest: %s" % e, file=sys.stderr)
        with self.assertRaises(forklet.APIError) as cm:
            self.client.session("pybad").status()
        self.assertEqual(cm.exception.status, 404)

    def test_03_exec(self):
        web = self.web
        r = web.exec(["uname", "-s"])
        self.assertEqual((r.stdout, r.stderr, r.exit_code), (b"Linux\n", b"", 0))
        r = web.exec(["sh", "-c", "echo out; echo err >&2; exit 3"])
        self.assertEqual((r.stdout, r.stderr, r.exit_code), (b"out\n", b"err\n", 3))
        self.assertEqual(web.exec(["sh", "-c", "echo $GREETING"]).stdout, b"hello-from-python\n")
        self.assertEqual(web.exec(["sh", "-c", "echo $A"], env={"A": "b"}).stdout, b"b\n")
        data = bytes(range(256)) * 64
        r = web.exec(["cat"], stdin=data)
        self.assertEqual((r.stdout, r.exit_code), (data, 0))
        r = web.exec(["sleep", "30"], timeout=1)
        self.assertTrue(r.timed_out, r)
        with self.assertRaises(forklet.ExecError) as cm:
            web.exec(["/no/such/binary"])
        self.assertEqual(cm.exception.errno, 2)

    def test_04_files(self):
        web = self.web
        web.write_file("/workspace/note.txt", NOTE)
        self.assertEqual(web.read_file("/workspace/note.txt"), NOTE)
        self.assertEqual(web.exec(["head", "-c", "17", "/workspace/note.txt"]).stdout,
                         NOTE[:17])
        big = os.urandom(300 * 1024)
        web.write_file("/tmp/big.bin", big, mode=0o600)
        self.assertEqual(web.read_file("/tmp/big.bin"), big)
        self.assertEqual(web.exec(["stat", "-c", "%a %s", "/tmp/big.bin"]).stdout,
                         b"600 %d\n" % len(big))
        with self.assertRaises(forklet.APIError) as cm:
            web.read_file("/no/such/file")
        self.assertIn("/no/such/file", cm.exception.message)

    def test_05_checkpoint_and_fork(self):
        web = self.web
        ck = web.checkpoint()
        self.assertTrue(ck.startswith("ck_"), ck)
        self.assertIn(ck, [x["id"] for x in web.status()["checkpoints"]])
        self.assertIn(ck, [x["id"] for x in web.checkpoints()])
        (fork,) = web.fork(ck, 1)
        self.assertEqual(fork.name, NAME + "-fork-0")
        fork.wait("Running", BOOT_S)
        self.assertEqual(fork.exec(["uname", "-s"]).stdout, b"Linux\n")
        self.assertEqual(fork.read_file("/workspace/note.txt"), NOTE)
        self.assertEqual(fork.status()["forkOf"], {"session": NAME, "checkpoint": ck})
        self.assertEqual(web.status()["forks"], [fork.name])
        type(self).ck, type(self).fork = ck, fork

    def test_06_tree_and_describe(self):
        r = cli("tree", NAME)
        self.assertEqual(r.returncode, 0, r.stderr)
        print(r.stdout, file=sys.stderr)
        lines = r.stdout.splitlines()
        self.assertRegex(lines[0], r"^NAME +PHASE +AGE$")
        self.assertRegex(lines[1], r"^Session/%s +Running +\d+[smhd]$" % NAME)
        self.assertRegex(lines[2], r"^└─Checkpoint/%s +- +\d+[smhd]$" % self.ck)
        self.assertRegex(lines[3], r"^  └─Session/%s +Running +\d+[smhd]$" % self.fork.name)
        self.assertEqual(len(lines), 4)
        r = cli("describe", self.fork.name)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"\nFork of: +%s, checkpoint %s\n" % (NAME, self.ck))
        self.assertRegex(r.stdout, r"\n    └─Session/%s +Running +\S+  <- this session\n"
                         % re.escape(self.fork.name))
        r = cli("describe", NAME)
        self.assertRegex(r.stdout, r"\nForks: +%s\n" % re.escape(self.fork.name))
        r = cli("tree", "nosuch")
        self.assertEqual(r.returncode, 1)
        self.assertIn("session default/nosuch not found", r.stderr)

    def test_07_rollback(self):
        web = self.web
        web.write_file("/workspace/note.txt", b"changed after the checkpoint\n")
        web.rollback(self.ck)
        self.assertEqual(web.phase(), "Running")
        self.assertEqual(web.read_file("/workspace/note.txt"), NOTE)
        with self.assertRaises(forklet.APIError) as cm:
            web.rollback("ck_nosuch")
        self.assertEqual(cm.exception.status, 404)
        self.assertIn("ck_nosuch", cm.exception.message)
        # a checkpoint after the rollback comes from ck: a sibling of the fork under it
        ck2 = web.checkpoint()
        parents = {x["id"]: x.get("parent") for x in web.status()["checkpoints"]}
        self.assertEqual(parents, {self.ck: None, ck2: self.ck})
        r = cli("tree", NAME)
        self.assertEqual(r.returncode, 0, r.stderr)
        print(r.stdout, file=sys.stderr)
        lines = r.stdout.splitlines()
        self.assertRegex(lines[2], r"^└─Checkpoint/%s " % self.ck)
        self.assertRegex(lines[3], r"^  ├─Session/%s +Running " % self.fork.name)
        self.assertRegex(lines[4], r"^  └─Checkpoint/%s +- " % ck2)
        self.assertEqual(len(lines), 5)

    def test_08_pause_resume(self):
        fork = self.fork
        obj = fork.pause()
        self.assertEqual(obj["status"]["phase"], "Paused")
        self.assertEqual(fork.phase(), "Paused")
        with self.assertRaises(forklet.APIError) as cm:
            fork.exec(["true"])
        self.assertEqual(cm.exception.status, 409)
        print("exec while paused: %s" % cm.exception, file=sys.stderr)
        self.assertEqual(fork.resume()["status"]["phase"], "Running")
        self.assertEqual(fork.exec(["cat", "/workspace/note.txt"]).stdout, NOTE)

    def test_09_fork_of_fork(self):
        fork = self.fork
        ck = fork.checkpoint()  # a fork's RAM is private: forkletd materializes it
        (ff,) = fork.fork(ck, 1)
        self.assertEqual(ff.name, fork.name + "-fork-0")
        ff.wait("Running", BOOT_S)
        self.assertEqual(ff.read_file("/workspace/note.txt"), NOTE)
        self.assertEqual(ff.status()["forkOf"], {"session": fork.name, "checkpoint": ck})
        r = cli("tree", NAME)
        self.assertEqual(r.returncode, 0, r.stderr)
        print(r.stdout, file=sys.stderr)
        lines = r.stdout.splitlines()
        self.assertRegex(lines[2], r"^└─Checkpoint/%s " % self.ck)
        self.assertRegex(lines[3], r"^  ├─Session/%s +Running " % fork.name)
        self.assertRegex(lines[4], r"^  │ └─Checkpoint/%s +- " % ck)
        self.assertRegex(lines[5], r"^  │   └─Session/%s +Running " % ff.name)
        self.assertRegex(lines[6], r"^  └─Checkpoint/ck_")
        self.assertEqual(len(lines), 7)
        r = cli("describe", ff.name)
        self.assertRegex(r.stdout, r"\nFork of: +%s, checkpoint %s\n" % (fork.name, ck))
        self.assertRegex(r.stdout, r"\n  Session/%s +Running " % NAME)  # from the top
        self.assertRegex(r.stdout, r"\n    │   └─Session/%s +Running +\S+  <- this session\n"
                         % re.escape(ff.name))
        type(self).fork2 = ff

    def test_10_tls_listener(self):
        tls = forklet.Client(server=os.environ["FK_PY_SERVER"],
                             token_file=os.environ["FK_PY_TOKEN_FILE"], ca=os.environ["FK_PY_CA"])
        self.assertEqual(sorted(s.name for s in tls.sessions()),
                         [NAME, self.fork.name, self.fork2.name])
        r = tls.session(NAME).exec(["sh", "-c", "head -c 100000 /dev/zero; echo done >&2"])
        self.assertEqual((len(r.stdout), r.stderr, r.exit_code), (100000, b"done\n", 0))
        with self.assertRaises(forklet.APIError) as cm:
            tls.session("nosuch").status()
        self.assertEqual(cm.exception.status, 404)
        self.assertEqual(cm.exception.message, "session default/nosuch not found")
        wrong = forklet.Client(server=os.environ["FK_PY_SERVER"],
                               token_file=os.environ["FK_PY_WRONG_TOKEN_FILE"],
                               ca=os.environ["FK_PY_CA"])
        with self.assertRaises(forklet.APIError) as cm:
            wrong.sessions()
        self.assertEqual(cm.exception.status, 401)
        untrusted = forklet.Client(server=os.environ["FK_PY_SERVER"],
                                   token_file=os.environ["FK_PY_TOKEN_FILE"])
        with self.assertRaisesRegex(forklet.TransportError, "certificate verify failed"):
            untrusted.sessions()

    def test_11_delete(self):
        with self.assertRaises(forklet.APIError) as cm:
            self.client.session("nosuch").exec(["true"])
        self.assertEqual(cm.exception.status, 404)
        self.fork2.delete(wait=True, timeout=120)
        self.fork.delete(wait=True, timeout=120)
        self.web.delete(wait=True, timeout=120)
        self.web.delete()  # gone already: still fine
        self.assertEqual(self.client.sessions(), [])


if __name__ == "__main__":
    unittest.main(failfast=True, verbosity=2)
