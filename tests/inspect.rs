//! Inspect interop with the real `inspect_ai`: logs that Inspect itself
//! wrote (a tiny task run with its offline `mockllm` model, see
//! tests/inspect/make_logs.py) imported through the CLI and the server, and
//! sessions exported as Inspect logs read back by `inspect_ai`.
//!
//! `inspect_ai` comes from `$REBENCH_INSPECT_PYTHON` (a python that has it;
//! `.ci/run` makes one), else from `target/tmp/inspect-venv`, made here on
//! first use from PyPI. Without it the tests print "SKIPPED: ..." and pass,
//! unless `REBENCH_REQUIRE_INSPECT=1` (CI), which makes that a failure.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use common::{TestServer, fixture_env, repo_root};
use serde_json::Value;

/// A python with `inspect_ai`, or None (after saying why) where there is none.
fn inspect_python() -> Option<PathBuf> {
    static PYTHON: OnceLock<Option<PathBuf>> = OnceLock::new();
    PYTHON
        .get_or_init(|| {
            let found = find_or_make_python();
            if let Err(why) = &found {
                if std::env::var("REBENCH_REQUIRE_INSPECT").is_ok_and(|v| v == "1") {
                    panic!("REBENCH_REQUIRE_INSPECT=1 but inspect_ai is not usable: {why}");
                }
                eprintln!("SKIPPED: inspect_ai is not usable here: {why}");
            }
            found.ok()
        })
        .clone()
}

fn find_or_make_python() -> Result<PathBuf, String> {
    let has_inspect = |python: &Path| {
        Command::new(python)
            .args(["-c", "import inspect_ai"])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if let Ok(given) = std::env::var("REBENCH_INSPECT_PYTHON") {
        let python = PathBuf::from(given);
        return if has_inspect(&python) {
            Ok(python)
        } else {
            Err(format!("{} cannot import inspect_ai", python.display()))
        };
    }
    let venv = repo_root().join("target/tmp/inspect-venv");
    let python = venv.join("bin/python");
    if has_inspect(&python) {
        return Ok(python);
    }
    let run = |cmd: &mut Command| -> Result<(), String> {
        let out = cmd.output().map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    };
    run(Command::new("python3").arg("-m").arg("venv").arg(&venv))?;
    run(Command::new(&python).args(["-m", "pip", "install", "-q", "inspect_ai"]))?;
    Ok(python)
}

/// The logs make_logs.py wrote (once per test binary): `(eval, json)`.
fn inspect_logs() -> Option<(PathBuf, PathBuf)> {
    static LOGS: OnceLock<Option<(tempfile::TempDir, PathBuf, PathBuf)>> = OnceLock::new();
    let made = LOGS.get_or_init(|| {
        let python = inspect_python()?;
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new(&python)
            .arg(repo_root().join("tests/inspect/make_logs.py"))
            .arg(dir.path())
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "make_logs.py failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let one = |sub: &str| {
            let mut files: Vec<PathBuf> = std::fs::read_dir(dir.path().join(sub))
                .unwrap()
                .map(|e| e.unwrap().path())
                .collect();
            assert_eq!(files.len(), 1, "{files:?}");
            files.remove(0)
        };
        let (eval, json) = (one("eval"), one("json"));
        Some((dir, eval, json))
    });
    made.as_ref().map(|(_, e, j)| (e.clone(), j.clone()))
}

