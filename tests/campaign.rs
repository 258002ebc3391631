//! Agent campaigns through the real server and binary, with stand-in model
//! servers on 127.0.0.1 (one per API shape) scripted to solve the `fixed`
//! fixture (write the reference value, score, submit) or to do nothing.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::model_server::{Fault, ModelServer, Step};
use common::{BIN, TestServer, fixture_env, wait_until};
use serde_json::{Value, json};

fn good_script() -> Vec<Step> {
    vec![
        ("bash", json!({"command": "cat value"})),
        ("bash", json!({"command": "echo 1.6 > value"})),
        ("score", json!({})),
        ("submit", json!({})),
    ]
}

fn weak_script() -> Vec<Step> {
    vec![("bash", json!({"command": "ls"})), ("submit", json!({}))]
}

struct Setup {
    server: TestServer,
    _env_dir: tempfile::TempDir,
    env: PathBuf,
    files: tempfile::TempDir,
}

fn setup() -> Setup {
    let (env_dir, env) = fixture_env(|t| t);
    Setup {
        server: TestServer::start(),
        _env_dir: env_dir,
        env,
        files: tempfile::tempdir().unwrap(),
    }
}

impl Setup {
    fn write_campaign(&self, text: &str) -> PathBuf {
        let path = self.files.path().join("campaign.toml");
        std::fs::write(&path, text).unwrap();
        path
    }

    fn campaign(&self, args: &[&str]) -> Output {
        let mut all = vec!["campaign"];
        all.extend_from_slice(args);
        self.server.cli(&all)
    }

