//! The hostile participant, through the real server: every attack here
//! worked on an earlier main (issue 12) and must fail now, in both
//! isolation modes where the attack applies to both.
//!
//! Needs bubblewrap for the isolated half (see `sandbox_isolation.rs`).

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

mod common;

use rebench::protocol::Request;
use rebench::session::ScorePhase;
use std::path::Path;
use std::time::Duration;

use common::*;

const OPERATOR_ENV: [(&str, &str); 5] = [
    ("OPENAI_API_KEY", "sk-operator-openai"),
    ("REBENCH_JUDGE_KEY", "sk-operator-judge"),
    ("DATABASE_URL", "postgres://u:operator-pw@db/x"),
    ("GITHUB_PAT", "ghp-operator"),
    ("SERVICE_AUTH", "operator-auth"),
];

fn server(isolated: bool, extra: &[(&str, &str)]) -> TestServer {
    server_on(if isolated { "bwrap" } else { "local" }, extra)
}

/// A server whose environment holds the operator's secrets, with `backend`.
fn server_on(backend: &str, extra: &[(&str, &str)]) -> TestServer {
    let mut vars: Vec<(&str, &str)> = OPERATOR_ENV.to_vec();
    vars.push(("REBENCH_BACKEND", backend));
    vars.extend_from_slice(extra);
    TestServer::start_with_env(&vars)
}

/// How many times anything of the operator's shows up in what `probe` prints.
fn operator_hits(text: &str) -> usize {
    [
        "sk-operator",
        "operator-pw",
        "ghp-operator",
        "operator-auth",
    ]
    .iter()
    .map(|needle| text.matches(needle).count())
    .sum()
}

/// Reads every process's environment and command line the participant can see.
const PROC_PROBE: &str = "for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do tr '\\0' '\\n' < $f 2>/dev/null; done; env";

#[tokio::test]
async fn nothing_a_jailed_participant_can_read_holds_an_operator_variable() {
    if !bwrap_works("security tests (isolated)") {
        return;
    }
    nothing_a_participant_can_read_holds_an_operator_variable("bwrap").await;
}

#[tokio::test]
async fn nothing_a_participant_in_a_container_can_read_holds_an_operator_variable() {
    if !docker_works("security tests (docker)") {
        return;
    }
    nothing_a_participant_can_read_holds_an_operator_variable("docker").await;
}

async fn nothing_a_participant_can_read_holds_an_operator_variable(backend: &str) {
    let (_env_dir, env) = fixture_env(|t| t);
    let server = server_on(backend, &[]);
    let session = server.create_running(&env, Some(3600)).await;
    let seen = server.exec(&session.id, PROC_PROBE).await;
    assert_eq!(seen.exit_code, Some(0), "{seen:?}");
    // The jail's or container's first process is visible inside: it must
    // be there and clean.
    assert!(seen.stdout.contains("sleep"), "{}", seen.stdout);
    assert_eq!(operator_hits(&seen.stdout), 0, "{}", seen.stdout);
    assert!(
        !seen.stdout.contains("REBENCH_DATA_DIR=/"),
        "{}",
        seen.stdout
    );
}

/// The scorer runs participant code through REBENCH_JAIL: that code must
/// see none of the scorer's variables (granted keys included), and its
/// output must not become the result.
fn scorer_running_participant_code(env: &Path) {
    std::fs::write(
        env.join("score.sh"),
        r#"#!/bin/sh
exec python3 -c '
import json, os, subprocess
jail = json.loads(os.environ["REBENCH_JAIL"])
probe = open(os.path.join(os.environ["REBENCH_WORKSPACE"], "probe.sh")).read()
seen = subprocess.run(jail + ["sh", "-c", probe], capture_output=True, text=True)
print(json.dumps({"raw": 1.0, "message": "granted=%s" % ("sk-operator-judge" in os.environ.get("REBENCH_JUDGE_KEY", "")), "details": {"seen": seen.stdout + seen.stderr}}))
'
"#,
    )
    .unwrap();
}

