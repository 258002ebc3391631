"""The stand-in model: a deterministic fake of an OpenAI-compatible endpoint.

    python3 -m rcc.standin problems/standin_public.json --port 8000

serves POST /v1/chat/completions (and /chat/completions). It knows a fixed set
of problems (a "knowledge" file: the correct program and the mistakes it tends
to make for each) and answers by rules, never by chance:

1. The *prompt* is all message contents joined. The problem asked about is the
   first known problem whose whole statement (case and whitespace ignored)
   appears in the prompt. None: it asks for the full statement (no code).
   Below, "the prompt mentions X" means X appears in the prompt once the
   statement itself is removed from it (case-insensitive).
2. Not mentioning "rust": it answers in Python.
3. Not mentioning ``` or "code block": the Rust program comes as plain text
   between sentences, without a code fence.
4. Not mentioning "stdin" or "standard input": the program reads its input
   from the file input.txt instead of standard input.
5. Which program it writes depends on the problem's kind:
   - direct: the correct program.
   - feedback: a program that does not compile, until the conversation has an
     assistant message followed by a user message containing "error" (for
     example rustc's messages); then the correct one.
   - wa_feedback: a program that compiles but prints a wrong answer on the
     examples, until an assistant message is followed by a user message
     containing "expected"; then the correct one.
   - sample: a cycle of programs, wrong ones first and the correct one last.
     With temperature 0 it always writes the first. Otherwise each completion
     it produces for that problem (each of the n choices counts) takes the
     next program of the cycle, per server, in order of arrival.
   - trap: a program that passes the examples but fails hidden tests (too
     slow, too much memory, overflow, a missed corner case), unless the prompt
     mentions one of the problem's hint words; then the correct one.
6. `max_tokens`: a reply longer than it (in tokens = ceil(characters / 4))
   is cut to that length, with finish_reason "length".
Usage is reported as prompt_tokens = ceil(len(prompt) / 4) and
completion_tokens = ceil(len(reply) / 4) per choice. Temperature defaults to 1.
"""

import argparse
import json
import math
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STDIN_LINE = "std::io::stdin().read_to_string(&mut input).unwrap();"
FILE_LINE = 'input = std::fs::read_to_string("input.txt").unwrap();'

PYTHON_ANSWER = """Here is a solution in Python:

```python
import sys


def main():
    data = sys.stdin.read().split()
    print(" ".join(data))


main()
```
"""

NO_STATEMENT = (
    "I'm sorry, I could not find a complete problem statement in your message. "
    "Please include the full statement and I will write a solution."
)


def normalize(text):
    return " ".join(text.lower().split())


def tokens(text):
    return math.ceil(len(text) / 4)


