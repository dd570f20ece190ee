"""Retries and errors, against a small local HTTP server standing in for
gantry (the real server is exercised by test_client.py)."""

import json
import threading
import time
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from gantry_client import ERRORS_BY_CODE, ConnectionFailed, Gantry, InvalidArgument, NotFound, Unavailable, api_types


class Fake:
    """Answers each request with the next scripted (status, headers, body)."""

    def __init__(self, script):
        self.script = list(script)
        self.requests = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                fake.requests.append((self.command, self.path, dict(self.headers), body, time.monotonic()))
                status, headers, out = fake.script.pop(0)
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            do_GET = do_POST = do_DELETE = do_PUT = _serve

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def error(code, message, field=None):
    e = {"code": code, "message": message}
    if field:
        e["field"] = field
    return json.dumps({"error": e}).encode()


JOB = json.dumps({"id": "job_x", "status": "queued"}).encode()


class TransportTest(unittest.TestCase):
    def test_retry_honours_retry_after_and_keeps_the_key(self):
        fake = Fake([(503, {"Retry-After": "1"}, error("unavailable", "queue down")), (202, {}, JOB)])
        self.addCleanup(fake.close)
        job = Gantry(fake.url, "gk_test").submit(language="python", code="print(1)")
        self.assertEqual(job["id"], "job_x")
        (_, _, _, b1, t1), (_, _, _, b2, t2) = fake.requests
        self.assertGreaterEqual(t2 - t1, 0.95, "the retry came before Retry-After")
        k1, k2 = json.loads(b1)["idempotency_key"], json.loads(b2)["idempotency_key"]
        self.assertTrue(k1.startswith("py-"))
        self.assertEqual(k1, k2, "a retried submission must carry the same idempotency key")

    def test_no_retry_of_what_is_not_idempotent(self):
        fake = Fake([(503, {}, error("unavailable", "down")), (201, {}, b"{}")])
        self.addCleanup(fake.close)
        with self.assertRaises(Unavailable):
            Gantry(fake.url, "gk_test").create_session()
        self.assertEqual(len(fake.requests), 1)

    def test_gives_up_after_max_retries(self):
        fake = Fake([(503, {"Retry-After": "0"}, error("unavailable", "down"))] * 3)
        self.addCleanup(fake.close)
        with self.assertRaises(Unavailable) as ctx:
            Gantry(fake.url, "gk_test", max_retries=2).get_job("job_x")
        self.assertEqual(len(fake.requests), 3)
        self.assertEqual(ctx.exception.retry_after, 0)

    def test_typed_errors(self):
        fake = Fake([(400, {}, error("invalid_argument", "language is required", "language")),
                     (404, {}, error("not_found", "job not found"))])
        self.addCleanup(fake.close)
        g = Gantry(fake.url, "gk_test")
        with self.assertRaises(InvalidArgument) as ctx:
            g.submit(code="x")
        e = ctx.exception
        self.assertEqual((e.status, e.code, e.field, e.message), (400, "invalid_argument", "language", "language is required"))
        with self.assertRaises(NotFound):
            g.get_job("job_y")

    def test_every_api_error_code_has_a_class(self):
        self.assertEqual(set(ERRORS_BY_CODE), set(api_types.ERROR_CODES))

    def test_unreachable(self):
        with self.assertRaises(ConnectionFailed) as ctx:
            Gantry("http://127.0.0.1:1", "gk_test", max_retries=0).get_job("job_x")
        self.assertIn("cannot reach gantry at http://127.0.0.1:1", str(ctx.exception))


if __name__ == "__main__":
    unittest.main()
