//! Per-machine calibration (issue 19): `env calibrate --save` and `env
//! prepare` measure starting and reference here, new sessions normalize
//! with them and record where they came from; a calibration of another
//! manifest is ignored and says so; `env bench` reports the spread.
//! The `fixed` fixture's scorer reports the number in workspace/value
//! (reference/ overlays its own), so every measured value is known.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

mod common;

use common::{TestServer, fixture_env};
use std::fs;
use std::path::{Path, PathBuf};

/// The fixture with `per_machine = true`, whose starting solution measures
/// 8 and reference 2 (the manifest says 4.76 and 1.6).
fn per_machine_env() -> (tempfile::TempDir, PathBuf) {
    let (tmp, env) = fixture_env(|m| {
        m.replace(
            "protected = [\"helper.py\"]",
            "protected = [\"helper.py\"]\nper_machine = true",
        )
    });
    fs::write(env.join("workspace/value"), "8\n").unwrap();
    fs::write(env.join("reference/value"), "2\n").unwrap();
    (tmp, env)
}

fn calibration_file(server: &TestServer) -> PathBuf {
    server
        .paths
        .root
        .join("prepared/fixed/base/calibration.json")
}

fn json_of(out: &std::process::Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // One document (pretty or not), else the last line after progress lines.
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(&stdout).unwrap_or_else(|_| {
        let last = stdout.lines().last().expect("no output");
        serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {stdout}"))
    })
}

/// `env calibrate ENV --runs 1 --save`, which must succeed.
fn calibrate_and_save(server: &TestServer, env_arg: &str) -> serde_json::Value {
    json_of(&server.cli(&[
        "env",
        "calibrate",
        env_arg,
        "--runs",
        "1",
        "--save",
        "--json",
    ]))
}

