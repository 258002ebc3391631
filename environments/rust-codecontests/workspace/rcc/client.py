"""A minimal OpenAI-compatible chat client (standard library only).

`solve(problem, client)` receives a `Client` pointed at the scoring run's
model endpoint. The same settings are in the environment of the scaffold's
process: OPENAI_BASE_URL (ends in /v1), OPENAI_API_KEY and OPENAI_MODEL, so
you may also make your own HTTP requests (POST {OPENAI_BASE_URL}/chat/completions).

    reply = client.chat("Write a Rust program that ...")             # one string
    replies = client.sample(messages, n=4, temperature=0.8)           # n strings
    raw = client.create(messages, temperature=0, max_tokens=800)     # the response JSON

Errors: `ModelError` (HTTP or network trouble), `SpendLimitError` (a
subclass: this scoring run used up its request/token allowance; every later
call fails the same way).
"""

import json
import os
import urllib.error
import urllib.request


class ModelError(RuntimeError):
    def __init__(self, message, status=None):
        super().__init__(message)
        self.status = status


class SpendLimitError(ModelError):
    pass


def as_messages(messages):
    if isinstance(messages, str):
        return [{"role": "user", "content": messages}]
    return list(messages)


class Client:
    def __init__(self, base_url=None, api_key=None, model=None, timeout_s=300.0):
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL", "")).rstrip("/")
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY", "")
        self.model = model or os.environ.get("OPENAI_MODEL", "")
        self.timeout_s = timeout_s
        if not self.base_url:
            raise ModelError("no model endpoint: set OPENAI_BASE_URL or pass base_url")

    def create(self, messages, **params):
        """POST /chat/completions; returns the decoded response object."""
        body = {"model": self.model, "messages": as_messages(messages), **params}
        request = urllib.request.Request(
            self.base_url + "/chat/completions",
            data=json.dumps(body).encode("utf-8"),
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self.api_key}"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                return json.loads(response.read().decode("utf-8"))
        except urllib.error.HTTPError as e:
            text = e.read().decode("utf-8", errors="replace")
            try:
                error = json.loads(text).get("error", {})
            except (ValueError, AttributeError):
                error = {}
            message = error.get("message") if isinstance(error, dict) else None
            kind = SpendLimitError if e.code == 429 and error.get("type") == "spend_limit" else ModelError
            raise kind(f"HTTP {e.code}: {message or text[:300]}", status=e.code) from None
        except (urllib.error.URLError, OSError, ValueError) as e:
            raise ModelError(f"request failed: {e}") from None

    def sample(self, messages, n=1, **params):
        """The contents of the `n` choices of one request."""
        response = self.create(messages, n=n, **params)
        return [(choice.get("message") or {}).get("content") or "" for choice in response.get("choices", [])]

    def chat(self, messages, **params):
        """The content of the first choice."""
        replies = self.sample(messages, n=1, **params)
        return replies[0] if replies else ""
