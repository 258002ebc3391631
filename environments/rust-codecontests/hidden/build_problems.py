"""Builds the smoke problem sets and the stand-in's knowledge of them.

    python3 hidden/build_problems.py          # write the files
    python3 hidden/build_problems.py --check  # also compile and judge every stand-in program

Writes (paths relative to the environment folder):
  workspace/problems/public.jsonl         public problems: statement, public_tests, tests
  workspace/problems/standin_public.json  the stand-in's programs for the public problems
  hidden/heldout_smoke.jsonl              held-out problems, with their tests and the
                                          stand-in's programs ("standin")
Expected outputs come from the Python reference functions below. --check verifies the
design: every correct program is accepted; every "broken" one fails to compile; every
"wrong" one fails a public example; every "trap" passes the examples and fails the tests.
"""

import json
import os
import sys

ENV = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PRELUDE = """use std::io::Read;

fn main() {
    let mut input = String::new();
    std::io::stdin().read_to_string(&mut input).unwrap();
"""


def prog(body):
    lines = [("    " + line if line else "") for line in body.strip("\n").split("\n")]
    return PRELUDE + "\n".join(lines) + "\n}\n"


NUMS = "let v: Vec<i64> = input.split_whitespace().map(|x| x.parse().unwrap()).collect();\nlet n = v[0] as usize;\nlet xs = &v[1..=n];"


def statement(title, story, input_text, output_text, examples):
    parts = [title, "", story, "", "Input", "", input_text, "", "Output", "", output_text, ""]
    for i, (inp, out) in enumerate(examples):
        parts += ["Example" if len(examples) == 1 else f"Example {i + 1}", "", "Input", "", inp.rstrip("\n"),
                  "", "Output", "", out.rstrip("\n"), ""]
    return "\n".join(parts).rstrip() + "\n"


