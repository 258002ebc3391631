//! METR Task Standard families through the real server in real containers
//! (issue 14): families written for the tests (`tests/fixtures/families`)
//! registered with `env add`, their images built (install() with a required
//! variable), sessions set up by start(t), scored through intermediate_score
//! with the standard's protected score log and aggregate_scores, answers
//! scored by score(t, submission), hidden scores, teardown, and a family
//! whose start raises leaving nothing behind.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

mod common;

use std::path::{Path, PathBuf};

use common::*;
use rebench::protocol::Request;
use rebench::session::{EndReason, Phase};
use rebench::session::{Kind, ScorePhase};

fn families() -> PathBuf {
    repo_root().join("tests/fixtures/families")
}

fn server() -> TestServer {
    TestServer::start_with_env(&[("SCORED_LOG_TOKEN", "sesame")])
}

fn ok(out: &std::process::Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null)
}

/// `rebench new TASK` (an id or a path) and `begin`; the session's id.
fn start(server: &TestServer, task: &str) -> String {
    let view = ok(&server.cli(&["new", task, "--participant", "p", "--json"]));
    let id = view["id"].as_str().unwrap().to_string();
    ok(&server.cli(&["begin", &id, "--json"]));
    id
}

fn root_in(id: &str, command: &str) -> String {
    let out = std::process::Command::new("docker")
        .args([
            "exec",
            "-u",
            "root",
            &format!("rebench-{id}"),
            "sh",
            "-c",
            command,
        ])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test]
async fn a_family_task_is_set_up_scored_and_aggregated_in_its_container() {
    if !docker_works("the Task Standard tests") {
        return;
    }
    let server = server();
    let added = ok(&server.cli(&["env", "add", families().to_str().unwrap(), "--json"]));
    let ids: Vec<&str> = added["added"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&"scored_log/main") && ids.contains(&"answer_only/easy"),
        "{ids:?}"
    );
    let listed = ok(&server.cli(&["env", "list", "--json"]));
    assert!(
        listed
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["id"] == "scored_log/hidden")
    );

    let id = start(&server, "scored_log/main");
    let view = server.show(&id).await;
    assert_eq!(
        (view.environment.as_str(), view.sandbox.as_str()),
        ("scored_log/main", "docker")
    );
    assert_eq!(view.budget_s, 3600.0, "the sidecar's budget");
    assert_eq!(view.score_count, 0, "no starting score for a family");

    // What start(t) left, as the participant sees it.
    let seen = server
        .exec(&id, "id -un; cat instructions.txt; cat solution.txt; cat secret.txt; cat /protected/score.log; ls -ld .cache_of_root; ls /root")
        .await;
    assert!(seen.stdout.starts_with("agent\n"), "{seen:?}");
    assert!(
        seen.stdout.contains("Write the target number") && seen.stdout.contains("0\n"),
        "{seen:?}"
    );
    assert!(
        !seen.stdout.contains("the target is 7"),
        "a protected file was readable: {seen:?}"
    );
    assert!(
        seen.stderr.contains("secret.txt: Permission denied"),
        "{seen:?}"
    );
    assert!(
        seen.stderr
            .contains("/protected/score.log: Permission denied"),
        "{seen:?}"
    );
    assert!(
        seen.stderr.contains("/root") && seen.stderr.contains("Permission denied"),
        "{seen:?}"
    );
    assert!(
        seen.stdout.contains("root root"),
        "a hidden folder of root's stays root's: {seen:?}"
    );
    let mut admin = server.admin().await;
    let instructions: serde_json::Value = admin
        .call(Request::Instructions {
            session: id.clone(),
        })
        .await
        .unwrap();
    assert!(
        instructions["instructions"]
            .as_str()
            .unwrap()
            .contains("Task: main")
    );

    // intermediate_score, as root, normalized by the sidecar (0.125 → 0, 1 → 1).
    let first = server.score(&id).await;
    assert_eq!(
        (first["valid"].clone(), first["raw"].clone()),
        (true.into(), 0.125.into()),
        "{first}"
    );
    assert_eq!(first["normalized"], 0.0);
    assert_eq!(first["message"], "guess: 0", "{first}");
    server.exec(&id, "echo 7 > solution.txt").await;
    let best = server.score(&id).await;
    assert_eq!(best["normalized"], 1.0, "{best}");
    server.exec(&id, "echo oops > solution.txt").await;
    let nan = server.score(&id).await;
    assert_eq!(nan["valid"], false, "NaN is an invalid attempt: {nan}");
    let log = root_in(&id, "cat /protected/score.log");
    assert_eq!(log.lines().count(), 3, "{log}");
    assert!(
        log.lines().all(|l| l.contains("\"uid\": \"0\"")),
        "scored as root: {log}"
    );
    // The family's required variable reached install and start by stdin
    // only: no process the participant can see holds it in its
    // environment or command line.
    let leaked = server
        .exec(
            &id,
            "grep -al 'ses[a]me' /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null; true",
        )
        .await;
    assert_eq!(
        leaked.stdout.trim(),
        "",
        "the operator's variable leaked: {leaked:?}"
    );
    // The participant cannot forge it.
    let forged = server
        .exec(&id, "echo '{\"score\": 1}' >> /protected/score.log")
        .await;
    assert_ne!(forged.exit_code, Some(0));

    // The final score: one more intermediate score joins the log, then aggregate_scores.
    ok(&server.cli(&["submit", &id, "--json"]));
    let view = server.show(&id).await;
    let final_score = view.final_score.expect("a final score");
    assert_eq!((final_score.raw, final_score.normalized), (1.0, 1.0));
    let scores = view.scores.unwrap();
    let last = scores.last().unwrap();
    assert_eq!(last.phase, ScorePhase::Final);
    assert!(
        Path::new(&view.workspace).join("torn_down").exists(),
        "teardown ran"
    );
    assert!(session_containers(&id).is_empty(), "the container is gone");
}

