#!/usr/bin/env python3
"""A minimal external scaffold for rebench: the whole contract in one file.

rebench runs a scaffold (`rebench agent SESSION -- CMD`, which starts the
session's clock first if it has not started, or a campaign agent with
api = "command") with three variables:

  REBENCH_SOCKET   the session's participant socket (newline-delimited JSON)
  REBENCH_SESSION  the session id
  REBENCH_TOKEN    the session's token (it reaches this session only)

Each request is one JSON line {"id": N, "op": ..., ...}; its answer is a
line {"type": "response", "id": N, "result": ...} or {"type": "error",
"id": N, "code": ..., "message": ...}; lines of type "event" are pushes
and can be skipped. The first request is "hello". The operations an agent
needs: "instructions", "show", "exec", "score", "usage", "model_call",
"pause"/"resume" (reason "api_outage"), "submit" (docs/protocol.md has
them all).

This one runs each command given on its command line in the session,
reports the (made-up) tokens it "used", scores, and submits. A real
scaffold would ask its model what to run instead. When it exits without
submitting, a campaign submits for it (exit code 0) or ends the run as
failed (any other exit code).

    python3 examples/scripted_scaffold.py "cat value" "echo 1.6 > value"
"""

import json
import os
import socket
import sys


class Session:
    def __init__(self):
        self.session = os.environ["REBENCH_SESSION"]
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(os.environ["REBENCH_SOCKET"])
        self.stream = sock.makefile("rwb")
        self.next_id = 1
        self.call("hello", version=1, client="scripted_scaffold", token=os.environ["REBENCH_TOKEN"])

    def call(self, op, **fields):
        request_id = self.next_id
        self.next_id += 1
        line = json.dumps({"id": request_id, "op": op, **fields}) + "\n"
        self.stream.write(line.encode())
        self.stream.flush()
        while True:
            raw = self.stream.readline()
            if not raw:
                raise RuntimeError("the server closed the connection")
            answer = json.loads(raw)
            if answer.get("type") == "event" or answer.get("id") != request_id:
                continue
            if answer["type"] == "error":
                raise RuntimeError(f"{op}: {answer['code']}: {answer['message']}")
            return answer["result"]


def main(commands):
    s = Session()
    instructions = s.call("instructions", session=s.session)
    print(f"task: {instructions['title']}", file=sys.stderr)
    for command in commands:
        result = s.call("exec", session=s.session, command=command, timeout_s=60)
        print(f"$ {command} -> exit {result['exit_code']}", file=sys.stderr)
        # What a model call would have cost: reported so the report can price it.
        s.call("usage", session=s.session, tokens_in=len(command) * 10, tokens_out=5, cost_usd=0.0)
    score = s.call("score", session=s.session)
    print(f"score: {score.get('normalized')} ({score['message']})", file=sys.stderr)
    s.call("submit", session=s.session)


if __name__ == "__main__":
    main(sys.argv[1:])