async fn participant_code_in_a_scorer_gets_no_secret(backend: &str) {
    let (_env_dir, env) = fixture_env(|t| {
        t.replace(
            "protected = [\"helper.py\"]",
            "protected = [\"helper.py\"]\npass_env = [\"REBENCH_JUDGE_KEY\"]",
        )
    });
    scorer_running_participant_code(&env);
    let server = server_on(backend, &[]);
    let session = server.create_running(&env, Some(3600)).await;
    let ws = Path::new(&session.workspace);
    // In local mode every process of the server's user is readable in /proc
    // (documented as unsafe): there the code's own environment is checked.
    let probe = if backend == "local" {
        "env"
    } else {
        PROC_PROBE
    };
    std::fs::write(ws.join("probe.sh"), probe).unwrap();
    let entry = server.score(&session.id).await;
    let text = entry.to_string();
    assert!(
        text.contains("granted=True"),
        "the scorer has its key: {text}"
    );
    let seen = entry["details"]["seen"].as_str().unwrap_or_default();
    assert!(seen.contains("PATH="), "the probe ran: {text}");
    assert_eq!(operator_hits(seen), 0, "{seen}");
    assert!(!seen.contains("REBENCH_PREPARED"), "{seen}");
}

#[tokio::test]
async fn participant_code_a_scorer_runs_gets_no_secret_in_a_container() {
    if !docker_works("security tests (docker)") {
        return;
    }
    participant_code_in_a_scorer_gets_no_secret("docker").await;
}

#[tokio::test]
async fn participant_code_a_scorer_runs_gets_no_secret_isolated() {
    if !bwrap_works("security tests (isolated)") {
        return;
    }
    participant_code_in_a_scorer_gets_no_secret("bwrap").await;
}

#[tokio::test]
async fn participant_code_a_scorer_runs_gets_no_secret_local() {
    participant_code_in_a_scorer_gets_no_secret("local").await;
}

/// `setsid env -i` drops the marker and leaves the process group: pausing
/// must still stop it, and ending the session must kill it.
async fn a_scrubbed_detached_loop_is_frozen_and_killed(isolated: bool, extra: &[(&str, &str)]) {
    let (_env_dir, env) = fixture_env(|t| t);
    let server = server(isolated, extra);
    let session = server.create_running(&env, Some(3600)).await;
    let ws = Path::new(&session.workspace);
    let command = "setsid env -i /bin/sh -c 'i=0; while :; do i=$((i+1)); echo $i > ticks; done' >/dev/null 2>&1 < /dev/null & echo started";
    let reply = server.exec(&session.id, command).await;
    assert_eq!(reply.stdout.trim(), "started", "{reply:?}");
    let ticks = || {
        std::fs::read_to_string(ws.join("ticks"))
            .unwrap_or_default()
            .trim()
            .parse::<u64>()
            .unwrap_or(0)
    };
    assert!(wait_until(Duration::from_secs(5), || ticks() > 0));
    let out = server.cli(&["pause", &session.id, "--reason", "break"]);
    assert!(out.status.success(), "{out:?}");
    std::thread::sleep(Duration::from_millis(300));
    let frozen = ticks();
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(
        ticks(),
        frozen,
        "the loop made progress while paused (containment {})",
        server.show(&session.id).await.containment
    );
    let out = server.cli(&["resume", &session.id]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        wait_until(Duration::from_secs(5), || ticks() > frozen),
        "it runs again after resume"
    );
    let out = server.cli(&["end", &session.id]);
    assert!(out.status.success(), "{out:?}");
    std::thread::sleep(Duration::from_millis(300));
    let after_end = ticks();
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(ticks(), after_end, "the loop outlived the session");
}

#[tokio::test]
async fn a_scrubbed_detached_loop_is_frozen_and_killed_local() {
    // Without isolation only a cgroup holds a process that drops its marker.
    if !cgroups_or_skip("the local containment test") {
        return;
    }
    a_scrubbed_detached_loop_is_frozen_and_killed(false, &[]).await;
}

