"""Unit tests of the Rust judge (workspace/rcc/rust.py) and the stand-in/proxy pair.

    python3 -B tests/test_judge.py      # run by tests/env_rust_codecontests.rs
"""

import json
import os
import sys
import time
import unittest
import urllib.error
import urllib.request

ENV = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ENV, "workspace"))

from rcc import rust, standin  # noqa: E402
from rcc.client import Client, SpendLimitError  # noqa: E402
from rcc.proxy import Proxy  # noqa: E402

ECHO = 'use std::io::Read;\nfn main() { let mut s = String::new(); std::io::stdin().read_to_string(&mut s).unwrap(); print!("{}", s); }\n'
SPIN = "fn main() { let mut x: u64 = 1; loop { x = x.wrapping_mul(6364136223846793005).wrapping_add(1); if x == 0 { break; } } println!(\"{}\", x); }\n"
SLEEP = "fn main() { std::thread::sleep(std::time::Duration::from_secs(30)); }\n"
HOG = ("fn main() { let mut v: Vec<u8> = vec![0; 1 << 29]; for i in (0..v.len()).step_by(4096) { v[i] = 1; } "
       "println!(\"{}\", v.iter().map(|&b| b as u64).sum::<u64>()); }\n")
PANIC = 'fn main() { panic!("boom"); }\n'
TESTS = [{"input": "a b  \n\n", "output": "a b\n"}, {"input": "x\n", "output": "x"}]


class Judge(unittest.TestCase):
    def test_accepts_with_trailing_whitespace_ignored(self):
        result = rust.judge(ECHO, TESTS)
        self.assertEqual(result["verdict"], "accepted", result)
        self.assertEqual((result["passed"], result["total"]), (2, 2))

    def test_wrong_answer_stops_at_first_failure(self):
        tests = [{"input": "1\n", "output": "2\n"}] + TESTS
        result = rust.judge(ECHO, tests)
        self.assertEqual(result["verdict"], "wrong_answer")
        self.assertEqual(result["failure"]["test"], 0)
        self.assertEqual(result["passed"], 0)

    def test_compile_error(self):
        result = rust.judge("fn main() { let x: i32 = \"no\"; }\n", TESTS)
        self.assertEqual(result["verdict"], "compile_error")
        self.assertIn("error[E0308]", result["compile_error"])

    def test_cpu_time_limit(self):
        start = time.monotonic()
        result = rust.judge(SPIN, TESTS, time_limit_s=0.5)
        self.assertEqual(result["verdict"], "time_limit", result)
        self.assertLess(time.monotonic() - start, 10)

    def test_wall_clock_limit(self):
        start = time.monotonic()
        result = rust.judge(SLEEP, TESTS, time_limit_s=0.5)
        self.assertEqual(result["verdict"], "time_limit", result)
        self.assertLess(time.monotonic() - start, 10)

    def test_memory_limit(self):
        result = rust.judge(HOG, TESTS, time_limit_s=2, memory_limit_mb=256)
        self.assertEqual(result["verdict"], "memory_limit", result)
        # The same program within a larger limit runs (512 MiB + runtime fits in 1 GiB).
        run_ok = rust.judge(HOG, [{"input": "", "output": "131072"}], time_limit_s=5, memory_limit_mb=1024)
        self.assertEqual(run_ok["verdict"], "accepted", run_ok)

    def test_runtime_error(self):
        result = rust.judge(PANIC, TESTS)
        self.assertEqual(result["verdict"], "runtime_error")
        self.assertIn("boom", result["failure"]["stderr"])

    def test_output_comparison(self):
        self.assertTrue(rust.outputs_match("1\n2\n", "1  \r\n2\n\n\n"))
        self.assertFalse(rust.outputs_match("1\n2\n", "1\n\n2\n"))
        self.assertFalse(rust.outputs_match("a b\n", " a b\n"))

    def test_extract_code(self):
        reply = "text\n```python\nprint(1)\n```\nmore\n```rust\nfn main() {}\n```\nend"
        self.assertEqual(rust.extract_code(reply), "fn main() {}\n")
        self.assertEqual(rust.extract_code("no fences"), "no fences")


class StandInAndProxy(unittest.TestCase):
    def setUp(self):
        path = os.path.join(ENV, "workspace", "problems", "standin_public.json")
        self.knowledge = standin.load_knowledge(path)
        self.problem = next(k for k in self.knowledge if k["kind"] == "sample")

    def test_rules_and_spend_limit(self):
        with standin.Server(self.knowledge) as server, \
                Proxy(server.base_url, "standin", "standin", "tok", max_requests=3, max_tokens=10**6) as proxy:
            client = Client(proxy.base_url, "tok", "anything")
            desc = self.problem["description"]
            self.assertIn("complete problem statement", client.chat("Solve it in Rust"))
            self.assertIn("```python", client.chat(desc))
            good = f"In Rust, reading stdin, in a ```rust code block:\n{desc}"
            first, second = client.sample(good, n=2, temperature=0.7)
            self.assertIn(rust.extract_code(first).strip(), self.problem["wrong"][0])
            self.assertEqual(rust.extract_code(second).strip(), self.problem["correct"].strip())
            with self.assertRaises(SpendLimitError):
                client.chat(good)
            summary = proxy.meter.summary()
            self.assertEqual(summary["requests"], 3)
            self.assertTrue(summary["limit_hit"])
            bad = Client(proxy.base_url, "wrong-key", "x")
            with self.assertRaises(Exception) as caught:
                bad.chat(good)
            self.assertEqual(getattr(caught.exception, "status", None), 401)

    def test_no_stdin_reads_a_file(self):
        s = standin.StandIn(self.knowledge)
        direct = next(k for k in self.knowledge if k["kind"] == "direct")
        reply = s.reply([{"role": "user", "content": "Rust ```\n" + direct["description"]}], 0)
        self.assertIn("input.txt", reply)
        reply = s.reply([{"role": "user", "content": "Rust, stdin ```\n" + direct["description"]}], 0)
        self.assertNotIn("input.txt", reply)


if __name__ == "__main__":
    if rust.rustc_path() is None:
        print("SKIPPED: rustc not found", file=sys.stderr)
        sys.exit(0)
    unittest.main(verbosity=1)
