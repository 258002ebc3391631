"""The metering proxy between the scaffold and the model endpoint.

The scaffold talks to this proxy (OPENAI_BASE_URL); the proxy forwards
POST .../chat/completions to the upstream endpoint with the upstream key
(which the scaffold never sees), forces the model name to the configured
one, refuses streaming, and counts requests and tokens (from the upstream's
`usage`, else ceil(characters / 4)). Once the requests or tokens of this
scoring run reach their limits, every further request is answered
HTTP 429 {"error": {"type": "spend_limit", ...}} without reaching upstream.
"""

import json
import math
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Meter:
    def __init__(self, max_requests, max_tokens):
        self.max_requests = max_requests
        self.max_tokens = max_tokens
        self.requests = 0
        self.refused = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.errors = 0
        self.lock = threading.Lock()

    @property
    def tokens(self):
        return self.prompt_tokens + self.completion_tokens

    def exhausted(self):
        with self.lock:
            return self.requests >= self.max_requests or self.tokens >= self.max_tokens

    def admit(self):
        with self.lock:
            if self.requests >= self.max_requests or self.tokens >= self.max_tokens:
                self.refused += 1
                return False
            self.requests += 1
            return True

    def add(self, prompt_tokens, completion_tokens, error=False):
        with self.lock:
            self.prompt_tokens += prompt_tokens
            self.completion_tokens += completion_tokens
            self.errors += int(error)

    def summary(self):
        with self.lock:
            return {
                "requests": self.requests,
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
                "tokens": self.tokens,
                "refused": self.refused,
                "upstream_errors": self.errors,
                "max_requests": self.max_requests,
                "max_tokens": self.max_tokens,
                "limit_hit": self.refused > 0
                or self.requests >= self.max_requests
                or self.tokens >= self.max_tokens,
            }


def _estimate(body, response):
    prompt = sum(len(str(m.get("content", ""))) for m in body.get("messages", []) if isinstance(m, dict))
    completion = 0
    for choice in (response or {}).get("choices", []) or []:
        completion += len(str(((choice or {}).get("message") or {}).get("content") or ""))
    return math.ceil(prompt / 4), math.ceil(completion / 4)


def _handler(proxy):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def send_json(self, status, payload):
            data = payload if isinstance(payload, bytes) else json.dumps(payload).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def error(self, status, message, kind="invalid_request_error"):
            self.send_json(status, {"error": {"message": message, "type": kind}})

        def do_GET(self):
            self.error(404, "use POST /v1/chat/completions")

        def do_POST(self):
            if not self.path.rstrip("/").endswith("/chat/completions"):
                return self.error(404, f"only POST /v1/chat/completions is served, not {self.path}")
            if self.headers.get("Authorization", "") != f"Bearer {proxy.token}":
                return self.error(401, "wrong API key (use OPENAI_API_KEY)", "authentication_error")
            try:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length).decode("utf-8"))
                if not isinstance(body, dict):
                    raise ValueError("the request body must be a JSON object")
            except ValueError as e:
                return self.error(400, f"bad request body: {e}")
            if body.get("stream"):
                return self.error(400, "streaming is not supported here; leave stream unset")
            body["model"] = proxy.model
            if not proxy.meter.admit():
                s = proxy.meter.summary()
                return self.error(
                    429,
                    f"spend limit reached for this scoring run ({s['requests']}/{s['max_requests']} "
                    f"requests, {s['tokens']}/{s['max_tokens']} tokens)",
                    "spend_limit",
                )
            request = urllib.request.Request(
                proxy.upstream + "/chat/completions",
                data=json.dumps(body).encode("utf-8"),
                headers={"Content-Type": "application/json", "Authorization": f"Bearer {proxy.upstream_key}"},
                method="POST",
            )
            try:
                with urllib.request.urlopen(request, timeout=proxy.timeout_s) as response:
                    data = response.read()
                    status = response.status
            except urllib.error.HTTPError as e:
                data, status = e.read(), e.code
            except (urllib.error.URLError, OSError) as e:
                proxy.meter.add(*_estimate(body, None), error=True)
                return self.error(502, f"model endpoint unreachable: {e}", "upstream_error")
            try:
                decoded = json.loads(data.decode("utf-8"))
            except ValueError:
                decoded = None
            usage = decoded.get("usage") if isinstance(decoded, dict) else None
            if isinstance(usage, dict) and isinstance(usage.get("prompt_tokens"), int):
                proxy.meter.add(usage["prompt_tokens"], int(usage.get("completion_tokens") or 0), status != 200)
            else:
                proxy.meter.add(*_estimate(body, decoded if isinstance(decoded, dict) else None), status != 200)
            self.send_json(status, data)

    return Handler


class Proxy:
    """Serves on 127.0.0.1 (a free port) from a thread; `base_url` ends in /v1."""

    def __init__(self, upstream, upstream_key, model, token, max_requests, max_tokens, timeout_s=300.0):
        self.upstream = upstream.rstrip("/")
        self.upstream_key = upstream_key
        self.model = model
        self.token = token
        self.timeout_s = timeout_s
        self.meter = Meter(max_requests, max_tokens)
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self):
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()
