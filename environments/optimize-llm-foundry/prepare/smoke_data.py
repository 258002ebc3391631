"""The smoke profile's data, from this Python's standard library (offline,
deterministic for a given Python version):

- a pretraining corpus: the library's .py files (tests, idlelib and
  site-packages left out), to train the tokenizer and the base model;
- the finetuning set: {"prompt", "response"} pairs, one per top-level
  function of a selection of modules: the prompt names the function and
  gives its signature line, the response is the rest of its source.
"""

import ast
import os
import sysconfig
import zlib

SKIP_DIRS = ("site-packages", "idlelib", "__pycache__", "tests", "test", "lib2to3", "turtledemo")


def stdlib_files():
    root = sysconfig.get_paths()["stdlib"]
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("test") and d not in SKIP_DIRS)
        for name in sorted(files):
            if name.endswith(".py") and not name.startswith("test_"):
                found.append(os.path.join(folder, name))
    return root, sorted(found)


def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def corpus(max_chars):
    """Up to max_chars of library source, whole files in path order."""
    root, files = stdlib_files()
    parts, size = [], 0
    for path in files:
        text = read(path)
        if size + len(text) > max_chars:
            continue
        parts.append(text)
        size += len(text)
    return "\n".join(parts)


def finetuning_samples(n, min_chars=120, max_chars=420):
    """n prompt/response pairs from top-level functions, chosen by a fixed
    hash of module + name (not the first n in file order)."""
    root, files = stdlib_files()
    candidates = []
    for path in files:
        text = read(path)
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        lines = text.splitlines(keepends=True)
        module = os.path.relpath(path, root)[:-3].replace(os.sep, ".")
        for node in tree.body:
            if not isinstance(node, ast.FunctionDef) or node.end_lineno is None:
                continue
            source = "".join(lines[node.lineno - 1 : node.end_lineno])
            if not (min_chars <= len(source) <= max_chars) or "\t" in source:
                continue
            head, _, body = source.partition("\n")
            if not body.strip():
                continue
            prompt = f"# {module}.{node.name}\n{head}\n"
            key = zlib.crc32(f"{module}.{node.name}".encode())
            candidates.append((key, prompt, body))
    candidates.sort()
    if len(candidates) < n:
        raise SystemExit(f"only {len(candidates)} candidate functions in the standard library, need {n}")
    return [{"prompt": p, "response": r} for _, p, r in candidates[:n]]
