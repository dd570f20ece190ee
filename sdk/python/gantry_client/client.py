"""The gantry HTTP API client."""

from __future__ import annotations

import base64
import datetime
import hashlib
import http.client
import json
import os
import random
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from typing import Any, Dict, Iterable, Iterator, List, Mapping, NamedTuple, Optional, Sequence, Union

from . import api_types as t
from .errors import ConnectionFailed, GantryError, error_for

DEFAULT_URL = "http://127.0.0.1:8080"

#: What files= takes: {path: text or bytes}, or the API's InputFile list.
Files = Union[Mapping[str, Union[str, bytes]], Sequence[t.InputFile]]

_TERMINAL = ("succeeded", "failed", "timed_out", "cancelled", "error")


class LogEvent(NamedTuple):
    """One event of a job's log stream: output (``stream`` is ``"stdout"`` or
    ``"stderr"``, ``text`` the chunk) or, last, ``"status"`` with ``status``
    set."""

    stream: str
    text: str = ""
    status: Optional[t.LogStatusEvent] = None


def _files(files: Optional[Files]) -> Optional[List[t.InputFile]]:
    if files is None:
        return None
    if isinstance(files, Mapping):
        out: List[t.InputFile] = []
        for path, content in files.items():
            if isinstance(content, bytes):
                out.append({"path": path, "content": base64.b64encode(content).decode(), "encoding": "base64"})
            else:
                out.append({"path": path, "content": content})
        return out
    return list(files)


def _csv(v: Union[None, str, Sequence[str]]) -> Optional[str]:
    """One value, or several comma-separated, for a filter that takes several."""
    if v is None or isinstance(v, str):
        return v
    return ",".join(v)


def _when(v: Union[None, str, datetime.datetime]) -> Optional[str]:
    """A time for the API: RFC 3339 (a naive datetime is taken as UTC)."""
    if v is None or isinstance(v, str):
        return v
    if v.tzinfo is None:
        v = v.replace(tzinfo=datetime.timezone.utc)
    return v.isoformat()


def _quote_path(path: str) -> str:
    return "/".join(urllib.parse.quote(seg, safe="") for seg in path.split("/"))