fn text(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn import(server: &TestServer, args: &[&str]) -> (Output, Value) {
    let mut all = vec!["--json", "import", "inspect"];
    all.extend_from_slice(args);
    let out = server.cli(&all);
    let json = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", text(&out)));
    (out, json)
}

fn ids(json: &Value) -> Vec<String> {
    json["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect()
}

fn show(server: &TestServer, id: &str) -> Value {
    let out = server.cli(&["--json", "show", id]);
    assert!(out.status.success(), "{}", text(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn events(server: &TestServer, id: &str) -> Vec<Value> {
    let out = server.cli(&["events", id]);
    assert!(out.status.success(), "{}", text(&out));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn samples_of_an_eval_log_become_read_only_agent_runs_once() {
    let Some((eval, _)) = inspect_logs() else {
        return;
    };
    let server = TestServer::start();
    let log = eval.to_str().unwrap();
    let (out, json) = import(&server, &[log, "--starting", "0", "--reference", "84"]);
    // Two good samples (2 epochs of forty-two) and two that errored in Inspect.
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let imported = ids(&json);
    assert_eq!(imported.len(), 2, "{}", text(&out));
    let errors: Vec<&str> = json["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    for (error, epoch) in errors.iter().zip([1, 2]) {
        assert!(
            error.contains(log)
                && error.contains(&format!("sample broken epoch {epoch}"))
                && error.contains("field error")
                && error.contains("failed on purpose"),
            "{error}"
        );
    }

    let mut epochs = Vec::new();
    for id in &imported {
        let view = show(&server, id);
        assert_eq!(view["kind"], "agent");
        assert_eq!(view["state"], "ended");
        assert_eq!(view["end_reason"], "submitted");
        assert_eq!(view["environment"], "arith");
        assert_eq!(view["imported"]["format"], "inspect");
        assert_eq!(view["imported"]["sample"], "forty-two");
        assert!(
            view["imported"]["file"]
                .as_str()
                .unwrap()
                .ends_with(".eval")
        );
        epochs.push(view["imported"]["epoch"].as_u64().unwrap());
        assert_eq!(view["agent"]["model"], "mockllm/model");
        assert_eq!(view["agent"]["scaffold"], "use_tools+scored_turns");
        // The task's working_limit is its budget.
        assert_eq!(view["budget_s"], 300.0);
        // Two model calls with their usage, as mockllm reported it.
        assert_eq!(view["usage"]["model_calls"], 2);
        assert_eq!(view["usage"]["tokens_in"], 250);
        assert_eq!(view["usage"]["tokens_out"], 25);
        // 0 before the model answered, 42 after: normalized by the given values.
        let scores: Vec<(String, f64, f64)> = view["scores"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| {
                (
                    s["phase"].as_str().unwrap().to_string(),
                    s["raw"].as_f64().unwrap(),
                    s["normalized"].as_f64().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            scores,
            vec![
                ("intermediate".to_string(), 0.0, 0.0),
                ("intermediate".to_string(), 42.0, 0.5),
                ("final".to_string(), 42.0, 0.5),
            ]
        );
        assert_eq!(view["final"]["normalized"], 0.5);

        // The transcript: the bash call with its output, and both model calls.
        let log = events(&server, id);
        let exec = log.iter().find(|e| e["type"] == "exec").unwrap();
        assert_eq!(exec["command"], "echo 41 + 1 is $((41 + 1))");
        assert_eq!(exec["stdout"], "41 + 1 is 42\n");
        let calls: Vec<&Value> = log.iter().filter(|e| e["type"] == "model_call").collect();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0]["input"][0]["text"], "What is 41 + 1?");
        assert_eq!(calls[0]["output"]["tool_calls"][0]["name"], "bash");
        assert_eq!(calls[1]["input"][0]["role"], "tool");
        assert_eq!(calls[1]["output"]["text"], "42");
        let active: Vec<u64> = log
            .iter()
            .map(|e| e["active_ms"].as_u64().unwrap())
            .collect();
        assert!(active.windows(2).all(|w| w[0] <= w[1]), "{active:?}");
        assert!(*active.last().unwrap() <= 300_000);
        assert_eq!(log.first().unwrap()["type"], "created");
        assert_eq!(log.last().unwrap()["type"], "ended");

        // Read-only: nothing changes it.
        for args in [
            vec!["note", id.as_str(), "hello"],
            vec!["score", id.as_str()],
            vec!["extend", id.as_str(), "--by", "1h", "--reason", "x"],
            vec!["end", id.as_str()],
        ] {
            let out = server.cli(&args);
            assert!(!out.status.success(), "{args:?}: {}", text(&out));
            assert!(text(&out).contains("read-only"), "{args:?}: {}", text(&out));
        }
        assert_eq!(events(&server, id).len(), log.len());
        // The instructions are the sample's input.
        let out = server.cli(&["--json", "show", id]);
        assert!(out.status.success());
    }
    epochs.sort();
    assert_eq!(epochs, vec![1, 2]);

    // Never twice: the same log again imports nothing.
    let (_, again) = import(&server, &[log, "--starting", "0", "--reference", "84"]);
    assert!(ids(&again).is_empty(), "{again}");
    let already = again["already"].as_array().unwrap();
    assert_eq!(already.len(), 2, "{again}");
    for (line, id) in already.iter().zip(&imported) {
        assert!(
            line.as_str().unwrap().contains("imported already"),
            "{line}"
        );
        let _ = id;
    }

    // The report counts them as runs of their agent.
    let out = server.cli(&["report", "--format", "json"]);
    assert!(out.status.success(), "{}", text(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = report["summary"].as_array().unwrap();
    let row = rows
        .iter()
        .find(|r| {
            r["environment"] == "arith" && r["group"] == "mockllm/model (use_tools+scored_turns)"
        })
        .unwrap_or_else(|| panic!("{report:#}"));
    assert_eq!(row["runs"], 2);
    assert_eq!(row["mean"]["value"], 0.5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_json_log_imports_under_a_mapped_environment_and_its_normalizer() {
    use rebench::protocol::{Request, SessionView};
    let Some((_, json_log)) = inspect_logs() else {
        return;
    };
    let server = TestServer::start();
    let (_env_tmp, env) = fixture_env(|t| t);
    let files = tempfile::tempdir().unwrap();
    let map = files.path().join("map.toml");
    std::fs::write(&map, format!("arith = {:?}\n", env.to_str().unwrap())).unwrap();
    let (out, json) = import(
        &server,
        &[
            json_log.to_str().unwrap(),
            "--map",
            map.to_str().unwrap(),
            "--agent",
            "scripted",
        ],
    );
    assert_eq!(ids(&json).len(), 2, "{}", text(&out));
    for id in ids(&json) {
        let view = show(&server, &id);
        assert_eq!(view["environment"], "fixed");
        assert_eq!(view["title"], "Fixed-answer fixture");
        assert!(!view["manifest_hash"].as_str().unwrap().is_empty());
        assert_eq!(view["participant"], "scripted");
        assert_eq!(view["agent"]["name"], "scripted");
        assert!(
            view["imported"]["file"]
                .as_str()
                .unwrap()
                .ends_with(".json")
        );
        // fixed: log runtime, starting 4.76 ms, reference 1.6 ms. 42 is
        // worse than the start (0); 0 has no logarithm (invalid).
        let scores = view["scores"].as_array().unwrap();
        assert_eq!(scores[0]["valid"], false, "{view:#}");
        assert!(
            scores[0]["message"]
                .as_str()
                .unwrap()
                .contains("cannot be normalized")
        );
        assert_eq!(scores[2]["phase"], "final");
        assert_eq!(scores[2]["raw"], 42.0);
        assert_eq!(scores[2]["normalized"], 0.0);
    }

    // A human who reached the reference in a run of the same length: the
    // report compares the imported agent against them.
    let human = server
        .create(&env, Some(300), rebench::session::Kind::Human)
        .await;
    let mut admin = server.admin().await;
    let _: SessionView = admin
        .call(Request::Begin {
            session: human.id.clone(),
        })
        .await
        .unwrap();
    std::fs::write(Path::new(&human.workspace).join("value"), "1.6").unwrap();
    let _: SessionView = admin
        .call(Request::Submit {
            session: human.id.clone(),
            answer: None,
        })
        .await
        .unwrap();
    let out = server.cli(&["report", "--format", "json", "--budgets", "10m"]);
    assert!(out.status.success(), "{}", text(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let row = report["comparison"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["group"] == "scripted")
        .unwrap_or_else(|| panic!("{:#}", report["comparison"]));
    assert_eq!(row["environments"], serde_json::json!(["fixed"]));
    assert_eq!(row["human"]["estimate"]["value"], 1.0, "{row:#}");
    assert_eq!(row["agent"]["estimate"]["value"], 0.0, "{row:#}");
    assert_eq!(row["agent"]["runs"], 2, "{row:#}");
    assert_eq!(report["best_agent"][0]["group"], "scripted");
}

#[test]
fn bad_logs_and_mappings_name_file_sample_and_field() {
    let Some((eval, json_log)) = inspect_logs() else {
        return;
    };
    let server = TestServer::start();
    let files = tempfile::tempdir().unwrap();
    let write = |name: &str, bytes: &[u8]| {
        let path = files.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        path.to_str().unwrap().to_string()
    };
    let bytes = std::fs::read(&eval).unwrap();
    let truncated = write("truncated.eval", &bytes[..bytes.len() / 2]);
    let mut log: Value = serde_json::from_slice(&std::fs::read(&json_log).unwrap()).unwrap();
    let mut future = log.clone();
    future["version"] = 99.into();
    let future = write("future.json", future.to_string().as_bytes());
    // One good sample damaged: the other good one still imports.
    let good: Vec<usize> = (0..4)
        .filter(|&i| log["samples"][i]["error"].is_null())
        .collect();
    log["samples"][good[0]]["epoch"] = "first".into();
    let damaged = write("damaged.json", log.to_string().as_bytes());

    let (out, json) = import(
        &server,
        &[
            &truncated,
            &future,
            &damaged,
            "--starting",
            "0",
            "--reference",
            "1",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(ids(&json).len(), 1, "{}", text(&out));
    let errors = json["errors"].to_string();
    assert!(
        errors.contains(&format!("{truncated}: not a readable .eval file")),
        "{errors}"
    );
    assert!(
        errors.contains(&format!(
            "{future}: field version: log version 99 is not supported"
        )),
        "{errors}"
    );
    assert!(
        errors.contains(&format!("{damaged}: samples[{}]", good[0]))
            && errors.contains("field epoch"),
        "{errors}"
    );

    // No mapping for the task, and no environment of its name.
    let (out, json) = import(&server, &[eval.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(ids(&json).is_empty());
    let errors = json["errors"].to_string();
    assert!(
        errors.contains("task arith: no environment arith") && errors.contains("--map"),
        "{errors}"
    );
    let map = write("map.toml", b"other_task = \"fixed\"\n");
    let (_, json) = import(&server, &[eval.to_str().unwrap(), "--map", &map]);
    assert!(
        json["errors"]
            .to_string()
            .contains("does not map it (it maps other_task)"),
        "{json}"
    );
    let bad_map = write("bad-map.toml", b"arith = 3\n");
    let out = server.cli(&[
        "import",
        "inspect",
        eval.to_str().unwrap(),
        "--map",
        &bad_map,
    ]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("bad-map.toml: arith: expected an environment id"),
        "{}",
        text(&out)
    );

    // A log without time limits needs --budget.
    let mut unlimited: Value = serde_json::from_slice(&std::fs::read(&json_log).unwrap()).unwrap();
    unlimited["eval"]["config"]["time_limit"] = Value::Null;
    unlimited["eval"]["config"]["working_limit"] = Value::Null;
    for sample in unlimited["samples"].as_array_mut().unwrap() {
        sample["time_limit"] = Value::Null;
    }
    let unlimited = write("unlimited.json", unlimited.to_string().as_bytes());
    let (_, json) = import(
        &server,
        &[&unlimited, "--starting", "0", "--reference", "1"],
    );
    assert!(ids(&json).is_empty());
    assert!(
        json["errors"].to_string().contains("give --budget"),
        "{json}"
    );
    let (_, json) = import(
        &server,
        &[
            &unlimited,
            "--starting",
            "0",
            "--reference",
            "1",
            "--budget",
            "2h",
        ],
    );
    // The same eval as damaged.json, whose good sample was imported from
    // there: a run is known by its eval, sample and epoch, not its file.
    assert_eq!(ids(&json).len(), 1, "{json}");
    assert_eq!(json["already"].as_array().unwrap().len(), 1, "{json}");
    assert_eq!(show(&server, ids(&json)[0].as_str())["budget_s"], 7200.0);
}

/// What tests/inspect/read_log.py says of `log`, read by `inspect_ai`.
fn read_back(log: &Path) -> Value {
    let python = inspect_python().unwrap();
    let out = Command::new(python)
        .arg(repo_root().join("tests/inspect/read_log.py"))
        .arg(log)
        .output()
        .unwrap();
    assert!(out.status.success(), "read_log.py: {}", text(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn export(server: &TestServer, id: &str, to: &Path) {
    let out = server.cli(&[
        "export",
        id,
        "--format",
        "inspect",
        "-o",
        to.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("wrote an Inspect eval log"),
        "{}",
        text(&out)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_human_session_exports_as_a_log_inspect_reads() {
    use rebench::protocol::{Request, SessionView, b64_encode};
    use rebench::session::{Kind, PauseReason};
    if inspect_python().is_none() {
        return;
    }
    let server = TestServer::start();
    let (_env_tmp, env) = fixture_env(|t| t);
    let created = server.create(&env, Some(3600), Kind::Human).await;
    let id = created.id.clone();
    let mut admin = server.admin().await;
    let _: SessionView = admin
        .call(Request::Begin {
            session: id.clone(),
        })
        .await
        .unwrap();
    let (mut driver, shell, _) = server.drive_new_shell(&id, 100, 30).await;
    let mut screen = String::new();
    let typed = |text: &str| Request::ShellInput {
        session: id.clone(),
        shell,
        data: b64_encode(text.as_bytes()),
    };
    // A typo fixed with backspace, then the reference value written.
    driver
        .send(typed("echo hello-inspecx\x7ft\r"))
        .await
        .unwrap();
    assert!(
        common::read_until(&mut driver, shell, "hello-inspect\r\n", &mut screen).await,
        "{screen}"
    );
    driver
        .send(typed("echo 1.6 > value && echo written\r"))
        .await
        .unwrap();
    assert!(
        common::read_until(&mut driver, shell, "written\r\n", &mut screen).await,
        "{screen}"
    );
    server.score(&id).await;
    let _: SessionView = admin
        .call(Request::Pause {
            session: id.clone(),
            reason: PauseReason::Break,
            note: Some("coffee".into()),
        })
        .await
        .unwrap();
    let _: SessionView = admin
        .call(Request::Resume {
            session: id.clone(),
        })
        .await
        .unwrap();
    let _: SessionView = admin
        .call(Request::Note {
            session: id.clone(),
            text: "tried the log transform".into(),
        })
        .await
        .unwrap();
    let done: SessionView = admin
        .call(Request::Submit {
            session: id.clone(),
            answer: None,
        })
        .await
        .unwrap();
    // Let the recorder's batch reach the store.
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;

    let files = tempfile::tempdir().unwrap();
    let log = files.path().join("human.eval");
    export(&server, &id, &log);
    let read = read_back(&log);
    assert_eq!(read["status"], "success");
    assert_eq!(read["task"], "fixed");
    assert_eq!(read["model"], "human");
    assert_eq!(read["solver"], "human");
    assert_eq!(read["working_limit"], 3600);
    assert_eq!(read["id"], id.as_str());
    let instructions = std::fs::read_to_string(env.join("instructions.md")).unwrap();
    assert_eq!(read["input"], instructions.as_str());
    assert_eq!(read["listed"], serde_json::json!(["human.eval"]));
    assert_eq!(read["summaries"][0]["id"], id.as_str());
    assert_eq!(read["summaries"][0]["completed"], true);
    // The final score: the reference value, normalized 1.
    let final_score = &read["scores"]["runtime"];
    assert_eq!(final_score["value"], 1.0, "{read:#}");
    assert_eq!(final_score["answer"], "1.6 ms");
    assert_eq!(read["results"], serde_json::json!([1.0]));
    // Working time excludes the pause.
    let working = read["working_time"].as_f64().unwrap();
    assert!(
        (working - done.active_s).abs() < 0.01,
        "{working} vs {}",
        done.active_s
    );
    assert!(read["total_time"].as_f64().unwrap() >= working);

    let events = read["events"].as_array().unwrap();
    let tools: Vec<&Value> = events.iter().filter(|e| e["event"] == "tool").collect();
    let commands: Vec<&str> = tools
        .iter()
        .map(|t| t["arguments"]["cmd"].as_str().unwrap())
        .collect();
    assert!(commands.contains(&"echo hello-inspect"), "{commands:?}");
    let written = tools
        .iter()
        .find(|t| t["arguments"]["cmd"] == "echo 1.6 > value && echo written")
        .unwrap_or_else(|| panic!("{commands:?}"));
    assert!(
        written["result"].as_str().unwrap().contains("written"),
        "{written}"
    );
    // The score log: starting (intermediate), the one asked for, the final.
    let scores: Vec<(f64, bool)> = events
        .iter()
        .filter(|e| e["event"] == "score")
        .map(|e| {
            (
                e["value"].as_f64().unwrap(),
                e["intermediate"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        scores,
        vec![(0.0, true), (1.0, true), (1.0, false)],
        "{events:#?}"
    );
    let infos: Vec<&Value> = events
        .iter()
        .filter(|e| e["event"] == "info")
        .map(|e| &e["data"])
        .collect();
    assert!(
        infos
            .iter()
            .any(|d| d["paused"] == "break" && d["note"] == "coffee"),
        "{infos:?}"
    );
    assert!(infos.iter().any(|d| d["resumed"].is_string()), "{infos:?}");
    assert!(
        infos.iter().any(|d| d["note"] == "tried the log transform"),
        "{infos:?}"
    );
    let starts: Vec<f64> = events
        .iter()
        .map(|e| e["working_start"].as_f64().unwrap())
        .collect();
    assert!(starts.windows(2).all(|w| w[0] <= w[1]), "{starts:?}");

    // A human's export is no agent run: it does not import (here or elsewhere).
    let elsewhere = TestServer::start();
    let (_, json) = import(
        &elsewhere,
        &[log.to_str().unwrap(), "--starting", "0", "--reference", "1"],
    );
    assert!(ids(&json).is_empty(), "{json}");
    assert!(
        json["errors"]
            .to_string()
            .contains("a human session exported by rebench"),
        "{json}"
    );
}

#[test]
fn an_imported_run_exports_back_with_its_model_calls_and_is_not_imported_again() {
    let Some((eval, _)) = inspect_logs() else {
        return;
    };
    let server = TestServer::start();
    let (_, json) = import(
        &server,
        &[
            eval.to_str().unwrap(),
            "--starting",
            "0",
            "--reference",
            "84",
        ],
    );
    let id = ids(&json)[0].clone();
    let files = tempfile::tempdir().unwrap();
    let log = files.path().join("agent.eval");
    export(&server, &id, &log);
    let read = read_back(&log);
    assert_eq!(read["task"], "arith");
    assert_eq!(read["model"], "mockllm/model");
    assert_eq!(read["solver"], "use_tools+scored_turns");
    assert_eq!(read["input"], "What is 41 + 1?");
    assert_eq!(read["scores"]["score"]["value"], 0.5);
    assert_eq!(read["model_usage"]["mockllm/model"], 275);
    assert_eq!(
        read["messages"],
        serde_json::json!(["user", "assistant", "tool", "assistant"])
    );
    let events = read["events"].as_array().unwrap();
    let models: Vec<&Value> = events.iter().filter(|e| e["event"] == "model").collect();
    assert_eq!(models.len(), 2);
    assert_eq!(
        models[1]["input"],
        serde_json::json!(["user", "assistant", "tool"])
    );
    assert_eq!(models[1]["completion"], "42");
    let tool = events.iter().find(|e| e["event"] == "tool").unwrap();
    assert_eq!(tool["arguments"]["cmd"], "echo 41 + 1 is $((41 + 1))");

    // Our own export is not a new run of the agent.
    let (out, again) = import(
        &server,
        &[
            log.to_str().unwrap(),
            "--starting",
            "0",
            "--reference",
            "84",
        ],
    );
    assert!(ids(&again).is_empty(), "{}", text(&out));
    assert!(
        again["errors"]
            .to_string()
            .contains(&format!("an export of session {id}")),
        "{again}"
    );
}

/// A minimal imported run for protocol tests (no Python needed).
fn minimal_run(sample: &str) -> rebench::protocol::ImportRun {
    use rebench::protocol::{ImportRun, ImportedEvent, NormalizerValues};
    use rebench::session::{AgentIdentity, EndReason, EventKind, ImportedFrom};
    let at = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
        .unwrap()
        .to_utc();
    let event = |secs: i64, kind: EventKind| ImportedEvent {
        at: at + chrono::Duration::seconds(secs),
        active_ms: secs as u64 * 1000,
        kind,
    };
    ImportRun {
        source: ImportedFrom {
            format: "inspect".into(),
            file: "/logs/a.eval".into(),
            log: "E1".into(),
            task: "arith".into(),
            sample: sample.into(),
            epoch: 1,
            normalization_given: false,
        },
        env_dir: None,
        environment: "arith".into(),
        profile: None,
        normalizer: Some(NormalizerValues {
            starting: 0.0,
            reference: 1.0,
        }),
        participant: "agent-x".into(),
        agent: AgentIdentity {
            name: "agent-x".into(),
            model: "m".into(),
            scaffold: "s".into(),
        },
        budget_ms: 60_000,
        created_at: at,
        instructions: "do it".into(),
        events: vec![
            event(
                0,
                EventKind::Started {
                    by: "inspect".into(),
                },
            ),
            event(
                5,
                EventKind::Note {
                    text: "hi".into(),
                    by: "inspect".into(),
                },
            ),
            event(
                9,
                EventKind::Ended {
                    reason: EndReason::Submitted,
                    by: "inspect".into(),
                    note: None,
                },
            ),
        ],
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn import_run_checks_its_events_and_takes_a_run_once_under_races() {
    use rebench::client::ClientError;
    use rebench::protocol::{ErrorCode, Request, SessionView};
    use rebench::session::EventKind;
    let server = TestServer::start();
    let mut admin = server.admin().await;
    let refused = |r: Result<SessionView, ClientError>| match r {
        Err(ClientError::Server { code, message }) => (code, message),
        other => panic!("expected a refusal, got {other:?}"),
    };

    let mut back = minimal_run("a");
    back.events[1].active_ms = 20_000;
    let (code, message) = refused(admin.call(Request::ImportRun(Box::new(back))).await);
    assert_eq!(code, ErrorCode::BadRequest);
    assert_eq!(message, "events[2]: time goes back");

    let mut created = minimal_run("a");
    created.events[1].kind = EventKind::Created { by: "x".into() };
    let (_, message) = refused(admin.call(Request::ImportRun(Box::new(created))).await);
    assert!(
        message.contains("events[1]: created is not allowed"),
        "{message}"
    );

    let mut unended = minimal_run("a");
    unended.events.pop();
    let (_, message) = refused(admin.call(Request::ImportRun(Box::new(unended))).await);
    assert!(message.contains("ends with ended"), "{message}");

    let mut no_values = minimal_run("a");
    no_values.normalizer = None;
    let (_, message) = refused(admin.call(Request::ImportRun(Box::new(no_values))).await);
    assert!(
        message.contains("give its starting and reference"),
        "{message}"
    );

    // Eight clients import the same run at once: one session results.
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let mut client = server.admin().await;
        tasks.push(tokio::spawn(async move {
            client
                .call::<SessionView>(Request::ImportRun(Box::new(minimal_run("raced"))))
                .await
        }));
    }
    let mut made = Vec::new();
    for task in tasks {
        match task.await.unwrap() {
            Ok(view) => made.push(view.id),
            Err(ClientError::Server { code, message }) => {
                assert_eq!(code, ErrorCode::Refused);
                assert!(message.contains("imported already"), "{message}");
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert_eq!(made.len(), 1, "{made:?}");
    let list: Vec<SessionView> = admin.call(Request::ListSessions).await.unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0].imported.as_ref().unwrap().sample, "raced");

    // A participant token reaches no import, and not even its own session's changes.
    let mut participant = server.participant(&made[0]).await;
    let (code, _) = refused(
        participant
            .call(Request::ImportRun(Box::new(minimal_run("p"))))
            .await,
    );
    assert_eq!(code, ErrorCode::Forbidden);
    let (code, message) = refused(
        participant
            .call(Request::Submit {
                session: made[0].clone(),
                answer: None,
            })
            .await,
    );
    assert_eq!(code, ErrorCode::Refused);
    assert!(message.contains("read-only"), "{message}");

    // It survives a restart, still known (and still read-only).
    drop(participant);
    drop(admin);
    let mut server = server;
    server.kill9();
    server.spawn();
    let mut admin = server.admin().await;
    let (_, message) = refused(
        admin
            .call(Request::ImportRun(Box::new(minimal_run("raced"))))
            .await,
    );
    assert!(
        message.contains(&format!("as session {}", made[0])),
        "{message}"
    );
    let view: SessionView = admin
        .call(Request::Show {
            session: made[0].clone(),
        })
        .await
        .unwrap();
    assert_eq!(view.state, rebench::session::Phase::Ended);
    assert_eq!(view.notes.len(), 1);
}
