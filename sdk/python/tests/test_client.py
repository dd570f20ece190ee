"""The client against a real gantry: `gantry dev` (GANTRY_URL, GANTRY_API_KEY).
`make test` runs it (test/sdk_test.go starts gantry dev); without a gantry it
is skipped, or fails under GANTRY_TEST_REQUIRE=1."""

import datetime
import io
import json
import os
import tempfile
import threading
import unittest
import uuid
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from gantry_client import (ConnectionFailed, Gantry, InvalidArgument, NotFound, Unauthenticated, verify_webhook)

URL, KEY = os.environ.get("GANTRY_URL"), os.environ.get("GANTRY_API_KEY")
REQUIRE = os.environ.get("GANTRY_TEST_REQUIRE") == "1"


def setUpModule():
    if not (URL and KEY) and not REQUIRE:
        raise unittest.SkipTest("set GANTRY_URL and GANTRY_API_KEY to a gantry (gantry dev)")
    if not (URL and KEY):
        raise RuntimeError("GANTRY_TEST_REQUIRE=1 but GANTRY_URL or GANTRY_API_KEY is not set")


class ClientTest(unittest.TestCase):
    def setUp(self):
        self.g = Gantry(URL, KEY)

    def test_execute(self):
        job = self.g.execute(language="python", code="print(6*7)")
        self.assertEqual((job["status"], job["exit_code"], job["stdout"]), ("succeeded", 0, "42\n"))

    def test_submit_files_env_and_wait(self):
        job = self.g.submit({"language": "bash", "code": "cat a.txt; od -An -tx1 b.bin | tr -d ' \\n'; echo; echo $SEED"},
                            files={"a.txt": "text\n", "b.bin": b"\x00\xff"}, env={"SEED": "7"})
        self.assertEqual(job["status"], "queued")
        job = self.g.wait(job["id"], timeout=120)
        self.assertEqual(job["stdout"], "text\n00ff\n7\n")

    def test_wait_times_out(self):
        job = self.g.submit(language="bash", code="sleep 30")
        with self.assertRaises(TimeoutError):
            self.g.wait(job["id"], timeout=1)
        self.assertEqual(self.g.cancel(job["id"])["id"], job["id"])
        self.assertEqual(self.g.wait(job["id"], timeout=60)["status"], "cancelled")

    def test_logs_stream_live(self):
        job = self.g.submit(language="python", code=(
            "import sys, time\nprint('one', flush=True)\ntime.sleep(1.5)\n"
            "print('two', file=sys.stderr, flush=True)\ntime.sleep(0.5)\nprint('three')\n"))
        events = []
        for ev in self.g.logs(job["id"]):
            if not events:  # the first chunk arrives while the job runs
                self.assertEqual(self.g.get_job(job["id"])["status"], "running")
            events.append(ev)
        text = [(e.stream, e.text) for e in events if e.stream != "status"]
        self.assertEqual("".join(t for s, t in text if s == "stdout"), "one\nthree\n")
        self.assertEqual("".join(t for s, t in text if s == "stderr"), "two\n")
        self.assertEqual(events[-1].stream, "status")
        self.assertEqual(events[-1].status["status"], "succeeded")

    def test_artifacts(self):
        job = self.g.execute(language="python", code=(
            "import os\nos.makedirs('out/d', exist_ok=True)\n"
            "open('out/d/x.bin', 'wb').write(bytes(range(256)))\nopen('out/y.txt', 'w').write('y')\n"))
        self.assertEqual(sorted(a["path"] for a in job["artifacts"]), ["out/d/x.bin", "out/y.txt"])
        self.assertEqual(self.g.download_artifact(job["id"], "out/y.txt"), b"y")
        with tempfile.TemporaryDirectory() as d:
            paths = self.g.download_artifacts(job, d)
            self.assertEqual(len(paths), 2)
            with open(os.path.join(d, "out", "d", "x.bin"), "rb") as f:
                self.assertEqual(f.read(), bytes(range(256)))

    def test_sessions_and_files(self):
        s = self.g.create_session("python", ttl_seconds=600)
        try:
            self.g.write_file(s["id"], "in/data.json", '{"n": 41}')
            job = self.g.execute(language="python", session_id=s["id"], code=(
                "import json\nn = json.load(open('in/data.json'))['n']\nopen('answer.txt', 'w').write(str(n + 1))\n"))
            self.assertEqual(job["status"], "succeeded", job["stderr"])
            self.assertEqual(self.g.read_file(s["id"], "answer.txt"), b"42")
            self.assertEqual(self.g.read_file(s["id"], "in/data.json"), b'{"n": 41}')
            names = [f["path"] for f in self.g.list_files(s["id"])["files"]]
            self.assertIn("answer.txt", names)
            self.g.delete_file(s["id"], "answer.txt")
            with self.assertRaises(NotFound):
                self.g.read_file(s["id"], "answer.txt")
        finally:
            self.g.close_session(s["id"])
        with self.assertRaises(NotFound):
            self.g.get_session(s["id"])

    def test_stateful_session(self):
        s = self.g.create_session("python", stateful=True)
        try:
            self.assertTrue(s["stateful"])
            first = self.g.execute(language="python", session_id=s["id"], code="import math\nr = 2")
            self.assertEqual(first["live_state"], "new", first["stderr"])
            job = self.g.execute(language="python", session_id=s["id"], code="round(math.pi * r ** 2, 2)")
            self.assertEqual(job["live_state"], "kept")
            self.assertEqual(job["value"]["text/plain"], "12.57")
        finally:
            self.g.close_session(s["id"])

    def test_skills(self):
        name = "py-sdk-" + uuid.uuid4().hex[:8]
        md = f"---\nname: {name}\ndescription: Convert furlongs to metres for the Python SDK test.\n---\n# Furlongs\n"
        saved = self.g.save_skill(name, md, files={"helpers.py": "F = 201.168\n", "assets/x.bin": b"\x00\x01"})
        self.assertEqual((saved["name"], saved["version"]), (name, 1))
        self.assertIn(name, [s["name"] for s in self.g.list_skills("furlongs")])
        got = self.g.get_skill(name)
        self.assertEqual(sorted(f["path"] for f in got["files"]), ["assets/x.bin", "helpers.py"])
        with zipfile.ZipFile(io.BytesIO(self.g.download_skill(name))) as z:
            self.assertEqual(z.read(f"{name}/assets/x.bin"), b"\x00\x01")
        self.assertEqual([v["version"] for v in self.g.skill_versions(name)["versions"]], [1])
        self.g.delete_skill(name)
        with self.assertRaises(NotFound):
            self.g.get_skill(name)

    def test_batch(self):
        b = self.g.submit_batch([{"language": "python", "code": "print(1)"}, {"language": "cobol", "code": "x"}])
        self.assertEqual([i["status"] for i in b["jobs"]], [202, 400])
        self.assertEqual(b["jobs"][1]["error"]["field"], "language")
        listed = self.g.list_jobs(batch_id=b["batch_id"])["jobs"]
        self.assertEqual([j["id"] for j in listed], [b["jobs"][0]["job"]["id"]])

    def test_search_history(self):
        run = uuid.uuid4().hex
        before = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(seconds=5)
        ok = self.g.execute(language="python", code="print(1)", metadata={"run": run, "kind": "ok"}, env={"TOKEN": "s3cret"})
        bad = self.g.execute(language="bash", code="exit 3", metadata={"run": run, "kind": "bad"})
        self.assertEqual((ok["status"], bad["status"]), ("succeeded", "failed"))
        ids = lambda page: [j["id"] for j in page["jobs"]]  # noqa: E731
        self.assertEqual(ids(self.g.list_jobs(metadata={"run": run})), [bad["id"], ok["id"]])
        self.assertEqual(ids(self.g.list_jobs(metadata={"run": run}, status=["failed", "error"])), [bad["id"]])
        self.assertEqual(ids(self.g.list_jobs(metadata={"run": run, "kind": "ok"}, language="python",
                                              created_after=before)), [ok["id"]])
        self.assertEqual(ids(self.g.list_jobs(metadata={"run": run}, created_before=before)), [])
        page = self.g.list_jobs(metadata={"run": run, "kind": "ok"}, include_spec=True)
        spec = page["jobs"][0]["spec"]
        self.assertEqual((spec["code"], spec["env_names"]), ("print(1)", ["TOKEN"]))
        self.assertNotIn("s3cret", json.dumps(page))
        self.assertEqual(self.g.get_job(ok["id"], include_spec=True)["spec"]["env_names"], ["TOKEN"])
        with self.assertRaises(InvalidArgument) as ctx:
            self.g.list_jobs(status="done")
        self.assertEqual(ctx.exception.field, "status")

    def test_errors(self):
        with self.assertRaises(InvalidArgument) as ctx:
            self.g.submit(language="cobol", code="x")
        self.assertEqual(ctx.exception.field, "language")
        with self.assertRaises(NotFound):
            self.g.get_job("job_" + "0" * 26)
        with self.assertRaises(Unauthenticated):
            Gantry(URL, "gk_not_a_real_key_0000000").list_jobs()
        with self.assertRaises(ConnectionFailed):
            Gantry("http://127.0.0.1:1", KEY, max_retries=0).list_jobs()

    def test_webhook(self):
        received = []
        done = threading.Event()

        class Receiver(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                received.append((dict(self.headers), body))
                self.send_response(204)
                self.end_headers()
                done.set()

            def log_message(self, *args):
                pass

        srv = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        self.addCleanup(srv.server_close)
        self.addCleanup(srv.shutdown)
        job = self.g.submit(language="python", code="print('hook')",
                            webhook_url=f"http://127.0.0.1:{srv.server_address[1]}/hook")
        self.assertTrue(done.wait(120), "no webhook arrived")
        headers, body = received[0]
        event = verify_webhook(self.g.webhook_secret(), headers, body)
        self.assertEqual((event["type"], event["data"]["id"], event["data"]["stdout"]), ("job.finished", job["id"], "hook\n"))
        self.assertEqual(json.loads(body)["data"]["status"], "succeeded")


if __name__ == "__main__":
    unittest.main()