class Gantry:
    """A client of one gantry.

    ``url`` and ``api_key`` default to the environment's GANTRY_URL (else
    http://127.0.0.1:8080) and GANTRY_API_KEY. Calls that are safe to repeat
    (reads, deletes, cancels, and submissions, which always carry an
    idempotency key) are retried up to ``max_retries`` times when the server
    cannot be reached or answers 429, 502, 503 or 504, waiting as its
    Retry-After says, else with exponential backoff.

        from gantry_client import Gantry
        job = Gantry().execute(language="python", code="print(6*7)")
        print(job["stdout"])
    """

    def __init__(self, url: Optional[str] = None, api_key: Optional[str] = None, *,
                 timeout: float = 90.0, max_retries: int = 4) -> None:
        self.url = (url or os.environ.get("GANTRY_URL") or DEFAULT_URL).rstrip("/")
        key = api_key or os.environ.get("GANTRY_API_KEY")
        if not key:
            raise ValueError("no API key: pass api_key= or set GANTRY_API_KEY")
        self._key = key
        self.timeout = timeout
        self.max_retries = max_retries
        self._opener = urllib.request.build_opener(_NoRedirect)

    # -- transport ---------------------------------------------------------

    def _request(self, method: str, path: str, *, query: Optional[Mapping[str, Any]] = None,
                 body: Optional[bytes] = None, json_body: Any = None, content_type: Optional[str] = None,
                 idempotent: bool = False, timeout: Optional[float] = None,
                 accept: Optional[str] = None, stream: bool = False, raw: bool = False) -> Any:
        url = self.url + path
        q = {k: v for k, v in (query or {}).items() if v is not None}
        if q:
            url += "?" + urllib.parse.urlencode(q)
        if json_body is not None:
            body, content_type = json.dumps(json_body).encode(), "application/json"
        headers = {"Authorization": "Bearer " + self._key, "User-Agent": "gantry-client-python"}
        if content_type:
            headers["Content-Type"] = content_type
        if accept:
            headers["Accept"] = accept
        attempt = 0
        while True:
            req = urllib.request.Request(url, data=body, method=method, headers=headers)
            try:
                resp = self._opener.open(req, timeout=timeout or self.timeout)
            except urllib.error.HTTPError as e:
                err = self._error(e)
                if idempotent and attempt < self.max_retries and e.code in (429, 502, 503, 504):
                    self._sleep(attempt, err.retry_after)
                    attempt += 1
                    continue
                raise err from None
            except (urllib.error.URLError, OSError, http.client.HTTPException) as e:
                if idempotent and attempt < self.max_retries:
                    self._sleep(attempt, None)
                    attempt += 1
                    continue
                reason = getattr(e, "reason", e)
                raise ConnectionFailed(f"cannot reach gantry at {self.url}: {reason}") from e
            if stream:
                return resp
            with resp:
                data = resp.read()
                if not raw and resp.headers.get_content_type() == "application/json":
                    return json.loads(data) if data else None
                return data

    @staticmethod
    def _error(e: urllib.error.HTTPError) -> GantryError:
        data = e.read()
        e.close()
        retry_after: Optional[float] = None
        ra = e.headers.get("Retry-After") if e.headers else None
        if ra and ra.strip().isdigit():
            retry_after = float(ra)
        try:
            body = json.loads(data)["error"]
            return error_for(e.code, body.get("code", ""), body.get("message", ""), body.get("field"), retry_after)
        except (ValueError, KeyError, TypeError):
            text = data.decode("utf-8", "replace").strip()[:200]
            return error_for(e.code, "", f"HTTP {e.code}: {text}", None, retry_after)

    @staticmethod
    def _sleep(attempt: int, retry_after: Optional[float]) -> None:
        if retry_after is not None:
            time.sleep(min(retry_after, 60.0))
            return
        d = min(0.5 * 2 ** attempt, 8.0)
        time.sleep(d / 2 + random.random() * d / 2)

    # -- jobs --------------------------------------------------------------

    @staticmethod
    def _job_request(request: Optional[t.JobRequest], fields: Dict[str, Any]) -> Dict[str, Any]:
        req: Dict[str, Any] = dict(request or {})
        req.update({k: v for k, v in fields.items() if v is not None})
        if "files" in req:
            req["files"] = _files(req["files"])
        # A key makes the submission safe to retry after a lost answer.
        req.setdefault("idempotency_key", "py-" + uuid.uuid4().hex)
        return req

    def submit(self, request: Optional[t.JobRequest] = None, **fields: Any) -> t.Job:
        """Queue a job and return it (status queued) at once.

        Give the request as a dict, as keyword arguments, or both (keywords
        win): ``submit(language="python", code="print(1)", files={"a.csv": "x,y"})``.
        ``files`` may map paths to text or bytes.
        """
        return self._request("POST", "/v1/jobs", json_body=self._job_request(request, fields), idempotent=True)

    def execute(self, request: Optional[t.JobRequest] = None, *, wait: Optional[float] = None, **fields: Any) -> t.Job:
        """Run a job and wait for it: the finished job, or the running job
        when ``wait`` seconds (default: the server's longest) ran out."""
        query = {"wait": f"{wait}s"} if wait is not None else None
        timeout = (wait if wait is not None else 960.0) + 30.0
        return self._request("POST", "/v1/execute", query=query, json_body=self._job_request(request, fields),
                             idempotent=True, timeout=timeout)

    def submit_batch(self, jobs: Iterable[t.JobRequest]) -> t.BatchResponse:
        """Queue several jobs at once; each item of the answer is the queued
        job (status 202) or its error body. Items without an idempotency key
        get one, so the batch is safe to retry."""
        items = [self._job_request(j, {}) for j in jobs]
        return self._request("POST", "/v1/jobs/batch", json_body={"jobs": items}, idempotent=True)

    def get_job(self, job_id: str, *, wait: Optional[float] = None, include_spec: bool = False) -> t.Job:
        """The job; with ``wait`` (at most 60 s), long-polls until it finishes.
        ``include_spec`` adds ``spec``: what it ran (env names, never values)."""
        query: Dict[str, Any] = {"wait": f"{wait}s"} if wait else {}
        if include_spec:
            query["include"] = "spec"
        return self._request("GET", "/v1/jobs/" + urllib.parse.quote(job_id, safe=""), query=query,
                             idempotent=True, timeout=(wait or 0) + self.timeout)

    def wait(self, job_id: str, *, timeout: Optional[float] = None) -> t.Job:
        """Wait until the job finishes and return it; TimeoutError after
        ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = 50.0 if deadline is None else min(50.0, deadline - time.monotonic())
            job = self.get_job(job_id, wait=max(left, 0.001))
            if job["status"] in _TERMINAL:
                return job
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"job {job_id} is still {job['status']} after {timeout}s")

    def list_jobs(self, *, status: Union[None, t.JobStatus, Sequence[t.JobStatus]] = None,
                  language: Union[None, str, Sequence[str]] = None,
                  created_after: Union[None, str, datetime.datetime] = None,
                  created_before: Union[None, str, datetime.datetime] = None,
                  metadata: Optional[Mapping[str, str]] = None, session_id: Optional[str] = None,
                  batch_id: Optional[str] = None, include_spec: bool = False, limit: Optional[int] = None,
                  cursor: Optional[str] = None) -> t.JobList:
        """One page of the tenant's jobs, newest first, that match every
        filter given: ``status`` and ``language`` (one or several: any of
        them), ``created_after`` (at or after) and ``created_before``
        (strictly before; datetimes or RFC 3339 strings), ``metadata`` (every
        pair). ``include_spec`` adds what each job ran (env names only)."""
        query: Dict[str, Any] = {"status": _csv(status), "language": _csv(language),
                                 "created_after": _when(created_after), "created_before": _when(created_before),
                                 "session_id": session_id, "batch_id": batch_id, "limit": limit, "cursor": cursor,
                                 "include": "spec" if include_spec else None}
        for k, v in (metadata or {}).items():
            query["metadata." + k] = v
        return self._request("GET", "/v1/jobs", query=query, idempotent=True)

    def iter_jobs(self, **filters: Any) -> Iterator[t.Job]:
        """Every job matching the filters of list_jobs, page after page."""
        cursor = None
        while True:
            page = self.list_jobs(cursor=cursor, **filters)
            yield from page["jobs"]
            cursor = page.get("next_cursor")
            if not cursor:
                return

    def cancel(self, job_id: str) -> t.Job:
        """Kill a running job or drop a queued one (idempotent)."""
        return self._request("POST", f"/v1/jobs/{urllib.parse.quote(job_id, safe='')}/cancel", idempotent=True)

    def logs(self, job_id: str) -> Iterator[LogEvent]:
        """The job's output as it comes, then its status: LogEvent("stdout",
        text), LogEvent("stderr", text), ..., LogEvent("status", status={...}).
        A broken stream is opened again without repeating output."""
        written = {"stdout": 0, "stderr": 0}
        attempt = 0
        while True:
            seen = {"stdout": 0, "stderr": 0}
            try:
                resp = self._request("GET", f"/v1/jobs/{urllib.parse.quote(job_id, safe='')}/logs",
                                     accept="text/event-stream", idempotent=True, stream=True)
                with resp:
                    for name, data in _sse(resp):
                        if name in ("stdout", "stderr"):
                            text = json.loads(data)["data"]
                            raw = text.encode("utf-8")
                            start = seen[name]
                            seen[name] += len(raw)
                            skip = written[name] - start
                            if skip < len(raw):
                                fresh = raw[max(skip, 0):].decode("utf-8", "replace")
                                written[name] += len(raw) - max(skip, 0)
                                yield LogEvent(name, fresh)
                        elif name == "status":
                            yield LogEvent("status", status=json.loads(data))
                            return
            except (OSError, http.client.HTTPException, ConnectionFailed):
                pass
            attempt += 1
            if attempt > self.max_retries:
                raise ConnectionFailed(f"the log stream of job {job_id} broke {attempt} times")
            self._sleep(attempt - 1, None)

    def artifacts(self, job_id: str) -> t.ArtifactManifest:
        """The files the job produced."""
        return self._request("GET", f"/v1/jobs/{urllib.parse.quote(job_id, safe='')}/artifacts", idempotent=True)

    def artifact_url(self, job_id: str, path: str) -> t.PresignedURL:
        """A presigned download URL of an artifact (works without credentials
        until it expires)."""
        return self._request("GET", f"/v1/jobs/{urllib.parse.quote(job_id, safe='')}/artifacts/{_quote_path(path)}",
                             query={"redirect": "false"}, idempotent=True)

    def download_artifact(self, job_id: str, path: str) -> bytes:
        """An artifact's bytes."""
        link = self.artifact_url(job_id, path)["url"]
        try:
            with urllib.request.urlopen(link, timeout=self.timeout) as resp:
                return resp.read()
        except urllib.error.HTTPError as e:
            raise GantryError(f"download of {path} failed: HTTP {e.code}", status=e.code) from None
        except (urllib.error.URLError, OSError) as e:
            raise ConnectionFailed(f"download of {path} failed: {getattr(e, 'reason', e)}") from e

    def download_artifacts(self, job: Union[str, t.Job], directory: str) -> List[str]:
        """Save every artifact of the job under ``directory`` (each checked
        against its sha256) and return the paths written."""
        if isinstance(job, str):
            job = self.get_job(job)
        root = os.path.realpath(directory)
        written = []
        for art in job["artifacts"]:
            dest = os.path.realpath(os.path.join(root, *art["path"].split("/")))
            if not dest.startswith(root + os.sep):
                raise GantryError(f"artifact path {art['path']!r} leaves {directory}")
            data = self.download_artifact(job["id"], art["path"])
            if hashlib.sha256(data).hexdigest() != art["sha256"]:
                raise GantryError(f"artifact {art['path']}: the bytes do not match its sha256")
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            with open(dest, "wb") as f:
                f.write(data)
            written.append(dest)
        return written

    # -- sessions and their files -------------------------------------------

    def create_session(self, language: str = "python", *, ttl_seconds: Optional[int] = None,
                       disk_mb: Optional[int] = None, metadata: Optional[Mapping[str, str]] = None,
                       environment: Optional[str] = None) -> t.Session:
        """A stateful workspace: pass its id as session_id to run jobs in it."""
        req = {"language": language, "ttl_seconds": ttl_seconds, "disk_mb": disk_mb, "metadata": metadata,
               "environment": environment}
        return self._request("POST", "/v1/sessions", json_body={k: v for k, v in req.items() if v is not None})

    def get_session(self, session_id: str) -> t.Session:
        return self._request("GET", "/v1/sessions/" + urllib.parse.quote(session_id, safe=""), idempotent=True)

    def list_sessions(self, *, limit: Optional[int] = None, cursor: Optional[str] = None) -> t.SessionList:
        return self._request("GET", "/v1/sessions", query={"limit": limit, "cursor": cursor}, idempotent=True)

    def close_session(self, session_id: str) -> None:
        """Stop the session's job, drop its queued ones and delete its files."""
        self._request("DELETE", "/v1/sessions/" + urllib.parse.quote(session_id, safe=""), idempotent=True)

    def list_files(self, session_id: str, path: Optional[str] = None) -> t.FileList:
        return self._request("GET", f"/v1/sessions/{urllib.parse.quote(session_id, safe='')}/files",
                             query={"path": path}, idempotent=True)

    def read_file(self, session_id: str, path: str) -> bytes:
        return self._request("GET", f"/v1/sessions/{urllib.parse.quote(session_id, safe='')}/files/{_quote_path(path)}",
                             idempotent=True, raw=True)

    def write_file(self, session_id: str, path: str, content: Union[str, bytes]) -> Any:
        if isinstance(content, str):
            content = content.encode("utf-8")
        return self._request("PUT", f"/v1/sessions/{urllib.parse.quote(session_id, safe='')}/files/{_quote_path(path)}",
                             body=content, content_type="application/octet-stream", idempotent=True)

    def delete_file(self, session_id: str, path: str) -> None:
        self._request("DELETE", f"/v1/sessions/{urllib.parse.quote(session_id, safe='')}/files/{_quote_path(path)}",
                      idempotent=True)

    # -- skills ------------------------------------------------------------

    def list_skills(self, q: Optional[str] = None, *, limit: Optional[int] = None) -> List[t.SkillSummary]:
        """The tenant's skills and the built-ins; with ``q``, ranked by relevance."""
        return self._request("GET", "/v1/skills", query={"q": q, "limit": limit}, idempotent=True)["skills"]

    def get_skill(self, name: str, *, version: Optional[int] = None) -> t.Skill:
        return self._request("GET", "/v1/skills/" + urllib.parse.quote(name, safe=""), query={"version": version},
                             idempotent=True)

    def save_skill(self, name: str, skill_md: str, files: Optional[Mapping[str, Union[str, bytes]]] = None) -> t.Skill:
        """Save a new version of a skill from its SKILL.md text and files."""
        body: Dict[str, Any] = {"skill_md": skill_md}
        if files:
            body["files"] = [{"path": p, "content": base64.b64encode(c).decode(), "encoding": "base64"}
                             if isinstance(c, bytes) else {"path": p, "content": c} for p, c in files.items()]
        return self._request("PUT", "/v1/skills/" + urllib.parse.quote(name, safe=""), json_body=body)

    def save_skill_archive(self, name: str, archive: bytes, *, format: str = "zip") -> t.Skill:
        """Save a new version of a skill from a zip or tar of its folder."""
        ctype = {"zip": "application/zip", "tar": "application/x-tar"}[format]
        return self._request("PUT", "/v1/skills/" + urllib.parse.quote(name, safe=""), body=archive, content_type=ctype)

    def download_skill(self, name: str, *, format: str = "zip", version: Optional[int] = None) -> bytes:
        """The skill's folder as a zip or tar archive."""
        return self._request("GET", "/v1/skills/" + urllib.parse.quote(name, safe=""),
                             query={"format": format, "version": version}, idempotent=True, raw=True)

    def skill_versions(self, name: str) -> t.SkillVersions:
        return self._request("GET", f"/v1/skills/{urllib.parse.quote(name, safe='')}/versions", idempotent=True)

    def delete_skill(self, name: str) -> None:
        self._request("DELETE", "/v1/skills/" + urllib.parse.quote(name, safe=""), idempotent=True)

    # -- settings and webhooks ---------------------------------------------

    def settings(self) -> t.Settings:
        return self._request("GET", "/v1/settings", idempotent=True)

    def update_settings(self, **fields: Any) -> t.Settings:
        """Change settings, e.g. ``update_settings(webhook_url="https://...")``
        (``""`` removes the default webhook)."""
        return self._request("PATCH", "/v1/settings", json_body=fields, idempotent=True)

    def webhook_secret(self) -> str:
        """The ``whsec_...`` secret that signs the tenant's webhooks."""
        return self._request("GET", "/v1/settings/webhook-secret", idempotent=True)["secret"]

    def rotate_webhook_secret(self) -> t.WebhookSecret:
        """A new webhook secret; the old one goes on signing for a day."""
        return self._request("POST", "/v1/settings/webhook-secret/rotate")

    def languages(self) -> t.LanguageList:
        return self._request("GET", "/v1/languages", idempotent=True)

    def environments(self) -> t.EnvironmentList:
        """The environments (sandbox images) this tenant's jobs may name in environment=."""
        return self._request("GET", "/v1/environments", idempotent=True)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Redirects are never followed with the API key attached."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
        return None


def _sse(resp: Any) -> Iterator[tuple]:
    """The (event, data) pairs of a server-sent event stream."""
    name, data = "", []
    for raw in resp:
        line = raw.decode("utf-8").rstrip("\r\n")
        if not line:
            if name or data:
                yield name, "\n".join(data)
            name, data = "", []
        elif line.startswith(":"):
            continue
        elif line.startswith("event:"):
            name = line[len("event:"):].strip()
        elif line.startswith("data:"):
            data.append(line[len("data:"):].lstrip(" "))

