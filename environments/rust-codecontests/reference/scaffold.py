"""Reference scaffold: a clear prompt, several samples tested on the examples,
and repair rounds with the compiler's or the failing example's feedback."""

from rcc import rust
from rcc.client import ModelError

ROUNDS = 3
SAMPLES = 3

SYSTEM = "You are an expert competitive programmer. You write correct Rust programs."
INSTRUCTIONS = (
    "Solve the following programming problem in Rust (edition 2021, standard library only).\n"
    "The program must read its input from standard input (stdin) and print the answer to standard output.\n"
    "Reply with the complete program in a single ```rust code block.\n\n"
    "Problem:\n\n"
)
FIX = "\n\nPlease fix the program and reply with the complete corrected program in a ```rust code block."


def feedback(result):
    if result["verdict"] == "compile_error":
        return "The program does not compile. The compiler reported this error:\n\n" + result["compile_error"] + FIX
    failure = result.get("failure") or {}
    text = (f"The program fails on an example ({result['verdict'].replace('_', ' ')}).\n\n"
            f"Input:\n{failure.get('input', '')}\nExpected output:\n{failure.get('expected', '')}\n"
            f"Your program's output:\n{failure.get('got', '')}")
    if failure.get("stderr"):
        text += f"\nIts stderr:\n{failure['stderr']}"
    return text + FIX


def solve(problem, client):
    messages = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": INSTRUCTIONS + problem["description"]},
    ]
    fallback = ""
    for _ in range(ROUNDS):
        try:
            replies = client.sample(messages, n=SAMPLES, temperature=0.8, max_tokens=2000)
        except ModelError:
            break
        first = None
        for reply in replies:
            code = rust.extract_code(reply)
            result = rust.judge(code, problem["public_tests"], problem["time_limit_s"], problem["memory_limit_mb"])
            if result["verdict"] == "accepted":
                return code
            if first is None:
                first = (reply, result)
            if result["verdict"] != "compile_error" and not fallback:
                fallback = code
        if first is None:
            break
        messages = messages + [{"role": "assistant", "content": first[0]},
                               {"role": "user", "content": feedback(first[1])}]
        fallback = fallback or rust.extract_code(first[0])
    return fallback