#[tokio::test]
async fn answers_are_scored_by_the_familys_score_and_hidden_scores_stay_hidden() {
    if !docker_works("the Task Standard tests") {
        return;
    }
    let server = server();
    let easy = families().join("answer_only/easy");
    let id = start(&server, easy.to_str().unwrap());
    let refused = server.cli(&["score", &id]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("scored only from its answer"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    let instructions = server.exec(&id, "cat instructions.txt").await;
    assert!(instructions.stdout.contains("Find the answer"));
    assert!(!instructions.stdout.contains("noise"), "{instructions:?}");
    ok(&server.cli(&["submit", &id, "--answer", "42", "--json"]));
    let view = server.show(&id).await;
    let final_score = view.final_score.expect("a final score");
    assert_eq!(
        (final_score.raw, final_score.normalized),
        (1.0, 1.0),
        "raw scores stand"
    );
    let entry = &view.scores.unwrap()[0];
    assert_eq!(entry.details.as_ref().unwrap()["submission"], "42");

    let manual = start(
        &server,
        families().join("answer_only/manual").to_str().unwrap(),
    );
    ok(&server.cli(&["submit", &manual, "--answer", "anything", "--json"]));
    let view = server.show(&manual).await;
    assert!(view.final_score.is_none());
    let entry = &view.scores.unwrap()[0];
    assert_eq!(entry.valid, Some(false));
    assert!(entry.message.contains("None"), "{entry:?}");

    let hidden = start(
        &server,
        families().join("scored_log/hidden").to_str().unwrap(),
    );
    server.exec(&hidden, "echo 7 > solution.txt").await;
    let mut participant = server.participant(&hidden).await;
    let seen: serde_json::Value = participant
        .call(Request::Score {
            session: hidden.clone(),
        })
        .await
        .unwrap();
    assert!(
        seen["raw"].is_null() && seen["normalized"].is_null(),
        "{seen}"
    );
    assert!(seen.get("details").is_none_or(|d| d.is_null()), "{seen}");
    let admin_view = server.score(&hidden).await;
    assert_eq!(admin_view["raw"], 1.0, "{admin_view}");
    ok(&server.cli(&["end", &hidden, "--json"]));
}

#[tokio::test]
async fn a_family_whose_start_raises_leaves_no_session() {
    if !docker_works("the Task Standard tests") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("broken_start");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(
        dir.join("broken_start.py"),
        "class TaskFamily:\n    standard_version = '0.3.0'\n    @staticmethod\n    def get_tasks():\n        return {'t': {}}\n    @staticmethod\n    def get_instructions(t):\n        return 'x'\n    @staticmethod\n    def start(t):\n        raise ValueError('no GPU in this container')\n    @staticmethod\n    def score(t, s):\n        return 1.0\n",
    )
    .unwrap();
    let server = server();
    let out = server.cli(&["new", dir.join("t").to_str().unwrap(), "--participant", "p"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("broken_start/t: start failed")
            && stderr.contains("ValueError: no GPU in this container"),
        "{stderr}"
    );
    let listed = ok(&server.cli(&["sessions", "--json"]));
    assert_eq!(listed.as_array().map_or(0, Vec::len), 0, "{listed}");
    let containers = std::process::Command::new("docker")
        .args(["ps", "-a", "--format", "{{.Image}}"])
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&containers.stdout).contains("rebench-family-broken_start"),
        "a container was left"
    );
}

/// A family written into a temp folder: `<name>/<name>.py` holding `code`.
fn temp_family(name: &str, code: &str) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join(name);
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join(format!("{name}.py")), code).unwrap();
    (tmp, dir)
}