#[tokio::test]
async fn a_scrubbed_detached_loop_is_frozen_and_killed_isolated() {
    if !bwrap_works("security tests (isolated)") {
        return;
    }
    a_scrubbed_detached_loop_is_frozen_and_killed(true, &[]).await;
}

#[tokio::test]
async fn without_cgroups_a_jail_still_freezes_by_its_pid_namespace() {
    if !bwrap_works("security tests (isolated)") {
        return;
    }
    a_scrubbed_detached_loop_is_frozen_and_killed(true, &[("REBENCH_CGROUPS", "off")]).await;
}

#[tokio::test]
async fn the_session_view_says_how_processes_are_contained() {
    let (_env_dir, env) = fixture_env(|t| t);
    let server = server(false, &[("REBENCH_CGROUPS", "off")]);
    let session = server.create_running(&env, Some(3600)).await;
    assert_eq!(session.containment, "marker");
    let shown = server.cli(&["show", &session.id]);
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(
        text.contains("containment: marker (a process that drops"),
        "{text}"
    );
    if cgroups_or_skip("the cgroup half of the containment test") {
        let server = self::server(false, &[]);
        let session = server.create_running(&env, Some(3600)).await;
        assert_eq!(session.containment, "cgroup");
    }
}

/// Participant code started during a scoring run (the scorer runs it, it
/// detaches) must not outlive the run; nor may a scorer's own `setsid` child.
async fn nothing_outlives_a_scoring_run(isolated: bool) {
    let (_env_dir, env) = fixture_env(|t| t);
    std::fs::write(
        env.join("score.sh"),
        r#"#!/bin/sh
python3 -c '
import json, os, subprocess
jail = json.loads(os.environ["REBENCH_JAIL"])
subprocess.run(jail + ["sh", "-c", "setsid env -i /bin/sh -c \"while :; do echo x >> participant-ticks; sleep 0.01; done\" >/dev/null 2>&1 < /dev/null &"])
'
setsid sh -c 'while :; do echo x >> "$REBENCH_WORKSPACE/scorer-ticks"; sleep 0.01; done' >/dev/null 2>&1 < /dev/null &
sleep 0.3
echo '{"raw": 1.0}'
"#,
    )
    .unwrap();
    let server = server(isolated, &[]);
    let session = server.create_running(&env, Some(3600)).await;
    let ws = Path::new(&session.workspace);
    let entry = server.score(&session.id).await;
    assert_eq!(entry["valid"], true, "{entry}");
    for file in ["participant-ticks", "scorer-ticks"] {
        // Appended to, so a kill mid-write never empties it.
        let read = || std::fs::metadata(ws.join(file)).map_or(0, |m| m.len());
        assert!(read() > 0, "{file} was never written: {entry}");
        std::thread::sleep(Duration::from_millis(200));
        let first = read();
        std::thread::sleep(Duration::from_millis(500));
        assert_eq!(read(), first, "{file}: a process outlived the scoring run");
    }
}

#[tokio::test]
async fn nothing_outlives_a_scoring_run_local() {
    // Its participant code drops the marker: only a cgroup holds it.
    if !cgroups_or_skip("the local scoring-run containment test") {
        return;
    }
    nothing_outlives_a_scoring_run(false).await;
}

#[tokio::test]
async fn nothing_outlives_a_scoring_run_isolated() {
    if !bwrap_works("security tests (isolated)") {
        return;
    }
    nothing_outlives_a_scoring_run(true).await;
}

