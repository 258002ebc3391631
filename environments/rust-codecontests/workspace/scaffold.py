"""Your scaffold: turn a programming-contest problem into a Rust program.

The scorer calls solve(problem, client) once per problem, each time in a fresh
Python process with this workspace as the current directory, and judges the
string it returns as the complete source of a Rust program (rustc -O,
edition 2021) on the problem's hidden tests.

problem: {"name": str, "description": str (the statement),
          "public_tests": [{"input": str, "output": str}, ...] (the examples),
          "time_limit_s": float, "memory_limit_mb": int}
client:  rcc.client.Client for the model (see rcc/client.py): client.chat(...),
         client.sample(..., n=...), client.create(...).

This starting version asks once and returns the whole reply.
"""


def solve(problem, client):
    prompt = "Write a Rust program that solves this problem.\n\n" + problem["description"]
    return client.chat([{"role": "user", "content": prompt}], temperature=0)