const MINIMAL: &str = "class TaskFamily:\n    standard_version = '0.3.0'\n    @staticmethod\n    def get_tasks():\n        return {'t': {}}\n    @staticmethod\n    def get_instructions(t):\n        return 'x'\n    @staticmethod\n    def score(t, s):\n        return 1.0\n";

#[tokio::test]
async fn broken_families_are_refused_with_their_traceback_and_the_step() {
    if !docker_works("the Task Standard tests") {
        return;
    }
    let server = server();
    // A family that cannot be imported: at env add, with its traceback.
    let (_a, bad_import) = temp_family("bad_import", "import nonexistent_module_xyz\n");
    let out = server.cli(&["env", "add", bad_import.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("importing bad_import") && stderr.contains("ModuleNotFoundError"),
        "{stderr}"
    );
    // An auxiliary VM: refused at env add.
    let (_b, aux) = temp_family(
        "wants_vm",
        &format!(
            "{MINIMAL}    @staticmethod\n    def get_aux_vm_spec(t):\n        return {{'cpu_count_range': [2, 2]}}\n"
        ),
    );
    let out = server.cli(&["env", "add", aux.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("wants_vm/t") && stderr.contains("auxiliary VM"),
        "{stderr}"
    );
    // install() that fails: at new, naming the step, with the traceback; no session.
    let (_c, bad_install) = temp_family(
        "bad_install",
        &format!(
            "{MINIMAL}    @staticmethod\n    def install():\n        raise RuntimeError('the mirror is down')\n"
        ),
    );
    let out = server.cli(&[
        "new",
        bad_install.join("t").to_str().unwrap(),
        "--participant",
        "p",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("install() failed") && stderr.contains("RuntimeError: the mirror is down"),
        "{stderr}"
    );
    // A task the family does not have.
    let (_d, minimal) = temp_family("minimal_family", MINIMAL);
    let out = server.cli(&[
        "new",
        minimal.join("nope").to_str().unwrap(),
        "--participant",
        "p",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("has no task \"nope\" (its tasks: t)"),
        "{stderr}"
    );
    let listed = ok(&server.cli(&["sessions", "--json"]));
    assert_eq!(listed.as_array().map_or(0, Vec::len), 0, "{listed}");
}

#[tokio::test]
async fn in_the_session_submit_answers_and_permissions_give_the_network() {
    if !docker_works("the Task Standard tests") {
        return;
    }
    let server = server();
    let online = start(
        &server,
        families().join("answer_only/online").to_str().unwrap(),
    );
    let offline = start(
        &server,
        families().join("answer_only/easy").to_str().unwrap(),
    );
    let network = |id: &str| {
        let out = std::process::Command::new("docker")
            .args([
                "inspect",
                "-f",
                "{{.HostConfig.NetworkMode}}",
                &format!("rebench-{id}"),
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(
        network(&online),
        "bridge",
        "full_internet gives the engine's network"
    );
    assert_eq!(network(&offline), "none");
    // The participant submits from inside the container (the command is
    // stopped with the session's other processes; the answer counts).
    server.exec(&offline, "rebench task submit 42").await;
    let mut view = server.show(&offline).await;
    for _ in 0..200 {
        if view.state == Phase::Ended {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        view = server.show(&offline).await;
    }
    assert_eq!(view.state, Phase::Ended, "{view:?}");
    assert_eq!(view.end_reason, Some(EndReason::Submitted));
    assert_eq!(view.final_score.map(|f| f.raw), Some(1.0));
    ok(&server.cli(&["submit", &online, "--answer", "41", "--json"]));
    let view = server.show(&online).await;
    assert_eq!(
        view.final_score.map(|f| f.raw),
        Some(0.0),
        "a wrong answer scores 0"
    );

    // The report takes them like any runs, marked as raw scores.
    let report = server.cli(&["report"]);
    let text = String::from_utf8_lossy(&report.stdout);
    assert!(
        report.status.success(),
        "{}",
        String::from_utf8_lossy(&report.stderr)
    );
    assert!(
        text.contains("answer_only/easy") && text.contains("answer_only/online"),
        "{text}"
    );
    assert!(
        text.contains("UNNORMALIZED: answer_only/easy, answer_only/online"),
        "{text}"
    );
}

#[test]
fn a_human_reads_and_answers_in_the_workspace() {
    if !docker_works("the Task Standard tests")
        || !common::tmux::tmux_or_skip("the Task Standard workspace test")
    {
        return;
    }
    let dir = tempfile::Builder::new()
        .prefix("rbts")
        .tempdir_in("/tmp")
        .unwrap();
    let config_home = dir.path().join("config");
    std::fs::create_dir_all(&config_home).unwrap();
    let t = common::tmux::Tmux {
        socket: format!("rbts-{}", std::process::id()),
        data_dir: dir.path().join("data"),
        _dir: dir,
    };
    let task = families().join("answer_only/easy");
    t.open(
        "w",
        &format!("start {} --participant tester", task.display()),
        &config_home,
    );
    t.wait_text("w", "to start the clock");
    t.keys("w", &["i"]);
    t.wait_text("w", "Find the answer and submit it");
    t.keys("w", &["Escape"]);
    // Enter right after Escape can reach the UI as one Alt-Enter: wait for
    // the overlay to close first.
    t.wait_for("w", "the instructions to close", |s| {
        !s.contains("Find the answer and submit it")
    });
    t.keys("w", &["Enter"]);
    t.wait_for("w", "the running shell", |s| {
        s.contains("RUNNING") && s.contains("$")
    });
    t.type_line("w", "cat instructions.txt; id -un");
    t.wait_for("w", "the shell's output", |s| {
        common::tmux::pane_lines(s).iter().any(|l| l == "agent")
    });
    // The score key says how this task is scored.
    t.keys("w", &["C-g"]);
    t.keys("w", &["s"]);
    t.wait_text("w", "scored only from its answer");
    // Submit asks for the answer.
    t.keys("w", &["C-g"]);
    t.keys("w", &["S"]);
    t.wait_text("w", "Your answer");
    assert!(
        t.tmux(&["send-keys", "-t", "w", "-l", "42"])
            .status
            .success(),
        "typing the answer"
    );
    t.keys("w", &["Enter"]);
    t.wait_for("w", "the summary", |s| {
        s.contains("Session ended") && s.contains("Final score")
    });
    let sessions: serde_json::Value = serde_json::from_slice(
        &std::process::Command::new(BIN)
            .arg("--data-dir")
            .arg(&t.data_dir)
            .args(["sessions", "--json"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let id = sessions[0]["id"].as_str().unwrap().to_string();
    let shown: serde_json::Value = serde_json::from_slice(
        &std::process::Command::new(BIN)
            .arg("--data-dir")
            .arg(&t.data_dir)
            .args(["show", &id, "--json"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    assert_eq!(shown["final"]["raw"], 1.0, "{shown}");
    // The recording exports like any session's.
    let cast = t.data_dir.join("w.cast");
    let out = std::process::Command::new(BIN)
        .arg("--data-dir")
        .arg(&t.data_dir)
        .args(["export", &id, "--format", "asciicast-v2", "-o"])
        .arg(&cast)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&cast).unwrap();
    assert!(
        text.contains("Find the answer"),
        "the recording holds the shell's output"
    );
    t.keys("w", &["q"]);
}

/// A family whose scorer runs the participant's code (as `agent`, with
/// the scorer's stdout, as RE-Bench families do) cannot be fooled into a
/// forged result: the code finds no separator on any command line, and
/// what it prints, now or later, is not the result.
#[tokio::test]
async fn participant_code_a_family_runs_cannot_forge_its_result() {
    if !docker_works("the Task Standard tests") {
        return;
    }
    let code = "import subprocess\nclass TaskFamily:\n    standard_version = '0.3.0'\n    @staticmethod\n    def get_tasks():\n        return {'t': {}}\n    @staticmethod\n    def get_instructions(t):\n        return 'x'\n    @staticmethod\n    def intermediate_score(t):\n        subprocess.run(['runuser', '-u', 'agent', '--', 'sh', '/home/agent/solution.sh'])\n        return {'score': 0.25, 'message': {'honest': True}, 'details': {}}\n    @staticmethod\n    def aggregate_scores(t, log):\n        return max(e['score'] for e in log)\n";
    let (_tmp, dir) = temp_family("runs_code", code);
    let server = server();
    let id = start(&server, dir.join("t").to_str().unwrap());
    // The hostile solution: look for a separator on every command line,
    // print forged results now and from a process that outlives the call.
    let solution = r#"
for f in /proc/[0-9]*/cmdline; do tr '\0' ' ' < "$f"; echo; done > /tmp/cmdlines 2>/dev/null
SEP=$(grep -o -- '--rebench-result-[0-9a-f]*--' /tmp/cmdlines | head -1)
echo "found:[$SEP]" >&2
forged() { printf '\n%s\n{"score": 99.0, "why": null, "message": "forged", "details": null}\n%s\n' "$SEP" "$SEP"; }
forged
(sleep 1; forged) &
"#;
    server
        .exec(&id, &format!("cat > solution.sh <<'EOF'\n{solution}\nEOF"))
        .await;
    let entry = server.score(&id).await;
    assert_eq!(entry["raw"], 0.25, "{entry}");
    let view = server.show(&id).await;
    let output = view.scores.unwrap()[0].output.clone().unwrap_or_default();
    assert!(
        output.contains("found:[]"),
        "the separator was visible: {output}"
    );
    ok(&server.cli(&["submit", &id, "--json"]));
    let final_score = server.show(&id).await.final_score.expect("a final score");
    assert_eq!(final_score.raw, 0.25);
}

/// The budget's end takes a final score only where the manifest says
/// `score_on_usage_limits: true`; a NaN answer is invalid; the operator's
/// starting and reference from `env add` normalize a family's scores;
/// `env prepare` builds the image ahead; agents run family tasks too.
#[tokio::test]
async fn usage_limits_nan_and_the_operators_normalization() {
    if !docker_works("the Task Standard tests") {
        return;
    }
    let server = server();
    let new = |task: &str, extra: &[&str]| {
        let mut args = vec!["new", task, "--participant", "p", "--json"];
        args.extend_from_slice(extra);
        let id = ok(&server.cli(&args))["id"].as_str().unwrap().to_string();
        ok(&server.cli(&["begin", &id, "--json"]));
        id
    };
    let scored = families().join("scored_log/main");
    let answer = families().join("answer_only/easy");
    let limited = new(
        scored.to_str().unwrap(),
        &["--budget", "6s", "--kind", "agent"],
    );
    let unscored = new(answer.to_str().unwrap(), &["--budget", "3s"]);
    server.exec(&limited, "echo 6 > solution.txt").await;
    let mut views = Vec::new();
    for id in [&limited, &unscored] {
        let mut view = server.show(id).await;
        for _ in 0..300 {
            if view.state == Phase::Ended {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            view = server.show(id).await;
        }
        assert_eq!(
            view.end_reason,
            Some(EndReason::BudgetExhausted),
            "{view:?}"
        );
        views.push(view);
    }
    let scores = views[0].scores.clone().unwrap();
    assert_eq!(views[0].kind, Kind::Agent);
    assert_eq!(
        scores.last().unwrap().phase,
        ScorePhase::Final,
        "score_on_usage_limits: true"
    );
    assert_eq!(
        views[0].final_score.map(|f| f.raw),
        Some(0.5),
        "1/(1+|6-7|)"
    );
    assert!(
        views[1].scores.clone().unwrap().is_empty(),
        "no manifest: no score at the limit"
    );

    let nan = new(families().join("answer_only/nan").to_str().unwrap(), &[]);
    ok(&server.cli(&["submit", &nan, "--answer", "x", "--json"]));
    let entry = server.show(&nan).await.scores.unwrap()[0].clone();
    assert_eq!(entry.valid, Some(false));
    assert!(entry.message.contains("NaN"), "{entry:?}");

    // The operator's normalization, given at env add.
    let (_tmp, dir) = temp_family("graded", MINIMAL);
    ok(&server.cli(&[
        "env",
        "add",
        dir.to_str().unwrap(),
        "--starting",
        "0",
        "--reference",
        "2",
        "--json",
    ]));
    let prepared = ok(&server.cli(&["env", "prepare", "graded/t", "--json"]));
    assert!(
        prepared["image"]
            .as_str()
            .unwrap()
            .starts_with("rebench-family-graded:"),
        "{prepared}"
    );
    let graded = new("graded/t", &[]);
    ok(&server.cli(&["submit", &graded, "--answer", "any", "--json"]));
    let view = server.show(&graded).await;
    assert!(!view.unnormalized);
    assert_eq!(
        view.final_score.map(|f| (f.raw, f.normalized)),
        Some((1.0, 0.5))
    );
}