/// A pause stops everything of the session, a scoring run in progress
/// included: the participant code it runs would otherwise go on computing
/// (and writing to the workspace) while the clock is stopped. The run is
/// not recorded and the request says why.
async fn a_pause_stops_the_scoring_run_in_progress(isolated: bool) {
    let (_env_dir, env) = fixture_env(|t| t);
    let server = server(isolated, &[]);
    let session = server.create_running(&env, Some(3600)).await;
    // From now on (the starting score is taken).
    std::fs::write(
        env.join("score.sh"),
        r#"#!/bin/sh
python3 -c '
import json, os, subprocess
jail = json.loads(os.environ["REBENCH_JAIL"])
subprocess.run(jail + ["sh", "-c", "for i in $(seq 3000); do echo x >> participant-ticks; sleep 0.01; done"])
'
echo '{"raw": 1.0}'
"#,
    )
    .unwrap();
    let ws = Path::new(&session.workspace).to_path_buf();
    let read = || std::fs::metadata(ws.join("participant-ticks")).map_or(0, |m| m.len());
    let mut scoring = server.admin().await;
    let id = session.id.clone();
    let request = tokio::spawn(async move {
        scoring
            .call::<serde_json::Value>(Request::Score { session: id })
            .await
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while read() == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the scorer never ran the participant code"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let out = server.cli(&["pause", "--reason", "break", &session.id]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reply = request.await.unwrap();
    let error = reply.expect_err("a scoring run stopped by a pause is not recorded");
    assert!(
        error
            .to_string()
            .contains("paused while it was being scored"),
        "{error}"
    );
    let first = read();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        read(),
        first,
        "participant code computed while the session was paused"
    );
    let view = server.show(&session.id).await;
    let scores = view.scores.unwrap_or_default();
    assert!(
        scores.iter().all(|s| s.phase != ScorePhase::Intermediate),
        "{scores:?}"
    );
    // Resumed, the session scores again as usual.
    assert!(server.cli(&["resume", &session.id]).status.success());
    std::fs::write(env.join("score.sh"), "#!/bin/sh\necho '{\"raw\": 1.0}'\n").unwrap();
    let entry = server.score(&session.id).await;
    assert_eq!(entry["valid"], true, "{entry}");
}

#[tokio::test]
async fn a_pause_stops_the_scoring_run_in_progress_local() {
    if !cgroups_or_skip("the local pause-while-scoring test") {
        return;
    }
    a_pause_stops_the_scoring_run_in_progress(false).await;
}

#[tokio::test]
async fn a_pause_stops_the_scoring_run_in_progress_isolated() {
    if !bwrap_works("security tests (isolated)") {
        return;
    }
    a_pause_stops_the_scoring_run_in_progress(true).await;
}

#[tokio::test]
async fn a_jail_hides_the_history_of_the_environment_folders() {
    if !bwrap_works("security tests (isolated)") {
        return;
    }
    let repo = repo_root();
    if !repo.join(".git").exists() {
        eprintln!("SKIPPED: not a git checkout, nothing to hide");
        return;
    }
    let server = server(true, &[]);
    let env = repo.join("environments/prefix-sum");
    let id = server.new_session_cli(&env, "smoke");
    assert!(server.cli(&["begin", &id]).status.success());
    let probe = format!(
        "ls -A {repo}/.git | wc -l; git -C {repo} show HEAD:environments/prefix-sum/reference/solution.py 2>&1 | grep -c prefix_sum; cat {env}/reference/solution.py 2>&1 | grep -c prefix_sum",
        repo = repo.display(),
        env = env.display()
    );
    let seen = server.exec(&id, &probe).await;
    let counts: Vec<&str> = seen.stdout.split_whitespace().collect();
    assert_eq!(counts, ["0", "0", "0"], "{seen:?}");
}

/// A session made isolated stays isolated: after a restart on which its
/// backend no longer works, nothing of it starts, with the reason, instead
/// of running as the server's user.
#[tokio::test]
async fn an_isolated_session_never_falls_back_to_local() {
    if !bwrap_works("security tests (isolated)") {
        return;
    }
    let (_env_dir, env) = fixture_env(|t| t);
    let mut server = server(true, &[]);
    let session = server.create_running(&env, Some(3600)).await;
    assert_eq!(
        server.exec(&session.id, "echo jailed").await.stdout.trim(),
        "jailed"
    );
    server.kill9();
    server
        .env
        .push(("REBENCH_BWRAP".into(), "/nonexistent/bwrap".into()));
    server.env.push(("REBENCH_BACKEND".into(), "local".into()));
    server.spawn();
    assert!(server.cli(&["resume", &session.id]).status.success());
    let mut admin = server.admin().await;
    let refused = admin
        .call::<rebench::protocol::ExecReply>(Request::Exec {
            session: session.id.clone(),
            command: "echo escaped".into(),
            timeout_s: Some(10.0),
            cwd: None,
        })
        .await
        .expect_err("an isolated session ran a command unisolated");
    assert!(
        refused
            .to_string()
            .contains("(bwrap) does not work on this machine"),
        "{refused}"
    );
    let view = server.show(&session.id).await;
    assert_eq!(view.sandbox, "bwrap");
}

/// The config file's `sandbox` key chooses the default when no variable
/// does; a bad one stops the server with the file and key named.
#[tokio::test]
async fn the_config_file_chooses_the_default_sandbox() {
    let (_env_dir, env) = fixture_env(|t| t);
    let config = tempfile::tempdir().unwrap();
    let file = config.path().join("rebench/config.toml");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    std::fs::write(&file, "sandbox = \"local\"\n").unwrap();
    let xdg = config.path().to_str().unwrap();
    let server = TestServer::start_with_env(&[("REBENCH_BACKEND", ""), ("XDG_CONFIG_HOME", xdg)]);
    let session = server
        .create(&env, Some(3600), rebench::session::Kind::Agent)
        .await;
    assert_eq!(session.sandbox, "local");
    assert_eq!(session.sandbox_warning, None, "chosen, not fallen back to");
    drop(server);
    // The variable still comes first.
    if bwrap_works("the config-file sandbox test") {
        let server =
            TestServer::start_with_env(&[("REBENCH_BACKEND", "bwrap"), ("XDG_CONFIG_HOME", xdg)]);
        let session = server
            .create(&env, Some(3600), rebench::session::Kind::Agent)
            .await;
        assert_eq!(session.sandbox, "bwrap");
    }
    std::fs::write(&file, "sandbox = \"vm\"\n").unwrap();
    let data = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(BIN)
        .args(["serve", "--data-dir"])
        .arg(data.path())
        .env("REBENCH_BACKEND", "")
        .env("XDG_CONFIG_HOME", xdg)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("config.toml: key `sandbox`=vm") && stderr.contains("unknown sandbox"),
        "{stderr}"
    );
}

