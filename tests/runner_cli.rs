//! The CLI as a user types it: JSON field names, exit codes, hardware checks,
//! calibration, agents.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

mod common;

use common::*;

fn json(out: &std::process::Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

/// The JSON a failed command printed on stdout.
fn json_failure(out: &std::process::Output) -> serde_json::Value {
    assert!(!out.status.success());
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

fn new_session(server: &TestServer, env: &std::path::Path, extra: &[&str]) -> String {
    let mut args = vec![
        "new",
        env.to_str().unwrap(),
        "--participant",
        "pat",
        "--json",
    ];
    args.extend_from_slice(extra);
    json(&server.cli(&args))["id"].as_str().unwrap().to_string()
}

#[test]
fn show_and_sessions_have_the_documented_fields() {
    let (_d, env) = fixture_env(|t| t);
    let server = TestServer::start();
    let id = new_session(&server, &env, &["--budget", "1h30m", "--kind", "agent"]);
    let show = json(&server.cli(&["show", &id, "--json"]));
    for field in [
        "id",
        "environment",
        "participant",
        "kind",
        "state",
        "end_reason",
        "workspace",
        "budget_s",
        "active_s",
        "remaining_s",
        "pauses",
        "scores",
        "final",
    ] {
        assert!(show.get(field).is_some(), "show lacks {field}: {show}");
    }
    assert_eq!(show["budget_s"], 5400.0);
    assert_eq!(show["kind"], "agent");
    assert_eq!(show["state"], "created");
    let score = &show["scores"][0];
    for field in [
        "seq",
        "at",
        "active_s",
        "raw",
        "normalized",
        "valid",
        "message",
    ] {
        assert!(score.get(field).is_some(), "score lacks {field}: {score}");
    }
    let list = json(&server.cli(&["sessions", "--json"]));
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert!(
        list[0].get("scores").is_none(),
        "sessions omits the score list"
    );
    assert_eq!(list[0]["id"], id);
    // begin, score, extend, submit through the CLI.
    json(&server.cli(&["begin", &id, "--json"]));
    let entry = json(&server.cli(&["score", &id, "--json"]));
    for field in ["seq", "raw", "normalized", "valid", "message"] {
        assert!(
            entry.get(field).is_some(),
            "score --json lacks {field}: {entry}"
        );
    }
    let extended =
        json(&server.cli(&["extend", &id, "--by", "30m", "--reason", "outage", "--json"]));
    assert_eq!(extended["budget_s"], 7200.0);
    let submitted = json(&server.cli(&["submit", &id, "--json"]));
    assert_eq!(submitted["state"], "ended");
    assert_eq!(submitted["end_reason"], "submitted");
    assert_eq!(
        submitted["scores"].as_array().unwrap().last().unwrap()["phase"],
        "final"
    );
    let again = server.cli(&["submit", &id]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already ended"));
}

#[test]
fn missing_hardware_refuses_unless_allowed_and_then_is_recorded() {
    let (_d, env) = fixture_env(|t| t.replace("gpus = 0", "gpus = 8\ngpu_model = \"H100\""));
    let server = TestServer::start();
    let out = server.cli(&["new", env.to_str().unwrap(), "--participant", "pat"]);
    assert!(!out.status.success());
    let msg = String::from_utf8_lossy(&out.stderr);
    assert!(
        msg.contains("H100") && msg.contains("--allow-missing-hardware"),
        "{msg}"
    );
    assert!(
        !msg.contains("--profile"),
        "no profile of it runs here: {msg}"
    );
    // A profile that runs here is offered first.
    let (_d2, with_smoke) = fixture_env(|t| {
        t.replace("gpus = 0", "gpus = 8\ngpu_model = \"H100\"")
            + "\n[profiles.cpu]\nhardware = { gpus = 0, cpus = 1, memory_gb = 0.1 }\n"
    });
    let out = server.cli(&["new", with_smoke.to_str().unwrap(), "--participant", "pat"]);
    let msg = String::from_utf8_lossy(&out.stderr);
    assert!(
        msg.contains("Its profile cpu runs here (--profile cpu); or use --allow-missing-hardware"),
        "{msg}"
    );
    let id = new_session(&server, &env, &["--allow-missing-hardware"]);
    let show = json(&server.cli(&["show", &id, "--json"]));
    assert_eq!(show["allow_missing_hardware"], true);
    assert!(
        show["hardware_missing"][0]
            .as_str()
            .unwrap()
            .contains("H100"),
        "{show}"
    );
}

#[test]
fn bad_input_on_the_command_line_is_named() {
    let (_d, env) = fixture_env(|t| t);
    let server = TestServer::start();
    let out = server.cli(&[
        "new",
        env.to_str().unwrap(),
        "--participant",
        "p",
        "--budget",
        "8 hours",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--budget"));
    let out = server.cli(&["new", "no-such-env", "--participant", "p"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("no-such-env"));
    let out = server.cli(&[
        "new",
        env.to_str().unwrap(),
        "--participant",
        "p",
        "--profile",
        "huge",
    ]);
    let msg = String::from_utf8_lossy(&out.stderr);
    assert!(msg.contains("huge"), "{msg}");
    let out = server.cli(&["show", "zzzzzz"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("no session zzzzzz"));
    let id = new_session(&server, &env, &[]);
    let out = server.cli(&["pause", &id, "--reason", "nap"]);
    let msg = String::from_utf8_lossy(&out.stderr);
    assert!(msg.contains("nap"), "{msg}");
    // Only the reasons one may ask for are offered.
    assert!(
        msg.contains("break, proctor, technical_issue, api_outage)") && !msg.contains("scoring"),
        "{msg}"
    );
    let out = server.cli(&[
        "new",
        env.to_str().unwrap(),
        "--participant",
        "p",
        "--budget",
        "0m",
    ]);
    let msg = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        msg.contains("a budget of 0 leaves no time to work") && !msg.contains("31622400"),
        "{msg}"
    );
    let out = server.cli(&["pause", &id, "--reason", "break"]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not running"),
        "pausing before the start is refused"
    );
}

#[test]
fn exec_propagates_exit_codes_and_agent_scaffolds_get_a_participant_token() {
    let (_d, env) = fixture_env(|t| t);
    let server = TestServer::start();
    let id = new_session(&server, &env, &["--kind", "agent"]);
    let out = server.cli(&["exec", &id, "--", "true"]);
    assert_eq!(
        out.status.code(),
        Some(125),
        "exec before the start is refused"
    );
    let msg = String::from_utf8_lossy(&out.stderr);
    assert!(msg.contains(&format!("`rebench begin {id}`")), "{msg}");
    // `rebench agent` starts the clock of a session that has not started.
    let started = new_session(&server, &env, &["--kind", "agent"]);
    let out = std::process::Command::new(BIN)
        .arg("--data-dir")
        .arg(&server.paths.root)
        .args(["agent", &started, "--", "true"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains(&format!("started the clock of session {started}")),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        json(&server.cli(&["show", &started, "--json"]))["state"],
        "running"
    );
    json(&server.cli(&["begin", &id, "--json"]));
    let out = server.cli(&[
        "exec",
        &id,
        "--",
        "sh",
        "-c",
        "echo out; echo err >&2; exit 7",
    ]);
    assert_eq!(out.status.code(), Some(7));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "out\n");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "err\n");
    let out = server.cli(&["exec", &id, "--timeout", "1s", "--", "sleep 30"]);
    assert_eq!(out.status.code(), Some(124));
    // The scaffold reaches its own session with a participant token (the protocol tests show what it cannot do).
    let script = "rebench task exec -- 'echo from-agent' && rebench task usage --tokens-in 10 --tokens-out 5 --cost-usd 0.5 && rebench task score && echo token=${#REBENCH_TOKEN}";
    let out = std::process::Command::new(BIN)
        .arg("--data-dir")
        .arg(&server.paths.root)
        .args(["agent", &id, "--", "sh", "-c", script])
        .env(
            "PATH",
            format!(
                "{}:{}",
                std::path::Path::new(BIN).parent().unwrap().display(),
                std::env::var("PATH").unwrap()
            ),
        )
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("from-agent") && text.contains("normalized") && text.contains("token=32"),
        "{text}"
    );
    let events = String::from_utf8_lossy(&server.cli(&["events", &id]).stdout).to_string();
    assert!(
        events.contains("\"usage\"") && events.contains("\"exec\""),
        "{events}"
    );
}

#[test]
fn harness_refusals_exit_125_with_a_json_error_and_agents_stay_off_human_sessions() {
    let (_d, env) = fixture_env(|t| t);
    let server = TestServer::start();
    let id = new_session(&server, &env, &["--kind", "agent"]);
    json(&server.cli(&["begin", &id, "--json"]));
    json(&server.cli(&["pause", &id, "--reason", "break", "--json"]));
    // The pause names who really asked, as the kernel says, beside the
    // typed name.
    let events = String::from_utf8_lossy(&server.cli(&["events", &id]).stdout).to_string();
    let paused: serde_json::Value = events
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|e| e["type"] == "paused")
        .expect("the pause event");
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    assert_eq!(paused["origin"]["uid"], uid, "{paused}");
    assert_eq!(paused["origin"]["process"], "rebench", "{paused}");
    assert!(paused["origin"]["pid"].as_i64().unwrap() > 0, "{paused}");
    let created: serde_json::Value = serde_json::from_str(events.lines().next().unwrap()).unwrap();
    assert_eq!(created["origin"]["uid"], uid, "made by an admin: {created}");
    // A refused exec is not the command's exit 1 (nor 124, the timeout).
    let out = server.cli(&["exec", &id, "--json", "--", "true"]);
    assert_eq!(out.status.code(), Some(125));
    let error = json_failure(&out);
    assert_eq!(error["error"]["code"], "invalid_state", "{error}");
    assert!(
        error["error"]["message"]
            .as_str()
            .unwrap()
            .contains("paused"),
        "{error}"
    );
    let out = server.cli(&["exec", &id, "--", "true"]);
    assert_eq!(out.status.code(), Some(125));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("rebench: "));
    // An unknown session: not_found, still 125 for exec, 1 for show.
    let out = server.cli(&["exec", "nope", "--json", "--", "true"]);
    assert_eq!(out.status.code(), Some(125));
    assert_eq!(json_failure(&out)["error"]["code"], "not_found");
    let out = server.cli(&["show", "nope", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(json_failure(&out)["error"]["code"], "not_found");

    // An agent scaffold on a human session would share it with its participant.
    let human = new_session(&server, &env, &[]);
    let out = server.cli(&["agent", &human, "--", "true"]);
    assert_eq!(out.status.code(), Some(125));
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("human session") && text.contains("--force"),
        "{text}"
    );
    let out = server.cli(&["agent", &human, "--force", "--", "sh", "-c", "exit 3"]);
    assert_eq!(out.status.code(), Some(3), "forced, the scaffold runs");
}

#[test]
fn environments_are_found_from_any_folder_and_a_miss_says_where_it_looked() {
    let elsewhere = tempfile::tempdir().unwrap();
    let config_home = tempfile::tempdir().unwrap();
    let data = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        std::process::Command::new(BIN)
            .arg("--data-dir")
            .arg(data.path())
            .args(args)
            .current_dir(elsewhere.path())
            .env_remove("REBENCH_ENVIRONMENTS")
            .env("XDG_CONFIG_HOME", config_home.path())
            .output()
            .unwrap()
    };
    // Bundled: from the checkout the binary was built from.
    let shown = json(&run(&["env", "show", "prefix-sum", "--json"]));
    assert_eq!(shown["id"], "prefix-sum");

    // A typo gets the id it most likely meant, and `not_found` with --json.
    let typo = run(&["new", "prefx-sum", "--participant", "p", "--json"]);
    assert_eq!(typo.status.code(), Some(1));
    let failure = json_failure(&typo);
    assert_eq!(failure["error"]["code"], "not_found", "{failure}");
    assert!(
        failure["error"]["message"]
            .as_str()
            .unwrap()
            .contains("did you mean prefix-sum?"),
        "{failure}"
    );

    let out = run(&["env", "show", "ghost"]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stderr);
    let here = elsewhere.path().canonicalize().unwrap();
    for expected in [
        format!("{}/environments/ghost (the current folder)", here.display()),
        format!(
            "{}/environments/ghost (the data dir)",
            data.path().display()
        ),
        format!(
            "{}/environments/ghost (the checkout rebench was built from)",
            env!("CARGO_MANIFEST_DIR")
        ),
        "REBENCH_ENVIRONMENTS=DIR".to_string(),
        format!("{}/rebench/config.toml", config_home.path().display()),
    ] {
        assert!(text.contains(&expected), "{expected} not in {text}");
    }

    // A folder named in the config file, relative to the file.
    let (_d, fixture) = fixture_env(|t| t);
    std::fs::create_dir_all(config_home.path().join("rebench/envs")).unwrap();
    std::fs::rename(&fixture, config_home.path().join("rebench/envs/fixed")).unwrap();
    std::fs::write(
        config_home.path().join("rebench/config.toml"),
        "environments = [\"envs\"]\n",
    )
    .unwrap();
    let shown = json(&run(&["env", "show", "fixed", "--json"]));
    assert_eq!(shown["id"], "fixed");
}

#[test]
fn a_budget_can_be_reduced_but_never_below_the_time_used() {
    let (_d, env) = fixture_env(|t| t);
    let server = TestServer::start();
    let id = new_session(&server, &env, &["--budget", "2h"]);
    json(&server.cli(&["begin", &id, "--json"]));
    // A mistaken extension is taken back, recorded like one.
    let view = json(&server.cli(&["extend", &id, "--by", "5h", "--reason", "typo", "--json"]));
    assert_eq!(view["budget_s"], 7.0 * 3600.0);
    let view = json(&server.cli(&[
        "extend", &id, "--by", "-5h", "--reason", "meant 5m", "--json",
    ]));
    assert_eq!(view["budget_s"], 2.0 * 3600.0);
    let changes: Vec<f64> = view["extensions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["by_s"].as_f64().unwrap())
        .collect();
    assert_eq!(changes, [5.0 * 3600.0, -5.0 * 3600.0]);
    // Not below what is spent: the participant keeps time already given.
    let out = server.cli(&["extend", &id, "--by=-2h", "--reason", "too much"]);
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(text.contains("below the time already used"), "{text}");
    let view = json(&server.cli(&["show", &id, "--json"]));
    assert_eq!(view["budget_s"], 2.0 * 3600.0, "nothing changed");
    let out = server.cli(&["extend", &id, "--by", "0s", "--reason", "none"]);
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn calibrate_measures_starting_and_reference() {
    let (_d, env) = fixture_env(|t| t);
    let server = TestServer::start();
    let out = json(&server.cli(&[
        "env",
        "calibrate",
        env.to_str().unwrap(),
        "--runs",
        "2",
        "--json",
    ]));
    assert_eq!(out["starting"], 4.76);
    assert_eq!(out["reference"], 1.6);
    let out = json(&server.cli(&["env", "show", env.to_str().unwrap(), "--json"]));
    assert_eq!(out["id"], "fixed");
    // No profile asked for is the default profile: each profile shown once.
    let bundled = json(&server.cli(&["env", "show", "prefix-sum", "--json"]));
    let profiles: Vec<&str> = bundled["scoring"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["profile"].as_str().unwrap())
        .collect();
    assert_eq!(profiles, ["full", "smoke"]);
    let list = server.cli(&["env", "list"]);
    assert!(
        String::from_utf8_lossy(&list.stdout).contains("prefix-sum"),
        "bundled environments are listed from the repo root"
    );
}

#[test]
fn calibrate_runs_the_setup_in_each_workspace_before_scoring() {
    // The setup halves the workspace's value: 4.76 -> 2.38 (starting) and,
    // with the reference's value laid over it, 1.6 -> 0.8.
    let (_d, env) = fixture_env(|t| {
        format!(
            "{t}\n[calibrate]\nsetup = \"awk '{{print $1 / 2}}' value > half && mv half value\"\n"
        )
    });
    let server = TestServer::start();
    let args = [
        "env",
        "calibrate",
        env.to_str().unwrap(),
        "--runs",
        "1",
        "--json",
    ];
    let out = json(&server.cli(&args));
    assert_eq!(out["starting"], 2.38);
    assert_eq!(out["reference"], 0.8);

    // A failing setup: no valid run, exit 1, and the reason with its output.
    let (_d, env) =
        fixture_env(|t| format!("{t}\n[calibrate]\nsetup = \"echo cannot train >&2; exit 7\"\n"));
    let failed = server.cli(&["env", "calibrate", env.to_str().unwrap(), "--runs", "1"]);
    assert_eq!(failed.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert!(
        stderr.contains("starting: setup `echo cannot train >&2; exit 7` failed (exit status 7)"),
        "{stderr}"
    );
    assert!(stderr.contains("cannot train"), "{stderr}");
    let stdout = String::from_utf8_lossy(&failed.stdout);
    assert!(stdout.contains("starting = no valid run"), "{stdout}");
}

#[test]
fn sessions_watch_prints_a_new_table_when_something_happens() {
    use std::io::{BufRead, BufReader};
    let (_d, env) = fixture_env(|t| t);
    let server = TestServer::start();
    let mut watcher = std::process::Command::new(BIN)
        .arg("--data-dir")
        .arg(&server.paths.root)
        .args(["sessions", "--watch", "--json"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(watcher.stdout.take().unwrap()).lines();
    let first: serde_json::Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(first.as_array().unwrap().len(), 0);
    let id = new_session(&server, &env, &[]);
    let mut seen = false;
    for line in lines.by_ref().take(5) {
        let table: serde_json::Value = serde_json::from_str(&line.unwrap()).unwrap();
        if table
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["id"] == id.as_str())
        {
            seen = true;
            break;
        }
    }
    let _ = watcher.kill();
    let _ = watcher.wait();
    assert!(seen, "the new session appears without polling");
}

#[test]
fn an_unprepared_environment_is_refused_with_the_command_to_run() {
    let (_d, env) = fixture_env(|t| {
        t.replace("command = [\"sh\", \"{env}/score.sh\"]", "command = [\"sh\", \"-c\", \"echo '{\\\"raw\\\":' $(cat \\\"$REBENCH_PREPARED/answer\\\") '}'\"]")
            + "\n[prepare]\ncommand = [\"sh\", \"-c\", \"echo 2.5 > \\\"$REBENCH_PREPARED/answer\\\"; mkdir -p \\\"$REBENCH_PREPARED/workspace\\\"; echo weights > \\\"$REBENCH_PREPARED/workspace/model.bin\\\"\"]\n"
    });
    let server = TestServer::start();
    let out = server.cli(&["new", env.to_str().unwrap(), "--participant", "p"]);
    assert!(!out.status.success());
    let msg = String::from_utf8_lossy(&out.stderr);
    assert!(
        msg.contains("not prepared") && msg.contains("rebench env prepare"),
        "{msg}"
    );
    let out = server.cli(&["env", "prepare", env.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The scorer reads hidden data from the preparation, outside the workspace.
    let id = new_session(&server, &env, &[]);
    let show = json(&server.cli(&["show", &id, "--json"]));
    assert_eq!(show["scores"][0]["raw"], 2.5, "{show}");
    assert!(
        !std::path::Path::new(show["workspace"].as_str().unwrap())
            .join("answer")
            .exists()
    );
}

/// Every command's help is the short form and describes its arguments.
#[test]
fn help_describes_every_argument_briefly() {
    let help = |args: &[&str]| {
        let out = std::process::Command::new(BIN)
            .args(args)
            .arg("--help")
            .output()
            .unwrap();
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let serve = help(&["serve"]);
    assert!(
        !serve.contains("REBENCH_ISOLATION") && serve.contains("REBENCH_BACKEND"),
        "{serve}"
    );
    let env = help(&["env"]);
    assert!(env.contains("prepare, add, calibrate, bench"), "{env}");
    for command in [
        "begin", "show", "events", "score", "pause", "resume", "extend", "note", "submit", "end",
        "exec", "agent", "attach", "priority", "export",
    ] {
        let text = help(&[command]);
        let described = text
            .lines()
            .any(|l| l.trim_start().starts_with("<SESSION>") && l.contains("The session's id"));
        assert!(described, "{command}: {text}");
    }
    for (command, described) in [
        (vec!["pause"], "What happened, in words"),
        (vec!["extend"], "Why (recorded"),
        (vec!["new"], "Who works in it"),
        (vec!["export"], "inspect (an Inspect eval log"),
    ] {
        let text = help(&command);
        assert!(text.contains(described), "{command:?}: {text}");
    }
    for command in ["export", "report"] {
        let text = help(&[command]);
        assert!(
            !text.contains("see a summary with '-h'"),
            "{command} prints clap's long help: {text}"
        );
    }
}