def fib_mod(n, m=1_000_000_007):
    def go(k):  # (F(k), F(k+1))
        if k == 0:
            return 0, 1
        a, b = go(k // 2)
        c = a * ((2 * b - a) % m) % m
        d = (a * a + b * b) % m
        return (d, (c + d) % m) if k % 2 else (c, d)
    return go(n)[0]


def ints(text):
    return [int(x) for x in text.split()]


def list_problem(text):
    v = ints(text)
    return v[1:1 + v[0]]


def fizzbuzz(n):
    out = []
    for i in range(1, n + 1):
        out.append("FizzBuzz" if i % 15 == 0 else "Fizz" if i % 3 == 0 else "Buzz" if i % 5 == 0 else str(i))
    return "\n".join(out)


def gcd(a, b):
    while b:
        a, b = b, a % b
    return a


EDGE = ["edge case", "corner case"]

HELDOUT = [
    dict(
        name="smoke/a-plus-b", kind="direct",
        title="A Plus B",
        story="You are given two integers a and b. Print their sum.",
        input_text="The only line contains two integers a and b (-10^9 <= a, b <= 10^9).",
        output_text="Print a + b.",
        ref=lambda t: str(sum(ints(t))),
        public=["1 2\n"], hidden=["-5 7\n", "1000000000 1000000000\n", "0 0\n"],
        correct=prog("let mut it = input.split_whitespace().map(|x| x.parse::<i64>().unwrap());\n"
                     "let a = it.next().unwrap();\nlet b = it.next().unwrap();\nprintln!(\"{}\", a + b);"),
    ),
    dict(
        name="smoke/reverse-string", kind="feedback",
        title="Reverse a String",
        story="Given a word, print it with its letters in reverse order.",
        input_text="The only line contains a word of 1 to 100 lowercase English letters.",
        output_text="Print the reversed word.",
        ref=lambda t: t.strip()[::-1],
        public=["hello\n"], hidden=["a\n", "abcde\n", "racecar\n", "zyxwvutsrqponmlkjihgfedcba\n"],
        broken=prog("let s: String = input.trim();\nlet r: String = s.chars().rev().collect();\nprintln!(\"{}\", r);"),
        correct=prog("let s = input.trim();\nlet r: String = s.chars().rev().collect();\nprintln!(\"{}\", r);"),
    ),
    dict(
        name="smoke/count-vowels", kind="sample",
        title="Count the Vowels",
        story="Count how many vowels a line of text contains. The vowels are a, e, i, o and u "
              "(the letter y is not a vowel).",
        input_text="The only line contains 1 to 1000 characters: lowercase English letters and spaces.",
        output_text="Print the number of vowels in the line.",
        ref=lambda t: str(sum(c in "aeiou" for c in t.split("\n")[0])),
        public=["happy day\n"],
        hidden=["programming contest\n", "rhythm\n", "aeiou y\n", "the quick brown fox jumps over the lazy dog\n"],
        wrong=[prog("let line = input.lines().next().unwrap_or(\"\");\n"
                    "let count = line.chars().filter(|c| \"aeiouy\".contains(*c)).count();\nprintln!(\"{}\", count);")],
        correct=prog("let line = input.lines().next().unwrap_or(\"\");\n"
                     "let count = line.chars().filter(|c| \"aeiou\".contains(*c)).count();\nprintln!(\"{}\", count);"),
    ),
    dict(
        name="smoke/fizzbuzz", kind="wa_feedback",
        title="FizzBuzz",
        story="For every integer i from 1 to n print one line: FizzBuzz if i is divisible by 15, otherwise "
              "Fizz if i is divisible by 3, otherwise Buzz if i is divisible by 5, otherwise i itself.",
        input_text="The only line contains an integer n (1 <= n <= 10^5).",
        output_text="Print n lines as described.",
        ref=lambda t: fizzbuzz(int(t)),
        public=["15\n"], hidden=["1\n", "7\n", "100\n", "3000\n"],
        wrong=[prog("let n: u32 = input.trim().parse().unwrap();\nlet mut out = String::new();\nfor i in 1..=n {\n"
                    "    if i % 15 == 0 {\n        out.push_str(\"Fizzbuzz\\n\");\n    } else if i % 3 == 0 {\n"
                    "        out.push_str(\"Fizz\\n\");\n    } else if i % 5 == 0 {\n        out.push_str(\"Buzz\\n\");\n"
                    "    } else {\n        out.push_str(&format!(\"{}\\n\", i));\n    }\n}\nprint!(\"{}\", out);")],
        correct=prog("let n: u32 = input.trim().parse().unwrap();\nlet mut out = String::new();\nfor i in 1..=n {\n"
                     "    if i % 15 == 0 {\n        out.push_str(\"FizzBuzz\\n\");\n    } else if i % 3 == 0 {\n"
                     "        out.push_str(\"Fizz\\n\");\n    } else if i % 5 == 0 {\n        out.push_str(\"Buzz\\n\");\n"
                     "    } else {\n        out.push_str(&format!(\"{}\\n\", i));\n    }\n}\nprint!(\"{}\", out);"),
    ),
    dict(
        name="smoke/max-of-list", kind="trap", hints=EDGE + ["negative"],
        title="Largest Number",
        story="Given a list of integers, print the largest of them.",
        input_text="The first line contains n (1 <= n <= 1000). The second line contains n integers "
                   "a_1, ..., a_n (-10^9 <= a_i <= 10^9).",
        output_text="Print the maximum of the a_i.",
        ref=lambda t: str(max(list_problem(t))),
        public=["5\n3 9 2 7 4\n"], hidden=["1\n42\n", "3\n-5 -2 -9\n", "4\n0 1000000000 -1000000000 5\n"],
        trap=prog(NUMS + "\nlet mut best = 0i64;\nfor &x in xs {\n    if x > best {\n        best = x;\n    }\n}\n"
                  "println!(\"{}\", best);"),
        correct=prog(NUMS + "\nprintln!(\"{}\", xs.iter().max().unwrap());"),
    ),
    dict(
        name="smoke/gcd", kind="sample",
        title="Greatest Common Divisor",
        story="Print the greatest common divisor of two positive integers a and b: the largest integer "
              "that divides both.",
        input_text="The only line contains two integers a and b (1 <= a, b <= 10^18).",
        output_text="Print gcd(a, b).",
        ref=lambda t: str(gcd(*ints(t))),
        public=["12 18\n"], hidden=["7 13\n", "1000000000000000000 250000000000000000\n", "5 5\n", "1 999\n"],
        wrong=[prog("let mut it = input.split_whitespace().map(|x| x.parse::<u64>().unwrap());\n"
                    "let a = it.next().unwrap();\nlet b = it.next().unwrap();\nprintln!(\"{}\", a.min(b));"),
               prog("let mut it = input.split_whitespace().map(|x| x.parse::<u64>().unwrap());\n"
                    "let a = it.next().unwrap();\nlet b = it.next().unwrap();\nprintln!(\"{}\", a % b);")],
        correct=prog("let mut it = input.split_whitespace().map(|x| x.parse::<u64>().unwrap());\n"
                     "let mut a = it.next().unwrap();\nlet mut b = it.next().unwrap();\nwhile b != 0 {\n"
                     "    let t = a % b;\n    a = b;\n    b = t;\n}\nprintln!(\"{}\", a);"),
    ),
    dict(
        name="smoke/palindrome", kind="feedback",
        title="Palindrome",
        story="A word is a palindrome if it reads the same forwards and backwards. Decide whether the "
              "given word is a palindrome.",
        input_text="The only line contains a word of 1 to 100 lowercase English letters.",
        output_text="Print YES if the word is a palindrome and NO otherwise.",
        ref=lambda t: "YES" if t.strip() == t.strip()[::-1] else "NO",
        public=["level\n", "rust\n"], hidden=["a\n", "ab\n", "abba\n", "abca\n"],
        broken=prog("let s = input.trim();\nif s == s.chars().rev() {\n    println!(\"YES\");\n} else {\n"
                    "    println!(\"NO\");\n}"),
        correct=prog("let s = input.trim();\nlet r: String = s.chars().rev().collect();\nif s == r {\n"
                     "    println!(\"YES\");\n} else {\n    println!(\"NO\");\n}"),
    ),
    dict(
        name="smoke/sum-of-numbers", kind="trap", hints=EDGE + ["overflow", "64-bit", "i64"],
        title="Sum of Numbers",
        story="Print the sum of the given numbers.",
        input_text="The first line contains n (1 <= n <= 2 * 10^5). The second line contains n integers "
                   "a_1, ..., a_n (0 <= a_i <= 10^9).",
        output_text="Print a_1 + ... + a_n.",
        ref=lambda t: str(sum(list_problem(t))),
        public=["3\n1 2 3\n"], hidden=["1\n0\n", "3\n1000000000 1000000000 1000000000\n", "2\n999999999 1\n"],
        trap=prog("let mut it = input.split_whitespace().map(|x| x.parse::<i32>().unwrap());\n"
                  "let n = it.next().unwrap();\nlet mut sum: i32 = 0;\nfor _ in 0..n {\n"
                  "    sum = sum.wrapping_add(it.next().unwrap());\n}\nprintln!(\"{}\", sum);"),
        correct=prog(NUMS + "\nprintln!(\"{}\", xs.iter().sum::<i64>());"),
    ),
    dict(
        name="smoke/range-sum-mod", kind="trap", hints=EDGE + ["complexity", "efficient"],
        title="Range Sum Modulo",
        story="Print the remainder of 1 + 2 + ... + n when divided by m.",
        input_text="The only line contains two integers n and m (1 <= n <= 10^18, 1 <= m <= 10^9).",
        output_text="Print (1 + 2 + ... + n) mod m.",
        ref=lambda t: str((lambda n, m: n * (n + 1) // 2 % m)(*ints(t))),
        public=["10 7\n"], hidden=["1 1\n", "1000000000000 1000000007\n", "1000000000000000000 999999937\n"],
        trap=prog("let mut it = input.split_whitespace().map(|x| x.parse::<u64>().unwrap());\n"
                  "let n = it.next().unwrap();\nlet m = it.next().unwrap();\nlet mut s = 0u64;\nfor i in 1..=n {\n"
                  "    s = (s + i % m) % m;\n}\nprintln!(\"{}\", s);"),
        correct=prog("let mut it = input.split_whitespace().map(|x| x.parse::<u128>().unwrap());\n"
                     "let n = it.next().unwrap();\nlet m = it.next().unwrap();\nprintln!(\"{}\", n * (n + 1) / 2 % m);"),
    ),
    dict(
        name="smoke/fibonacci-mod", kind="trap", hints=EDGE + ["memory"],
        title="Fibonacci Modulo",
        story="The Fibonacci numbers are F(0) = 0, F(1) = 1 and F(k) = F(k - 1) + F(k - 2). "
              "Print F(n) modulo 1000000007.",
        input_text="The only line contains an integer n (1 <= n <= 10^8).",
        output_text="Print F(n) mod 1000000007.",
        ref=lambda t: str(fib_mod(int(t))),
        public=["10\n"], hidden=["1\n", "90\n", "100000000\n"],
        trap=prog("let n: usize = input.trim().parse().unwrap();\nconst M: u64 = 1_000_000_007;\n"
                  "let mut f = vec![0u64; n + 1];\nf[1] = 1;\nfor i in 2..=n {\n    f[i] = (f[i - 1] + f[i - 2]) % M;\n}\n"
                  "println!(\"{}\", f[n]);"),
        correct=prog("let n: u64 = input.trim().parse().unwrap();\nconst M: u64 = 1_000_000_007;\n"
                     "let (mut a, mut b) = (0u64, 1u64);\nfor _ in 0..n {\n    let mut c = a + b;\n    if c >= M {\n"
                     "        c -= M;\n    }\n    a = b;\n    b = c;\n}\nprintln!(\"{}\", a);"),
    ),
    dict(
        name="smoke/distinct-values", kind="direct",
        title="Distinct Values",
        story="Count how many different values appear in a list of integers.",
        input_text="The first line contains n (1 <= n <= 10^5). The second line contains n integers "
                   "a_1, ..., a_n (-10^9 <= a_i <= 10^9).",
        output_text="Print the number of distinct a_i.",
        ref=lambda t: str(len(set(list_problem(t)))),
        public=["5\n1 2 2 3 1\n"], hidden=["1\n7\n", "4\n-1 -1 -1 -1\n", "6\n1 -1 2 -2 0 0\n"],
        correct=prog(NUMS + "\nlet set: std::collections::HashSet<i64> = xs.iter().cloned().collect();\n"
                     "println!(\"{}\", set.len());"),
    ),
    dict(
        name="smoke/sort-numbers", kind="sample",
        title="Sort the Numbers",
        story="Print the given integers in non-decreasing order.",
        input_text="The first line contains n (1 <= n <= 10^5). The second line contains n integers "
                   "a_1, ..., a_n (-10^9 <= a_i <= 10^9).",
        output_text="Print the n integers in non-decreasing order, separated by spaces.",
        ref=lambda t: " ".join(map(str, sorted(list_problem(t)))),
        public=["4\n3 1 4 1\n"], hidden=["1\n5\n", "5\n-1 -5 3 0 2\n", "3\n2 2 1\n"],
        wrong=[prog(NUMS + "\nlet mut s = xs.to_vec();\ns.sort();\ns.reverse();\n"
                    "let out: Vec<String> = s.iter().map(|x| x.to_string()).collect();\nprintln!(\"{}\", out.join(\" \"));")],
        correct=prog(NUMS + "\nlet mut s = xs.to_vec();\ns.sort();\n"
                     "let out: Vec<String> = s.iter().map(|x| x.to_string()).collect();\nprintln!(\"{}\", out.join(\" \"));"),
    ),
]

PUBLIC = [
    dict(
        name="public/multiply", kind="direct",
        title="Multiply Two Numbers",
        story="You are given two integers a and b. Print their product.",
        input_text="The only line contains two integers a and b (-10^9 <= a, b <= 10^9).",
        output_text="Print a * b.",
        ref=lambda t: str(ints(t)[0] * ints(t)[1]),
        public=["3 4\n"], hidden=["-2 5\n", "1000000000 1000000000\n", "0 -7\n"],
        correct=prog("let mut it = input.split_whitespace().map(|x| x.parse::<i64>().unwrap());\n"
                     "let a = it.next().unwrap();\nlet b = it.next().unwrap();\nprintln!(\"{}\", a * b);"),
    ),
    dict(
        name="public/uppercase", kind="feedback",
        title="Shout",
        story="Print the given line with every lowercase letter replaced by the matching uppercase letter.",
        input_text="The only line contains 1 to 100 characters: lowercase English letters and spaces.",
        output_text="Print the line in uppercase.",
        ref=lambda t: t.split("\n")[0].upper(),
        public=["hello world\n"], hidden=["a\n", "rust is fun\n", "abc xyz\n"],
        broken=prog("let line = input.lines().next().unwrap_or(\"\");\nprintln!(\"{}\", line.to_upper());"),
        correct=prog("let line = input.lines().next().unwrap_or(\"\");\nprintln!(\"{}\", line.to_uppercase());"),
    ),
    dict(
        name="public/count-even", kind="sample",
        title="Even Numbers",
        story="Count the even numbers in a list of integers.",
        input_text="The first line contains n (1 <= n <= 1000). The second line contains n integers "
                   "a_1, ..., a_n (-10^9 <= a_i <= 10^9).",
        output_text="Print how many of the a_i are even.",
        ref=lambda t: str(sum(x % 2 == 0 for x in list_problem(t))),
        public=["5\n1 2 3 4 6\n"], hidden=["1\n7\n", "4\n-2 -3 0 8\n", "3\n1 3 5\n"],
        wrong=[prog(NUMS + "\nprintln!(\"{}\", xs.iter().filter(|&&x| x % 2 != 0).count());")],
        correct=prog(NUMS + "\nprintln!(\"{}\", xs.iter().filter(|&&x| x % 2 == 0).count());"),
    ),
    dict(
        name="public/is-sorted", kind="wa_feedback",
        title="Is It Sorted?",
        story="Decide whether a list of integers is in non-decreasing order.",
        input_text="The first line contains n (1 <= n <= 1000). The second line contains n integers "
                   "a_1, ..., a_n (-10^9 <= a_i <= 10^9).",
        output_text="Print YES if a_1 <= a_2 <= ... <= a_n and NO otherwise.",
        ref=lambda t: "YES" if list_problem(t) == sorted(list_problem(t)) else "NO",
        public=["3\n1 2 2\n", "3\n3 1 2\n"], hidden=["1\n5\n", "4\n-3 -1 0 0\n", "2\n2 1\n"],
        wrong=[prog(NUMS + "\nlet ok = xs.windows(2).all(|w| w[0] <= w[1]);\n"
                    "println!(\"{}\", if ok { \"Yes\" } else { \"No\" });")],
        correct=prog(NUMS + "\nlet ok = xs.windows(2).all(|w| w[0] <= w[1]);\n"
                     "println!(\"{}\", if ok { \"YES\" } else { \"NO\" });"),
    ),
    dict(
        name="public/min-of-list", kind="trap", hints=EDGE + ["positive"],
        title="Smallest Number",
        story="Given a list of integers, print the smallest of them.",
        input_text="The first line contains n (1 <= n <= 1000). The second line contains n integers "
                   "a_1, ..., a_n (-10^9 <= a_i <= 10^9).",
        output_text="Print the minimum of the a_i.",
        ref=lambda t: str(min(list_problem(t))),
        public=["3\n5 -2 7\n"], hidden=["3\n4 9 6\n", "1\n-8\n"],
        trap=prog(NUMS + "\nlet mut best = 0i64;\nfor &x in xs {\n    if x < best {\n        best = x;\n    }\n}\n"
                  "println!(\"{}\", best);"),
        correct=prog(NUMS + "\nprintln!(\"{}\", xs.iter().min().unwrap());"),
    ),
    dict(
        name="public/power-of-two", kind="sample",
        title="Power of Two",
        story="Print 2 to the power n, modulo 1000000007.",
        input_text="The only line contains an integer n (0 <= n <= 10^18).",
        output_text="Print 2^n mod 1000000007.",
        ref=lambda t: str(pow(2, int(t), 1_000_000_007)),
        public=["10\n"], hidden=["0\n", "100\n", "1000000000000000000\n"],
        wrong=[prog("let n: u64 = input.trim().parse().unwrap();\nprintln!(\"{}\", (2 * (n % 1_000_000_007)) % 1_000_000_007);")],
        correct=prog("let mut n: u64 = input.trim().parse().unwrap();\nconst M: u64 = 1_000_000_007;\n"
                     "let mut base = 2u64;\nlet mut result = 1u64;\nwhile n > 0 {\n    if n & 1 == 1 {\n"
                     "        result = result * base % M;\n    }\n    base = base * base % M;\n    n >>= 1;\n}\n"
                     "println!(\"{}\", result);"),
    ),
]

STANDIN_KEYS = ("kind", "correct", "broken", "wrong", "trap", "hints")


def build(spec):
    examples = [(i, spec["ref"](i) + "\n") for i in spec["public"]]
    description = statement(spec["title"], spec["story"], spec["input_text"], spec["output_text"], examples)
    public_tests = [{"input": i, "output": o} for i, o in examples]
    tests = public_tests + [{"input": i, "output": spec["ref"](i) + "\n"} for i in spec["hidden"]]
    problem = {"name": spec["name"], "description": description, "public_tests": public_tests,
               "tests": tests, "time_limit_s": 1.0, "memory_limit_mb": 256}
    standin = {k: spec[k] for k in STANDIN_KEYS if k in spec}
    standin.setdefault("wrong", [])
    return problem, standin


def check(problem, standin):
    sys.path.insert(0, os.path.join(ENV, "workspace"))
    from rcc import rust
    from rcc.standin import STDIN_LINE

    name = problem["name"]
    judge = lambda src, tests: rust.judge(src, tests, problem["time_limit_s"], problem["memory_limit_mb"])
    programs = [standin["correct"]] + standin.get("wrong", []) + [standin[k] for k in ("broken", "trap") if k in standin]
    for src in programs:
        assert STDIN_LINE in src, f"{name}: a program does not read stdin with the marked line"
    verdict = judge(standin["correct"], problem["tests"])
    assert verdict["verdict"] == "accepted", f"{name}: correct program: {verdict}"
    if "broken" in standin:
        v = judge(standin["broken"], problem["tests"])
        assert v["verdict"] == "compile_error", f"{name}: broken program: {v}"
    for src in standin["wrong"]:
        v = judge(src, problem["public_tests"])
        assert v["verdict"] != "accepted", f"{name}: a wrong program passes the examples"
    if "trap" in standin:
        v = judge(standin["trap"], problem["public_tests"])
        assert v["verdict"] == "accepted", f"{name}: trap fails the examples: {v}"
        v = judge(standin["trap"], problem["tests"])
        assert v["verdict"] != "accepted", f"{name}: trap passes every test"
        print(f"  {name}: trap -> {v['verdict']}")
    print(f"ok {name} ({standin['kind']})")


def main():
    verify = "--check" in sys.argv[1:]
    public, knowledge = [], []
    for spec in PUBLIC:
        problem, standin = build(spec)
        if verify:
            check(problem, standin)
        public.append(problem)
        knowledge.append({"name": problem["name"], "description": problem["description"], **standin})
    heldout = []
    for spec in HELDOUT:
        problem, standin = build(spec)
        if verify:
            check(problem, standin)
        heldout.append({**problem, "standin": standin})
    with open(os.path.join(ENV, "workspace/problems/public.jsonl"), "w", encoding="utf-8") as f:
        for p in public:
            f.write(json.dumps(p) + "\n")
    with open(os.path.join(ENV, "workspace/problems/standin_public.json"), "w", encoding="utf-8") as f:
        json.dump(knowledge, f, indent=1)
        f.write("\n")
    with open(os.path.join(ENV, "hidden/heldout_smoke.jsonl"), "w", encoding="utf-8") as f:
        for p in heldout:
            f.write(json.dumps(p) + "\n")
    print(f"wrote {len(public)} public and {len(heldout)} held-out problems")


if __name__ == "__main__":
    main()