#[tokio::test]
async fn the_safest_sandbox_that_works_is_the_default() {
    let (_env_dir, env) = fixture_env(|t| t);
    // No backend named: the server picks.
    let server = TestServer::start_with_env(&[("REBENCH_BACKEND", "")]);
    let session = server
        .create(&env, Some(3600), rebench::session::Kind::Agent)
        .await;
    if bwrap_works("the default-sandbox test") {
        assert_eq!(session.sandbox, "bwrap");
        assert_eq!(session.sandbox_warning, None);
    }
    // A session may ask for one.
    let out = server.cli(&[
        "new",
        env.to_str().unwrap(),
        "--participant",
        "p",
        "--sandbox",
        "local",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let local = server.show(id["id"].as_str().unwrap()).await;
    assert_eq!(
        (local.sandbox.as_str(), local.isolation.as_str()),
        ("local", "none")
    );
    let out = server.cli(&[
        "new",
        env.to_str().unwrap(),
        "--participant",
        "p",
        "--sandbox",
        "vm",
    ]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("unknown sandbox \"vm\""),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test]
async fn without_a_working_bwrap_sessions_run_local_and_say_so() {
    let (_env_dir, env) = fixture_env(|t| t);
    let server = TestServer::start_with_env(&[
        ("REBENCH_BACKEND", ""),
        ("REBENCH_BWRAP", "/nonexistent/bwrap"),
    ]);
    let session = server
        .create(&env, Some(3600), rebench::session::Kind::Agent)
        .await;
    assert_eq!(session.sandbox, "local");
    let warning = session.sandbox_warning.clone().unwrap_or_default();
    assert!(
        warning.contains("not isolated") && warning.contains("bubblewrap"),
        "{warning}"
    );
    let shown = server.cli(&["show", &session.id]);
    let text = String::from_utf8_lossy(&shown.stdout);
    assert!(text.contains("WARNING: not isolated"), "{text}");
    // Asking for bwrap outright is refused, not silently downgraded.
    let out = server.cli(&[
        "new",
        env.to_str().unwrap(),
        "--participant",
        "p",
        "--sandbox",
        "bwrap",
    ]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--sandbox bwrap"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// prefix-sum's scorer, attacked by the solution it runs: a result line of
/// its own on the scorer's stdout, and a clock it patches.
async fn prefix_sum_resists_forgery(isolated: bool) {
    let repo = repo_root();
    let env = repo.join("environments/prefix-sum");
    let server = server(isolated, &[]);
    let id = server.new_session_cli(&env, "smoke");
    assert!(server.cli(&["begin", &id]).status.success());
    let ws = std::path::PathBuf::from(server.show(&id).await.workspace);
    // 1. Print a perfect result where the scorer's result used to go, and leave.
    std::fs::write(
        ws.join("solution.py"),
        "import os, sys\n\
         line = b'{\"raw\": 0.001, \"message\": \"forged\"}\\n'\n\
         for fd in (1, 2):\n\
         \x20   os.write(fd, line)\n\
         sys.__stdout__.write(line.decode()); sys.__stdout__.flush()\n\
         os._exit(0)\n",
    )
    .unwrap();
    let entry = server.score(&id).await;
    assert_eq!(
        entry["valid"], false,
        "a forged line became the score: {entry}"
    );
    assert_ne!(entry["raw"], 0.001, "{entry}");
    // 2. Answer correctly but slowly, with a patched clock that says it was fast.
    std::fs::write(
        ws.join("solution.py"),
        "import time\n\
         _real = time.perf_counter\n\
         _calls = [0]\n\
         def _fake():\n\
         \x20   _calls[0] += 1\n\
         \x20   return _calls[0] * 1e-9\n\
         time.perf_counter = _fake\n\
         time.monotonic = _fake\n\
         def prefix_sum(xs):\n\
         \x20   end = _real() + 0.05\n\
         \x20   while _real() < end:\n\
         \x20       pass\n\
         \x20   out, total, odd = [], 0, False\n\
         \x20   for x in xs:\n\
         \x20       if odd:\n\
         \x20           total += x\n\
         \x20       out.append(total)\n\
         \x20       if x > 0:\n\
         \x20           odd = not odd\n\
         \x20   return out\n",
    )
    .unwrap();
    let entry = server.score(&id).await;
    assert_eq!(entry["valid"], true, "{entry}");
    let raw = entry["raw"].as_f64().unwrap();
    // 50 ms of work a call (less the noise of the baseline subtraction);
    // the patched clock would claim next to nothing.
    assert!(
        raw >= 40.0,
        "the time comes from outside the solution's process: {raw} ms"
    );
}

#[tokio::test]
async fn prefix_sum_resists_forgery_local() {
    prefix_sum_resists_forgery(false).await;
}

#[tokio::test]
async fn prefix_sum_resists_forgery_isolated() {
    if !bwrap_works("security tests (isolated)") {
        return;
    }
    prefix_sum_resists_forgery(true).await;
}

/// Scorers see only the operator's variables their manifest grants: every
/// `REBENCH_*` variable a bundled scorer reads that rebench does not set
/// itself must be in its `[scoring] pass_env`, or the scorer breaks.
#[test]
fn every_bundled_scorer_is_granted_the_operator_variables_it_reads() {
    const SET_BY_REBENCH: [&str; 6] = [
        "REBENCH_WORKSPACE",
        "REBENCH_PROFILE",
        "REBENCH_ENV_DIR",
        "REBENCH_JAIL",
        "REBENCH_PREPARED",
        "REBENCH_SANDBOX",
    ];
    let root = repo_root().join("environments");
    for entry in std::fs::read_dir(&root).unwrap() {
        let dir = entry.unwrap().path();
        let Ok(env) = rebench::environment::Environment::load(&dir) else {
            continue;
        };
        let granted = &env.scoring(None).unwrap().pass_env;
        let mut sources = Vec::new();
        for sub in ["scorer", "workspace/rcc"] {
            if let Ok(files) = std::fs::read_dir(dir.join(sub)) {
                sources.extend(files.filter_map(|f| f.ok()).map(|f| f.path()));
            }
        }
        for file in sources
            .iter()
            .filter(|p| p.extension().is_some_and(|e| e == "py"))
        {
            let text = std::fs::read_to_string(file).unwrap();
            for (at, _) in text.match_indices("\"REBENCH_") {
                let name: String = text[at + 1..]
                    .chars()
                    .take_while(|c| c.is_ascii_uppercase() || *c == '_')
                    .collect();
                if name.len() > "REBENCH_".len() && !SET_BY_REBENCH.contains(&name.as_str()) {
                    assert!(
                        granted.contains(&name),
                        "{} reads {name}, which {} does not grant in pass_env",
                        file.display(),
                        env.id()
                    );
                }
            }
        }
    }
}

/// With no sandbox named, a participant's command cannot reach the admin
/// socket (and so cannot extend its own budget) or the store: the default
/// backend isolates wherever it can. Old main defaulted to no isolation.
#[tokio::test]
async fn by_default_a_participant_cannot_reach_the_admin_socket_or_extend_itself() {
    if !bwrap_works("security tests (default sandbox)") {
        return;
    }
    let (_env_dir, env) = fixture_env(|t| t);
    let server = TestServer::start_with_env(&[("REBENCH_BACKEND", "")]);
    let session = server.create_running(&env, Some(3600)).await;
    let data = server.paths.root.display().to_string();
    let attack = format!(
        "rebench --data-dir {data} extend {id} --by 10h --reason mine 2>&1; \
         test -S {data}/rebench.sock && echo ADMIN-SOCKET; \
         test -e {data}/db && echo STORE; true",
        id = session.id
    );
    let seen = server.exec(&session.id, &attack).await;
    assert!(!seen.stdout.contains("ADMIN-SOCKET"), "{seen:?}");
    assert!(!seen.stdout.contains("STORE"), "{seen:?}");
    let view = server.show(&session.id).await;
    assert!(view.extensions.is_empty(), "{seen:?}");
    assert_eq!(view.budget_s, 3600.0);
}

/// An agent's commands are started by the session's spawner, which runs as
/// the participant: its control socket would let them forge what their
/// commands returned or start commands the log never saw. It marks itself
/// non-dumpable, so its descriptors and memory stay out of reach.
#[tokio::test]
async fn a_jailed_participant_cannot_reach_the_spawners_control_socket() {
    if !bwrap_works("security tests (isolated spawner)") {
        return;
    }
    let (_env_dir, env) = fixture_env(|t| t);
    let server = server_on("bwrap", &[]);
    let session = server.create_running(&env, Some(3600)).await;
    let attack = "tr '\\0' ' ' < /proc/$PPID/cmdline; echo; \
                  ls -l /proc/$PPID/fd/ >/dev/null 2>&1 && echo FDS-READ; \
                  readlink /proc/$PPID/fd/0 && echo SOCKET-SEEN; \
                  head -c 1 /proc/$PPID/mem >/dev/null 2>&1 && echo MEMORY-READ; true";
    let seen = server.exec(&session.id, attack).await;
    assert!(seen.stdout.contains("rebench-enter --serve"), "{seen:?}");
    assert!(!seen.stdout.contains("FDS-READ"), "{seen:?}");
    assert!(!seen.stdout.contains("SOCKET-SEEN"), "{seen:?}");
    assert!(!seen.stdout.contains("MEMORY-READ"), "{seen:?}");
    assert_eq!(seen.exit_code, Some(0), "{seen:?}");
}