def message_text(message):
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def load_knowledge(path):
    """A list of problems with their programs; accepts a JSON list or JSON lines."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if text.lstrip().startswith("["):
        entries = json.loads(text)
    else:
        entries = [json.loads(line) for line in text.splitlines() if line.strip()]
    knowledge = []
    for entry in entries:
        answers = entry.get("standin", entry)
        knowledge.append({"name": entry["name"], "description": entry["description"], **answers})
    return knowledge


class StandIn:
    def __init__(self, knowledge):
        self.knowledge = [dict(k, _norm=normalize(k["description"])) for k in knowledge]
        self.counters = {}
        self.lock = threading.Lock()

    def find(self, prompt_norm):
        for problem in self.knowledge:
            if problem["_norm"] and problem["_norm"] in prompt_norm:
                return problem
        return None

    @staticmethod
    def followed_by(messages, word):
        """Whether an assistant message is followed by a user message containing `word`."""
        seen_assistant = False
        for m in messages:
            role = m.get("role") if isinstance(m, dict) else None
            if role == "assistant":
                seen_assistant = True
            elif role == "user" and seen_assistant and word in message_text(m).lower():
                return True
        return False

    def program(self, problem, messages, rest, temperature):
        kind = problem["kind"]
        if kind == "direct":
            return problem["correct"]
        if kind == "feedback":
            return problem["correct"] if self.followed_by(messages, "error") else problem["broken"]
        if kind == "wa_feedback":
            return problem["correct"] if self.followed_by(messages, "expected") else problem["wrong"][0]
        if kind == "sample":
            cycle = problem["wrong"] + [problem["correct"]]
            if temperature == 0:
                return cycle[0]
            with self.lock:
                k = self.counters.get(problem["name"], 0)
                self.counters[problem["name"]] = k + 1
            return cycle[k % len(cycle)]
        if kind == "trap":
            if any(hint in rest for hint in problem["hints"]):
                return problem["correct"]
            return problem["trap"]
        raise ValueError(f"unknown kind {kind!r}")

    def reply(self, messages, temperature):
        prompt = "\n".join(message_text(m) for m in messages)
        prompt_norm = normalize(prompt)
        problem = self.find(prompt_norm)
        if problem is None:
            return NO_STATEMENT
        rest = prompt_norm.replace(problem["_norm"], " ")
        if not re.search(r"\brust\b", rest):
            return PYTHON_ANSWER
        code = self.program(problem, messages, rest, temperature).rstrip("\n")
        if "stdin" not in rest and "standard input" not in rest:
            code = code.replace(STDIN_LINE, FILE_LINE)
        fixing = self.followed_by(messages, "error") or self.followed_by(messages, "expected")
        opening = "You are right, here is the corrected program." if fixing else "Here is a solution in Rust."
        if "```" not in rest and "code block" not in rest:
            return f"{opening}\n\n{code}\n\nIt reads the input, computes the answer and prints it."
        return f"{opening}\n\n```rust\n{code}\n```\n"

    def complete(self, body):
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ValueError("messages must be a non-empty list")
        n = body.get("n", 1)
        if not isinstance(n, int) or not 1 <= n <= 16:
            raise ValueError("n must be an integer from 1 to 16")
        temperature = body.get("temperature", 1.0)
        if temperature is None:
            temperature = 1.0
        if not isinstance(temperature, (int, float)) or not 0 <= temperature <= 2:
            raise ValueError("temperature must be a number from 0 to 2")
        max_tokens = body.get("max_tokens") or body.get("max_completion_tokens")
        prompt_tokens = tokens("\n".join(message_text(m) for m in messages))
        choices = []
        completion_tokens = 0
        for index in range(n):
            content = self.reply(messages, temperature)
            finish = "stop"
            if isinstance(max_tokens, int) and max_tokens > 0 and tokens(content) > max_tokens:
                content = content[: 4 * max_tokens]
                finish = "length"
            completion_tokens += tokens(content)
            choices.append({"index": index, "message": {"role": "assistant", "content": content},
                            "finish_reason": finish})
        return {
            "id": "standin",
            "object": "chat.completion",
            "created": 0,
            "model": body.get("model") or "standin",
            "choices": choices,
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        }


def _handler(standin):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def send_json(self, status, payload):
            data = json.dumps(payload).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self):
            if self.path.rstrip("/") not in ("/v1/chat/completions", "/chat/completions"):
                return self.send_json(404, {"error": {"message": f"no such endpoint {self.path}",
                                                      "type": "invalid_request_error"}})
            try:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length).decode("utf-8"))
                if not isinstance(body, dict):
                    raise ValueError("the request body must be a JSON object")
                response = standin.complete(body)
            except (ValueError, TypeError, KeyError) as e:
                return self.send_json(400, {"error": {"message": str(e), "type": "invalid_request_error"}})
            self.send_json(200, response)

        def do_GET(self):
            self.send_json(404, {"error": {"message": "use POST /v1/chat/completions"}})

    return Handler


class Server:
    """The stand-in on 127.0.0.1 (port 0 = a free one), served from a thread."""

    def __init__(self, knowledge, port=0):
        self.standin = StandIn(knowledge)
        self.httpd = ThreadingHTTPServer(("127.0.0.1", port), _handler(self.standin))
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


def main():
    parser = argparse.ArgumentParser(description="Serve the stand-in model.")
    parser.add_argument("knowledge", help="JSON file of known problems, e.g. problems/standin_public.json")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    with Server(load_knowledge(args.knowledge), args.port) as server:
        print(f"stand-in model at {server.base_url} (Ctrl-C to stop)", flush=True)
        try:
            server.thread.join()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