    fn status(&self, name: &str) -> Value {
        let out = self.campaign(&["status", name, "--json"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    fn show(&self, session: &str) -> Value {
        let out = self.server.cli(&["show", session, "--json"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    fn events(&self, session: &str) -> Vec<Value> {
        let out = self.server.cli(&["events", session]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// Sessions (of any campaign) per run id.
    fn sessions_per_run(&self) -> std::collections::HashMap<String, usize> {
        let out = self.server.cli(&["sessions", "--json"]);
        let sessions: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
        let mut per_run = std::collections::HashMap::new();
        for s in sessions {
            if let Some(run) = s["campaign"]["run"].as_str() {
                *per_run.entry(run.to_string()).or_insert(0) += 1;
            }
        }
        per_run
    }
}

fn ok(out: &Output) {
    assert!(
        out.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// What differs between the one-agent campaigns of these tests.
struct Parts {
    name: &'static str,
    /// `[campaign]` lines besides the name.
    campaign: &'static str,
    /// The agent's name and model, and its lines besides those.
    agent: (&'static str, &'static str, &'static str),
    /// The `[runs]` lines.
    runs: String,
}

/// A campaign of one OpenAI-shaped agent on the fixture `env`.
fn one_agent(models: &ModelServer, env: &Path, parts: Parts) -> String {
    let (agent, model, agent_lines) = parts.agent;
    format!(
        "[campaign]\nname = \"{}\"\n{}\n\n[[agents]]\nname = \"{agent}\"\napi = \"openai\"\n\
         base_url = \"{}\"\nmodel = \"{model}\"\n{agent_lines}\n\n[[environments]]\nid = \"{}\"\n\n[runs]\n{}\n",
        parts.name,
        parts.campaign,
        models.base_url(),
        env.display(),
        parts.runs
    )
}

fn two_agents(models: &ModelServer, env: &Path, extra: &str) -> String {
    format!(
        r#"
[campaign]
name = "demo"
concurrency = 4
{extra}

[[agents]]
name = "good"
api = "openai"
base_url = "{url}"
model = "good-model"
price_in = 2.0
price_out = 10.0

[[agents]]
name = "weak"
api = "anthropic"
base_url = "{url}"
model = "weak-model"

[[environments]]
id = "{env}"

[runs]
lengths = ["2m", "3m"]
attempts = 2
"#,
        url = models.base_url(),
        env = env.display()
    )
}

#[test]
fn a_campaign_of_two_agents_runs_every_run_once_to_the_end() {
    let s = setup();
    let models = ModelServer::start(vec![
        ("good-model", good_script()),
        ("weak-model", weak_script()),
    ]);
    let file = s.write_campaign(&two_agents(&models, &s.env, ""));
    let out = s.campaign(&["run", file.to_str().unwrap()]);
    ok(&out);
    let status = s.status("demo");
    let runs = status["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2 * 2 * 2);
    for run in runs {
        assert_eq!(run["state"], "done", "{run}");
        let normalized = run["final"]["normalized"].as_f64().unwrap();
        match run["agent"].as_str().unwrap() {
            "good" => {
                assert!((normalized - 1.0).abs() < 1e-6, "{run}");
                // 4 calls of 100..130 prompt tokens and 20 answer tokens, priced.
                assert_eq!(run["tokens_in"], 100 + 110 + 120 + 130);
                assert_eq!(run["tokens_out"], 80);
                let cost = run["cost"].as_f64().unwrap();
                assert!(
                    (cost - (460.0 * 2.0 + 80.0 * 10.0) / 1e6).abs() < 1e-12,
                    "{cost}"
                );
            }
            "weak" => {
                assert!(normalized.abs() < 1e-6, "{run}");
                assert_eq!(run["cost"], 0.0);
            }
            other => panic!("agent {other}"),
        }
        assert!(
            ["2m", "3m"].contains(&run["length"].as_str().unwrap()),
            "{run}"
        );
    }
    assert!(s.sessions_per_run().values().all(|n| *n == 1));
    assert_eq!(s.sessions_per_run().len(), 8);
    // Each session says whose it is, and its log holds the conversation.
    let good = runs.iter().find(|r| r["agent"] == "good").unwrap();
    let session = good["session"].as_str().unwrap();
    let view = s.show(session);
    assert_eq!(view["kind"], "agent");
    assert_eq!(
        view["agent"],
        json!({"name": "good", "model": "good-model", "scaffold": "builtin"})
    );
    assert_eq!(view["end_reason"], "submitted");
    let events = s.events(session);
    let calls: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "model_call")
        .collect();
    assert_eq!(calls.len(), 4);
    let first_input = calls[0]["input"].as_array().unwrap();
    assert_eq!(first_input[0]["role"], "system");
    assert!(
        first_input[1]["text"]
            .as_str()
            .unwrap()
            .contains("Fixed-answer fixture"),
        "the prompt has the instructions' title: {}",
        first_input[1]
    );
    assert_eq!(calls[1]["output"]["tool_calls"][0]["name"], "bash");
    assert!(
        calls[2]["input"][0]["text"]
            .as_str()
            .unwrap()
            .contains("exit code 0")
    );
    // The model saw the time it had left.
    assert!(
        calls[1]["input"][0]["text"]
            .as_str()
            .unwrap()
            .contains("[time left: ")
    );
    // The stand-in saw both shapes, with the tools.
    let seen = models.seen();
    assert!(seen.iter().any(|(p, _)| p == "/v1/chat/completions"));
    assert!(
        seen.iter()
            .any(|(p, b)| p == "/v1/messages" && b["tools"][0]["name"] == "bash")
    );

    // Running it again finds everything done: nothing runs twice.
    let again = s.campaign(&["run", file.to_str().unwrap()]);
    ok(&again);
    assert!(
        String::from_utf8_lossy(&again.stdout).contains("8 done"),
        "{}",
        String::from_utf8_lossy(&again.stdout)
    );
    assert_eq!(s.sessions_per_run().len(), 8);
    let table = s.campaign(&["status", "demo"]);
    ok(&table);
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(text.contains("8/8 finished: 8 done, 0 failed"), "{text}");
    assert!(text.contains("good/fixed/2m/1"), "{text}");

    // A human run of 3 minutes halfway there (raw 2.76: normalized ~0.5).
    let out = s.server.cli(&[
        "new",
        s.env.to_str().unwrap(),
        "--participant",
        "hana",
        "--budget",
        "3m",
        "--json",
    ]);
    ok(&out);
    let human: Value = serde_json::from_slice(&out.stdout).unwrap();
    let human = human["id"].as_str().unwrap();
    ok(&s.server.cli(&["begin", human]));
    let workspace = s.show(human)["workspace"].as_str().unwrap().to_string();
    std::fs::write(Path::new(&workspace).join("value"), "2.76\n").unwrap();
    ok(&s.server.cli(&["submit", human]));
    // The report: one group per agent beside the humans, ranked.
    let out = s.server.cli(&[
        "report",
        "--budgets",
        "3m",
        "--format",
        "json",
        "--resamples",
        "200",
    ]);
    ok(&out);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let groups: Vec<&str> = report["summary"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["environment"] == "fixed")
        .map(|r| r["group"].as_str().unwrap())
        .collect();
    assert_eq!(groups, ["human", "good", "weak"]);
    let ratio = |group: &str| {
        report["comparison"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["group"] == group)
            .unwrap()["ratio"]["value"]
            .as_f64()
            .unwrap_or(0.0)
    };
    assert!(ratio("good") > 1.5, "{report}");
    assert!(ratio("weak") < 0.1, "{report}");
    assert_eq!(report["best_agent"][0]["group"], "good", "{report}");
    // Agents at 3 m use the 3-minute runs only: 2 of each agent's 4.
    let best = report["best_of_k"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["group"] == "good")
        .unwrap()["best"]
        .clone();
    assert_eq!(
        (best["k"].as_u64(), best["runs"].as_u64()),
        (Some(1), Some(2)),
        "{best}"
    );
    // --agent keeps the humans for the comparison.
    let out = s.server.cli(&[
        "report",
        "--budgets",
        "3m",
        "--agent",
        "weak",
        "--format",
        "json",
        "--resamples",
        "50",
    ]);
    ok(&out);
    let only: Value = serde_json::from_slice(&out.stdout).unwrap();
    let groups: std::collections::BTreeSet<&str> = only["summary"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["group"].as_str().unwrap())
        .collect();
    assert_eq!(groups.into_iter().collect::<Vec<_>>(), ["human", "weak"]);
}

#[test]
fn a_changed_file_is_refused_and_so_is_a_second_runner() {
    let s = setup();
    let models = ModelServer::start(vec![
        ("good-model", good_script()),
        ("weak-model", weak_script()),
    ]);
    // The first runner waits at the gate, holding the campaign.
    models.close_gate(1);
    let file = s.write_campaign(&two_agents(&models, &s.env, ""));
    let mut first = runner(&s, &file);
    assert!(wait_until(Duration::from_secs(60), || models
        .waiting
        .load(std::sync::atomic::Ordering::SeqCst)
        > 0));
    let second = s.campaign(&["run", file.to_str().unwrap()]);
    assert_eq!(second.status.code(), Some(1));
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(err.contains("being run by another"), "{err}");
    // A different plan under the same name is refused.
    let changed = s.files.path().join("changed.toml");
    std::fs::write(
        &changed,
        two_agents(&models, &s.env, "").replace("attempts = 2", "attempts = 3"),
    )
    .unwrap();
    let out = s.campaign(&["run", changed.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("different plan"), "{err}");
    // Stop: running runs end (failed), queued ones never start, the runner leaves.
    let stop = s.campaign(&["stop", "demo"]);
    ok(&stop);
    models.open_gate();
    let status = first.wait().unwrap();
    assert!(
        status.success(),
        "the runner exits after a stop: {status:?}"
    );
    let view = s.status("demo");
    assert!(view["stopped_at"].is_string());
    let runs = view["runs"].as_array().unwrap();
    assert!(runs.iter().all(|r| r["state"] != "running"), "{view}");
    let failed: Vec<&Value> = runs.iter().filter(|r| r["state"] == "failed").collect();
    assert!(!failed.is_empty());
    assert!(
        failed.iter().all(|r| r["failure"] == "campaign stopped"),
        "{failed:?}"
    );
    assert!(
        runs.iter().any(|r| r["state"] == "queued"),
        "stopped before every run began"
    );
}

/// `attempts` runs of `good`, two at a time, their runner started: returns
/// once two runs wait at the stand-in's gate before their third model call
/// (after writing the value), the runner still holding them.
fn two_runs_held(
    s: &Setup,
    name: &'static str,
    attempts: u32,
) -> (ModelServer, PathBuf, std::process::Child) {
    let models = ModelServer::start(vec![("good-model", good_script())]);
    models.close_gate(2);
    let runs = format!("lengths = [\"2m\"]\nattempts = {attempts}");
    let file = s.write_campaign(&one_agent(
        &models,
        &s.env,
        Parts {
            name,
            campaign: "concurrency = 2",
            agent: ("good", "good-model", ""),
            runs,
        },
    ));
    let first = runner(s, &file);
    let held = || models.waiting.load(std::sync::atomic::Ordering::SeqCst) >= 2;
    assert!(wait_until(Duration::from_secs(60), held));
    (models, file, first)
}

fn runner(s: &Setup, file: &Path) -> std::process::Child {
    Command::new(BIN)
        .arg("--data-dir")
        .arg(&s.server.paths.root)
        .args(["campaign", "run"])
        .arg(file)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

#[test]
fn kill_9_of_the_server_mid_campaign_then_a_resume_runs_every_run_once() {
    let mut s = setup();
    let (models, file, mut first) = two_runs_held(&s, "resume", 3);
    s.server.kill9();
    let status = first.wait().unwrap();
    assert!(!status.success(), "the runner says it lost the server");
    models.open_gate();
    s.server.spawn();
    let out = s.campaign(&["run", file.to_str().unwrap()]);
    ok(&out);
    let view = s.status("resume");
    let runs = view["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    for run in runs {
        assert_eq!(run["state"], "done", "{run}");
        assert!(
            (run["final"]["normalized"].as_f64().unwrap() - 1.0).abs() < 1e-6,
            "{run}"
        );
    }
    let per_run = s.sessions_per_run();
    assert_eq!(per_run.len(), 3);
    assert!(per_run.values().all(|n| *n == 1), "{per_run:?}");
    // An interrupted run continued its conversation: the prompt was sent once.
    let interrupted: Vec<&Value> = runs
        .iter()
        .filter(|r| {
            let events = s.events(r["session"].as_str().unwrap());
            events
                .iter()
                .any(|e| e["type"] == "paused" && e["reason"] == "crash_recovery")
        })
        .collect();
    assert!(!interrupted.is_empty(), "some run was running at the kill");
    for run in interrupted {
        let events = s.events(run["session"].as_str().unwrap());
        let prompts = events
            .iter()
            .filter(|e| e["type"] == "model_call")
            .filter(|e| {
                e["input"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|m| m["role"] == "system")
            })
            .count();
        assert_eq!(prompts, 1, "{run}");
    }
}

#[test]
fn an_api_outage_pauses_the_run_and_its_time_is_not_counted() {
    let s = setup();
    let models = ModelServer::start(vec![("good-model", good_script())]);
    models.go_down(Duration::from_secs(8));
    let file = s.write_campaign(&one_agent(
        &models,
        &s.env,
        Parts {
            name: "outage",
            campaign: "retry_for = \"1s\"\nprobe_every = \"1s\"",
            agent: ("good", "good-model", ""),
            runs: "lengths = [\"2m\"]".into(),
        },
    ));
    let started = Instant::now();
    ok(&s.campaign(&["run", file.to_str().unwrap()]));
    assert!(started.elapsed() >= Duration::from_secs(8));
    let run = &s.status("outage")["runs"][0];
    assert_eq!(run["state"], "done", "{run}");
    let view = s.show(run["session"].as_str().unwrap());
    let outage = view["pauses"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["reason"] == "api_outage")
        .unwrap_or_else(|| panic!("no api_outage pause: {view}"));
    let at = |v: &Value| chrono::DateTime::parse_from_rfc3339(v.as_str().unwrap()).unwrap();
    let paused_s = (at(&outage["end"]) - at(&outage["start"])).num_milliseconds() as f64 / 1000.0;
    assert!(
        paused_s >= 5.0,
        "the outage lasted 8 s, 1 s of it retried: {paused_s}"
    );
    let wall_s =
        (at(&view["ended_at"]) - at(&view["started_at"])).num_milliseconds() as f64 / 1000.0;
    let active_s = view["active_s"].as_f64().unwrap();
    assert!(
        active_s <= wall_s - paused_s + 0.5,
        "active {active_s}, wall {wall_s}, paused {paused_s}"
    );
    assert!((run["final"]["normalized"].as_f64().unwrap() - 1.0).abs() < 1e-6);
}

#[test]
fn errors_busy_answers_a_hung_connection_and_a_malformed_tool_call_do_not_end_a_run() {
    let s = setup();
    let models = ModelServer::start(vec![("good-model", good_script())]);
    models.push_faults(&[
        Fault::Status(500),
        Fault::Status(429),
        Fault::Hang,
        Fault::Status(502),
        Fault::MalformedToolCall,
    ]);
    let file = s.write_campaign(&one_agent(
        &models,
        &s.env,
        Parts {
            name: "faults",
            campaign: "request_timeout = \"2s\"",
            agent: ("good", "good-model", ""),
            runs: "lengths = [\"2m\"]".into(),
        },
    ));
    ok(&s.campaign(&["run", file.to_str().unwrap()]));
    let run = &s.status("faults")["runs"][0];
    assert_eq!(run["state"], "done", "{run}");
    let session = run["session"].as_str().unwrap();
    let view = s.show(session);
    assert!(
        view["pauses"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["reason"] != "api_outage"),
        "short failures are retried, not paused for: {view}"
    );
    // The malformed call got an error as its result, and the run went on.
    let events = s.events(session);
    let told = events
        .iter()
        .filter(|e| e["type"] == "model_call")
        .any(|e| {
            e["input"][0]["text"]
                .as_str()
                .is_some_and(|t| t.contains("must be a JSON object"))
        });
    assert!(told, "the model was told its arguments were malformed");
    assert!(
        (run["final"]["normalized"].as_f64().unwrap() - 1.0).abs() < 1e-6,
        "{run}"
    );
}

#[test]
fn a_token_limit_ends_the_run_with_its_own_reason() {
    let s = setup();
    let models = ModelServer::start(vec![("good-model", good_script())]);
    let file = s.write_campaign(&one_agent(
        &models,
        &s.env,
        Parts {
            name: "limits",
            campaign: "",
            agent: ("good", "good-model", ""),
            runs: "lengths = [\"2m\"]\nmax_tokens = 250".into(),
        },
    ));
    ok(&s.campaign(&["run", file.to_str().unwrap()]));
    let run = &s.status("limits")["runs"][0];
    assert_eq!(run["state"], "done", "{run}");
    assert_eq!(run["end_reason"], "token_limit", "{run}");
    // 120 then 130 tokens: the second call crossed 250.
    assert_eq!(
        run["tokens_in"].as_u64().unwrap() + run["tokens_out"].as_u64().unwrap(),
        250
    );
}

#[test]
fn an_external_scaffold_runs_with_the_sessions_credentials() {
    let s = setup();
    let example = common::repo_root().join("examples/scripted_scaffold.py");
    let file = s.write_campaign(&format!(
        r#"
[campaign]
name = "external"
concurrency = 2

[[agents]]
name = "script"
api = "command"
model = "none"
command = ["python3", "{}", "cat value", "echo 1.6 > value"]

[[environments]]
id = "{}"

[runs]
lengths = ["2m"]
attempts = 2
"#,
        example.display(),
        s.env.display()
    ));
    ok(&s.campaign(&["run", file.to_str().unwrap()]));
    let view = s.status("external");
    for run in view["runs"].as_array().unwrap() {
        assert_eq!(run["state"], "done", "{run}");
        assert!(
            (run["final"]["normalized"].as_f64().unwrap() - 1.0).abs() < 1e-6,
            "{run}"
        );
        assert!(
            run["tokens_in"].as_u64().unwrap() > 0,
            "the example reports usage: {run}"
        );
        let shown = s.show(run["session"].as_str().unwrap());
        assert!(
            shown["agent"]["scaffold"]
                .as_str()
                .unwrap()
                .contains("scripted_scaffold.py")
        );
    }
}

#[test]
fn a_scripted_agent_solves_prefix_sum_step_by_step_and_outscores_one_that_does_not() {
    let s = setup();
    let reference = std::fs::read_to_string(
        common::repo_root().join("environments/prefix-sum/reference/solution.py"),
    )
    .unwrap();
    let solver = vec![
        ("bash", json!({"command": "cat solution.py"})),
        (
            "bash",
            json!({"command": format!("cat > solution.py <<'PYEOF'\n{reference}\nPYEOF")}),
        ),
        ("score", json!({})),
        ("submit", json!({})),
    ];
    let idler = vec![
        ("bash", json!({"command": "cat solution.py"})),
        ("submit", json!({})),
    ];
    let models = ModelServer::start(vec![("solver", solver), ("idler", idler)]);
    let file = s.write_campaign(&format!(
        r#"
[campaign]
name = "prefix"
concurrency = 2

[[agents]]
name = "solver"
api = "anthropic"
base_url = "{url}"
model = "solver"

[[agents]]
name = "idler"
api = "openai"
base_url = "{url}"
model = "idler"

[[environments]]
id = "prefix-sum"
profile = "smoke"

[runs]
lengths = ["10m"]
"#,
        url = models.base_url()
    ));
    ok(&s.campaign(&["run", file.to_str().unwrap()]));
    let view = s.status("prefix");
    let score = |agent: &str| {
        let run = view["runs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["agent"] == agent)
            .unwrap();
        assert_eq!(run["state"], "done", "{run}");
        run["final"]["raw"].as_f64().unwrap()
    };
    // Runtimes, not normalized scores: those use the manifest's starting
    // and reference times, and on a machine slower than the one they were
    // measured on both runs clamp to 0. The reference takes ~0.78 of the
    // starting solution's time; the margin allows for a loaded machine.
    let (solver_ms, idler_ms) = (score("solver"), score("idler"));
    assert!(
        solver_ms < idler_ms * 0.9,
        "solver {solver_ms} ms, idler {idler_ms} ms"
    );
    // The solver read the code before it wrote a new one.
    let run = view["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["agent"] == "solver")
        .unwrap();
    let events = s.events(run["session"].as_str().unwrap());
    let execs: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "exec")
        .map(|e| e["command"].as_str().unwrap())
        .collect();
    assert_eq!(execs[0], "cat solution.py");
    assert!(execs[1].starts_with("cat > solution.py"));
    let read = events.iter().find(|e| e["type"] == "exec").unwrap();
    assert!(read["stdout"].as_str().unwrap().contains("def prefix_sum"));
}

#[test]
fn the_key_goes_to_the_endpoint_only_never_to_a_server_the_campaign_starts() {
    let (_env_dir, env) = fixture_env(|t| t);
    let files = tempfile::tempdir().unwrap();
    let data = files.path().join("data");
    let models = ModelServer::start(vec![
        ("good-model", good_script()),
        ("weak-model", weak_script()),
    ]);
    let file = files.path().join("c.toml");
    std::fs::write(
        &file,
        format!(
            r#"
[campaign]
name = "keys"

[[agents]]
name = "good"
api = "openai"
base_url = "{url}"
model = "good-model"
key_env = "REBENCH_TEST_OPENAI_KEY"

[[agents]]
name = "weak"
api = "anthropic"
base_url = "{url}"
model = "weak-model"
key_env = "REBENCH_TEST_ANTHROPIC_KEY"

[[environments]]
id = "{env}"

[runs]
lengths = ["2m"]
"#,
            url = models.base_url(),
            env = env.display()
        ),
    )
    .unwrap();
    let run = |with_keys: bool| {
        let mut command = Command::new(BIN);
        command
            .arg("--data-dir")
            .arg(&data)
            .args(["campaign", "run"])
            .arg(&file);
        if with_keys {
            command
                .env("REBENCH_TEST_OPENAI_KEY", "sk-open-secret")
                .env("REBENCH_TEST_ANTHROPIC_KEY", "sk-ant-secret");
        }
        command.output().unwrap()
    };
    // A missing key is named, and nothing starts.
    let out = run(false);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("REBENCH_TEST_OPENAI_KEY") && err.contains("good"),
        "{err}"
    );
    assert!(models.seen().is_empty());
    // With them: no server runs yet, so the campaign starts one.
    ok(&run(true));
    let creds = models.credentials();
    assert!(
        creds.contains(&"Bearer sk-open-secret".to_string()),
        "{creds:?}"
    );
    assert!(creds.contains(&"sk-ant-secret".to_string()), "{creds:?}");
    let pids = String::from_utf8(
        Command::new("pgrep")
            .arg("-f")
            .arg(format!("serve --data-dir {}", data.display()))
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let pid = pids
        .split_whitespace()
        .next()
        .expect("the server the campaign started");
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    let environ = String::from_utf8_lossy(&environ);
    assert!(
        !environ.contains("secret"),
        "the server got a campaign's key"
    );
    let _ = Command::new(BIN)
        .arg("--data-dir")
        .arg(&data)
        .arg("shutdown")
        .output();
}

#[test]
fn kill_9_of_the_runner_pauses_its_sessions_and_a_new_runner_finishes_them() {
    let s = setup();
    let (models, file, mut first) = two_runs_held(&s, "orphans", 2);
    first.kill().unwrap();
    first.wait().unwrap();
    // Nobody drives them now: the server pauses them, off the clock.
    assert!(wait_until(Duration::from_secs(10), || {
        let view = s.status("orphans");
        view["runs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["phase"] == "paused")
    }));
    let view = s.status("orphans");
    assert_eq!(view["runner"], false);
    let session = view["runs"][0]["session"].as_str().unwrap().to_string();
    let shown = s.show(&session);
    let pause = shown["pauses"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(pause["reason"], "technical_issue");
    assert_eq!(pause["by"], "rebench");
    assert!(
        pause["note"]
            .as_str()
            .unwrap()
            .contains("runner of campaign orphans went away")
    );
    let active_then = shown["active_s"].as_f64().unwrap();
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        s.show(&session)["active_s"].as_f64().unwrap(),
        active_then,
        "the clock stood still"
    );
    models.open_gate();
    ok(&s.campaign(&["run", file.to_str().unwrap()]));
    let view = s.status("orphans");
    for run in view["runs"].as_array().unwrap() {
        assert_eq!(run["state"], "done", "{run}");
        assert!(
            (run["final"]["normalized"].as_f64().unwrap() - 1.0).abs() < 1e-6,
            "{run}"
        );
    }
    assert!(s.sessions_per_run().values().all(|n| *n == 1));
}

#[test]
fn a_cost_limit_ends_the_run_with_its_own_reason() {
    let s = setup();
    let models = ModelServer::start(vec![("good-model", good_script())]);
    // 100 + 20 tokens at $1000/M in and out: $0.12 for the first call, $0.25 by the second.
    let file = s.write_campaign(&one_agent(
        &models,
        &s.env,
        Parts {
            name: "money",
            campaign: "",
            agent: (
                "good",
                "good-model",
                "price_in = 1000.0\nprice_out = 1000.0",
            ),
            runs: "lengths = [\"2m\"]\nmax_cost = 0.2".into(),
        },
    ));
    ok(&s.campaign(&["run", file.to_str().unwrap()]));
    let run = &s.status("money")["runs"][0];
    assert_eq!(run["end_reason"], "cost_limit", "{run}");
    assert!((run["cost"].as_f64().unwrap() - 0.25).abs() < 1e-9, "{run}");
}

#[test]
fn the_scaffold_submits_before_its_time_runs_out() {
    let s = setup();
    let busy: Vec<Step> = (0..20)
        .map(|_| ("bash", json!({"command": "sleep 2"})))
        .collect();
    let models = ModelServer::start(vec![("busy", busy)]);
    let file = s.write_campaign(&one_agent(
        &models,
        &s.env,
        Parts {
            name: "clock",
            campaign: "",
            agent: ("busy", "busy", ""),
            runs: "lengths = [\"12s\"]".into(),
        },
    ));
    ok(&s.campaign(&["run", file.to_str().unwrap()]));
    let run = &s.status("clock")["runs"][0];
    assert_eq!(run["end_reason"], "submitted", "{run}");
    // 5 s are kept back; a command may still run into them.
    let active = run["active_s"].as_f64().unwrap();
    assert!(active < 12.0, "{run}");
    // Watching a finished campaign prints it once and returns.
    let out = s.campaign(&["status", "clock", "--watch"]);
    ok(&out);
    assert!(String::from_utf8_lossy(&out.stdout).contains("1/1 finished"));
}

#[test]
fn code_the_agent_runs_cannot_pause_its_clock_and_stall_the_campaign() {
    let s = setup();
    let script = vec![
        (
            "bash",
            json!({"command": "rebench task pause break; echo exit=$?"}),
        ),
        (
            "bash",
            json!({"command": "rebench task pause api_outage; echo exit=$?"}),
        ),
        ("bash", json!({"command": "echo 1.6 > value"})),
        ("submit", json!({})),
    ];
    let models = ModelServer::start(vec![("good-model", script)]);
    let file = s.write_campaign(&one_agent(
        &models,
        &s.env,
        Parts {
            name: "no-breaks",
            campaign: "",
            agent: ("good", "good-model", ""),
            runs: "lengths = [\"2m\"]".into(),
        },
    ));
    ok(&s.campaign(&["run", file.to_str().unwrap()]));
    let run = &s.status("no-breaks")["runs"][0];
    assert_eq!(run["state"], "done", "{run}");
    let session = run["session"].as_str().unwrap();
    let shown = s.show(session);
    let pauses = shown["pauses"].as_array().unwrap();
    // Only the final score's own pause.
    assert!(
        pauses.iter().all(|p| p["reason"] == "scoring"),
        "{pauses:?}"
    );
    let events = s.events(session);
    let refused: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "exec")
        .take(2)
        .map(|e| e["stderr"].as_str().unwrap())
        .collect();
    assert!(
        refused
            .iter()
            .all(|e| e.contains("paused only by its campaign")),
        "{refused:?}"
    );
}

#[test]
fn an_external_scaffold_run_resumes_after_its_runner_is_killed() {
    let s = setup();
    let example = common::repo_root().join("examples/scripted_scaffold.py");
    let marker = s.files.path().join("started");
    // The first start of each run waits (its runner is killed meanwhile);
    // a resumed run finds the marker and carries on.
    let command = format!(
        "[ -e {m} ] || {{ touch {m}; sleep 30; }}; exec python3 {ex} 'echo 1.6 > value'",
        m = marker.display(),
        ex = example.display()
    );
    let file = s.write_campaign(&format!(
        r#"
[campaign]
name = "external-resume"

[[agents]]
name = "script"
api = "command"
command = ["sh", "-c", "{}"]

[[environments]]
id = "{}"

[runs]
lengths = ["2m"]
"#,
        command.replace('\\', "\\\\").replace('"', "\\\""),
        s.env.display()
    ));
    let mut first = runner(&s, &file);
    assert!(wait_until(Duration::from_secs(60), || marker.exists()));
    first.kill().unwrap();
    first.wait().unwrap();
    // Its scaffold died with it: none is left to act beside the next one.
    let left = || {
        Command::new("pgrep")
            .arg("-f")
            .arg(marker.display().to_string())
            .output()
            .unwrap()
            .stdout
    };
    assert!(wait_until(Duration::from_secs(5), || left().is_empty()));
    assert!(wait_until(Duration::from_secs(10), || {
        s.status("external-resume")["runs"][0]["phase"] == "paused"
    }));
    ok(&s.campaign(&["run", file.to_str().unwrap()]));
    let run = &s.status("external-resume")["runs"][0];
    assert_eq!(run["state"], "done", "{run}");
    assert!(
        (run["final"]["normalized"].as_f64().unwrap() - 1.0).abs() < 1e-6,
        "{run}"
    );
    assert_eq!(s.sessions_per_run().len(), 1);
}

/// Runs whose hardware is taken wait in the server's queue (a timed
/// environment, one core for sessions: one run at a time), and every run
/// still gets its one session, begun once granted, driven to the end.
#[test]
fn runs_beyond_the_hardware_wait_in_the_queue() {
    let config = tempfile::tempdir().unwrap();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    std::fs::create_dir_all(config.path().join("rebench")).unwrap();
    std::fs::write(
        config.path().join("rebench/config.toml"),
        format!("[machine]\nreserve_cpus = {}\n", cores - 1),
    )
    .unwrap();
    let (env_dir, env) =
        fixture_env(|t| t.replace("visible = true", "visible = true\nexclusive = true"));
    let s = Setup {
        server: TestServer::start_with_env(&[("XDG_CONFIG_HOME", config.path().to_str().unwrap())]),
        _env_dir: env_dir,
        env,
        files: tempfile::tempdir().unwrap(),
    };
    let models = ModelServer::start(vec![("good-model", good_script())]);
    let file = s.write_campaign(&format!(
        "[campaign]\nname = \"queued\"\nconcurrency = 4\n\n[[agents]]\nname = \"good\"\napi = \"openai\"\n\
         base_url = \"{}\"\nmodel = \"good-model\"\n\n[[environments]]\nid = \"{}\"\n\n[runs]\nlengths = [\"2m\"]\nattempts = 4\n",
        models.base_url(),
        s.env.display()
    ));
    ok(&s.campaign(&["run", file.to_str().unwrap()]));
    let status = s.status("queued");
    let runs = status["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 4);
    let mut waited = 0;
    for run in runs {
        assert_eq!(run["state"], "done", "{run}");
        let session = run["session"].as_str().unwrap();
        let kinds: Vec<String> = s
            .events(session)
            .iter()
            .map(|e| e["type"].as_str().unwrap_or_default().to_string())
            .collect();
        if kinds.iter().any(|k| k == "queued") {
            waited += 1;
            // Its clock started only after its grant.
            let granted = kinds.iter().position(|k| k == "granted").unwrap();
            let started = kinds.iter().position(|k| k == "started").unwrap();
            assert!(granted < started, "{kinds:?}");
        }
    }
    assert!(waited >= 1, "no run waited for the one core: {runs:?}");
    assert!(s.sessions_per_run().values().all(|n| *n == 1));
}