fn text_of(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Puts `value` in the session's workspace and scores it: the normalized score.
async fn normalized_score_of(server: &TestServer, id: &str, workspace: &Path, value: &str) -> f64 {
    fs::write(workspace.join("value"), value).unwrap();
    let score = server.score(id).await;
    score["normalized"]
        .as_f64()
        .unwrap_or_else(|| panic!("no normalized score: {score}"))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_saved_calibration_normalizes_new_sessions_and_they_record_it() {
    let (_tmp, env) = per_machine_env();
    let server = TestServer::start();
    let env_arg = env.to_str().unwrap();

    let measured = json_of(&server.cli(&[
        "env",
        "calibrate",
        env_arg,
        "--runs",
        "2",
        "--save",
        "--json",
    ]));
    assert_eq!(measured["starting"], 8.0, "{measured}");
    assert_eq!(measured["reference"], 2.0, "{measured}");
    assert_eq!(
        measured["saved"].as_str().map(PathBuf::from),
        Some(calibration_file(&server))
    );
    let stored: serde_json::Value =
        serde_json::from_slice(&fs::read(calibration_file(&server)).unwrap()).unwrap();
    assert_eq!(stored["runs"], 2);
    assert_eq!(stored["starting"], 8.0);

    // `env show` says which values sessions will use.
    let shown = text_of(&server.cli(&["env", "show", env_arg]));
    assert!(shown.contains("measured on"), "{shown}");

    let view = server.create_running(&env, Some(3600)).await;
    let used = view.normalization.clone().expect("the session's values");
    assert_eq!((used.starting, used.reference), (8.0, 2.0));
    let source = used
        .calibration
        .expect("the session records the calibration");
    assert_eq!(source.runs, 2);
    assert_eq!(
        (source.manifest_starting, source.manifest_reference),
        (4.76, 1.6)
    );
    // log(8/4) / log(8/2): halfway with the measured values (the manifest's would give 0.16).
    let workspace = PathBuf::from(&view.workspace);
    let normalized = normalized_score_of(&server, &view.id, &workspace, "4\n").await;
    assert!((normalized - 0.5).abs() < 1e-9, "{normalized}");

    // `rebench show` prints where the values came from.
    let show = text_of(&server.cli(&["show", &view.id]));
    assert!(
        show.contains("normalized with starting 8") && show.contains("measured on"),
        "{show}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_calibration_of_another_manifest_is_ignored_and_says_why() {
    let (_tmp, env) = per_machine_env();
    let server = TestServer::start();
    let env_arg = env.to_str().unwrap();
    calibrate_and_save(&server, env_arg);
    // The scorer's settings change: the measured values no longer apply.
    let manifest = env.join("environment.toml");
    let text = fs::read_to_string(&manifest).unwrap();
    fs::write(
        &manifest,
        text.replace("timeout = \"2s\"", "timeout = \"3s\""),
    )
    .unwrap();

    let shown = json_of(&server.cli(&["env", "show", env_arg, "--json"]));
    let ignored = shown["calibration_ignored"].to_string();
    assert!(ignored.contains("another version"), "{shown}");

    let view = server.create_running(&env, Some(3600)).await;
    let used = view.normalization.expect("the session's values");
    assert_eq!((used.starting, used.reference), (4.76, 1.6));
    assert!(used.calibration.is_none());
}

#[test]
fn env_prepare_calibrates_a_per_machine_environment_unless_told_not_to() {
    let (_tmp, env) = per_machine_env();
    let server = TestServer::start();
    let env_arg = env.to_str().unwrap();

    let skipped = server.cli(&["env", "prepare", env_arg, "--no-calibrate"]);
    assert!(skipped.status.success(), "{}", text_of(&skipped));
    assert!(!calibration_file(&server).exists());

    let prepared = server.cli(&["env", "prepare", env_arg]);
    let text = text_of(&prepared);
    assert!(prepared.status.success(), "{text}");
    assert!(text.contains("starting = 8, reference = 2"), "{text}");
    assert!(calibration_file(&server).exists());

    // A starting solution with no valid run fails the preparation, saying so.
    fs::remove_file(calibration_file(&server)).unwrap();
    fs::write(env.join("workspace/mode"), "null\n").unwrap();
    let failed = server.cli(&["env", "prepare", env_arg]);
    let text = text_of(&failed);
    assert!(!failed.status.success(), "{text}");
    assert!(
        text.contains("no valid run of the starting solution"),
        "{text}"
    );
    assert!(!calibration_file(&server).exists());
}

#[test]
fn a_manifest_without_per_machine_is_not_calibrated_by_prepare() {
    let (_tmp, env) = fixture_env(|m| m);
    let server = TestServer::start();
    let out = server.cli(&["env", "prepare", env.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text_of(&out));
    assert!(!calibration_file(&server).exists());
}

#[test]
fn env_bench_reports_each_solutions_spread_against_the_targets() {
    let (_tmp, env) = per_machine_env();
    let server = TestServer::start();
    let env_arg = env.to_str().unwrap();
    calibrate_and_save(&server, env_arg);
    let bench = json_of(&server.cli(&[
        "env", "bench", env_arg, "--runs", "3", "--busy", "1", "--json",
    ]));
    assert_eq!(bench["runs"], 3);
    assert_eq!(bench["busy"], 1);
    let series = bench["series"].as_array().unwrap();
    assert_eq!(series.len(), 2, "{bench}");
    for (s, target) in series.iter().zip([0.0, 1.0]) {
        assert_eq!(s["target"], target);
        assert_eq!(s["raw"].as_array().unwrap().len(), 3);
        assert_eq!(s["spread"], 0.0, "{s}");
        assert_eq!(s["steady"], true, "{s}");
    }
    // Against the manifest's values the same runs are far off: not steady.
    fs::remove_file(calibration_file(&server)).unwrap();
    let bench = json_of(&server.cli(&["env", "bench", env_arg, "--runs", "2", "--json"]));
    let starting = &bench["series"][0];
    assert!(
        starting["normalized"][0].as_f64().unwrap() < -0.4,
        "{bench}"
    );
    assert_eq!(starting["steady"], false);
    let text = text_of(&server.cli(&["env", "bench", env_arg, "--runs", "1"]));
    assert!(text.contains("NOT held"), "{text}");
}

/// A participant in an isolated session who wants an easier scale for
/// their next session: the calibration file lives in the data dir, which
/// the jail hides, so they can neither read nor write it, and a forged file
/// beside the workspace changes nothing.
#[tokio::test(flavor = "multi_thread")]
async fn a_jailed_participant_cannot_forge_the_calibration_later_sessions_use() {
    if !common::bwrap_works("the calibration forgery test") {
        return;
    }
    let (_tmp, env) = per_machine_env();
    let server = TestServer::start();
    let env_arg = env.to_str().unwrap();
    calibrate_and_save(&server, env_arg);
    let out = server.cli(&[
        "new",
        env_arg,
        "--participant",
        "p",
        "--sandbox",
        "bwrap",
        "--json",
    ]);
    let id = json_of(&out)["id"].as_str().unwrap().to_string();
    let mut admin = server.admin().await;
    let _: rebench::protocol::SessionView = admin
        .call(rebench::protocol::Request::Begin {
            session: id.clone(),
        })
        .await
        .unwrap();
    let file = calibration_file(&server);
    let forged = r#"{"starting": 1000000.0, "reference": 999999.0}"#;
    let attack = format!(
        "echo RAN; cat {f}; mkdir -p {d} && echo '{forged}' > {f} && echo WROTE",
        f = file.display(),
        d = file.parent().unwrap().display()
    );
    let reply = server.exec(&id, &attack).await;
    assert!(reply.stdout.contains("RAN"), "{reply:?}");
    assert!(
        !reply.stdout.contains("starting"),
        "the calibration is readable from the jail: {}",
        reply.stdout
    );
    // Whatever the jail let it write, the real file is untouched.
    let stored: serde_json::Value = serde_json::from_slice(&fs::read(&file).unwrap()).unwrap();
    assert_eq!(stored["starting"], 8.0, "{stored}");
    let next = server.create_running(&env, Some(3600)).await;
    let used = next.normalization.expect("the session's values");
    assert_eq!((used.starting, used.reference), (8.0, 2.0));
}
