//! A participant who tries to exhaust the server or feed it values from
//! outside every range (issue 12): connection and shell caps, the handshake
//! timeout, durations that would overflow, commands run outside the
//! workspace, and text that would drive the operator's terminal.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use common::*;
use rebench::client::ClientError;
use rebench::protocol::{ErrorCode, Request};
use rebench::session::Phase;

/// The server's refusal in a failed request.
struct Refusal {
    code: ErrorCode,
    message: String,
}

fn refusal<T: std::fmt::Debug>(result: Result<T, ClientError>) -> Refusal {
    match result {
        Err(ClientError::Server { code, message }) => Refusal { code, message },
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn hello(stream: &mut UnixStream, token: &str) -> serde_json::Value {
    let line =
        serde_json::json!({"id": 1, "op": "hello", "version": 1, "client": "raw", "token": token});
    stream.write_all(format!("{line}\n").as_bytes()).unwrap();
    let mut reply = String::new();
    BufReader::new(stream.try_clone().unwrap())
        .read_line(&mut reply)
        .unwrap();
    serde_json::from_str(&reply).unwrap_or_else(|e| panic!("bad reply {reply:?}: {e}"))
}

#[tokio::test]
async fn one_token_cannot_hold_unbounded_connections_and_admin_still_works() {
    let (_env_dir, env) = fixture_env(|t| t);
    let server = TestServer::start();
    let session = server.create_running(&env, Some(3600)).await;
    let creds = server.credentials(&session.id).await;
    let mut held = Vec::new();
    for _ in 0..64 {
        let mut stream = UnixStream::connect(&creds.socket).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        assert_eq!(hello(&mut stream, &creds.token)["type"], "response");
        held.push(stream);
    }
    let mut one_more = UnixStream::connect(&creds.socket).unwrap();
    one_more
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let refused = hello(&mut one_more, &creds.token);
    assert_eq!(refused["code"], "refused", "{refused}");
    assert!(
        refused["message"]
            .as_str()
            .unwrap()
            .contains("64 connections"),
        "{refused}"
    );
    // The operator and the scorer are not starved.
    let view = server.show(&session.id).await;
    assert_eq!(view.state, Phase::Running);
    let entry = server.score(&session.id).await;
    assert_eq!(entry["valid"], true, "{entry}");
    // Closing connections gives the slots back.
    held.truncate(60);
    let mut again = UnixStream::connect(&creds.socket).unwrap();
    again
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut accepted = false;
    for _ in 0..50 {
        if hello(&mut again, &creds.token)["type"] == "response" {
            accepted = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
        again = UnixStream::connect(&creds.socket).unwrap();
        again
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
    }
    assert!(accepted, "a closed connection frees its slot");
}

#[tokio::test]
async fn a_connection_that_never_says_hello_is_closed() {
    let server = TestServer::start();
    let stream = UnixStream::connect(server.paths.participant_socket()).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let started = Instant::now();
    let mut reply = String::new();
    BufReader::new(stream.try_clone().unwrap())
        .read_line(&mut reply)
        .unwrap();
    assert!(reply.contains("no hello within"), "{reply}");
    let mut rest = String::new();
    let eof = BufReader::new(stream).read_line(&mut rest).unwrap();
    assert_eq!(eof, 0, "closed after the message: {rest}");
    assert!(started.elapsed() < Duration::from_secs(25));
}

#[tokio::test]
async fn a_session_cannot_open_unbounded_shells() {
    let (_env_dir, env) = fixture_env(|t| t);
    let server = TestServer::start();
    let session = server.create_running(&env, Some(3600)).await;
    let mut admin = server.admin().await;
    for _ in 0..32 {
        let _: serde_json::Value = admin
            .call(Request::ShellOpen {
                session: session.id.clone(),
                cols: 80,
                rows: 24,
            })
            .await
            .unwrap();
    }
    let refused = refusal(
        admin
            .request(Request::ShellOpen {
                session: session.id.clone(),
                cols: 80,
                rows: 24,
            })
            .await,
    );
    assert_eq!(refused.code, ErrorCode::Refused, "{}", refused.message);
    assert!(
        refused.message.contains("at most 32"),
        "{}",
        refused.message
    );
}

#[tokio::test]
async fn durations_from_outside_are_range_checked() {
    let (_env_dir, env) = fixture_env(|t| t);
    let server = TestServer::start();
    let session = server.create_running(&env, Some(3600)).await;
    let mut admin = server.admin().await;
    for timeout in [1e300, 1e20, -1.0, 0.0, 86_401.0] {
        let started = Instant::now();
        let refused = refusal(
            tokio::time::timeout(
                Duration::from_secs(10),
                admin.request(Request::Exec {
                    session: session.id.clone(),
                    command: "true".into(),
                    timeout_s: Some(timeout),
                    cwd: None,
                }),
            )
            .await
            .expect("a reply, not a hang"),
        );
        assert_eq!(
            refused.code,
            ErrorCode::BadRequest,
            "{timeout}: {}",
            refused.message
        );
        assert!(started.elapsed() < Duration::from_secs(5));
    }
    let out = server.cli(&[
        "exec",
        &session.id,
        "--timeout",
        "5124095576030431h",
        "--",
        "true",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--timeout") && err.contains("too long"),
        "{err}"
    );
    for by_s in [
        i64::MAX,
        i64::MAX / 1000 + 1,
        400 * 24 * 3600,
        i64::MIN,
        -400 * 24 * 3600,
    ] {
        let refused = refusal(
            admin
                .request(Request::Extend {
                    session: session.id.clone(),
                    by_s,
                    reason: "overflow".into(),
                })
                .await,
        );
        assert_eq!(
            refused.code,
            ErrorCode::BadRequest,
            "{by_s}: {}",
            refused.message
        );
    }
    let view = server.show(&session.id).await;
    assert!(view.extensions.is_empty(), "nothing was recorded");
    assert_eq!(view.budget_s, 3600.0);
}

#[tokio::test]
async fn commands_run_only_inside_the_workspace() {
    let (_env_dir, env) = fixture_env(|t| t);
    let server = TestServer::start();
    let session = server.create_running(&env, Some(3600)).await;
    let mut admin = server.admin().await;
    for cwd in ["/", "..", "../..", "sub/../../..", "/etc"] {
        let refused = refusal(
            admin
                .request(Request::Exec {
                    session: session.id.clone(),
                    command: "pwd".into(),
                    timeout_s: Some(5.0),
                    cwd: Some(cwd.into()),
                })
                .await,
        );
        assert_eq!(
            refused.code,
            ErrorCode::BadRequest,
            "{cwd}: {}",
            refused.message
        );
        assert!(refused.message.contains("outside"), "{}", refused.message);
    }
    std::fs::create_dir(std::path::Path::new(&session.workspace).join("sub")).unwrap();
    let inside: rebench::protocol::ExecReply = admin
        .call(Request::Exec {
            session: session.id.clone(),
            command: "pwd".into(),
            timeout_s: Some(5.0),
            cwd: Some("sub".into()),
        })
        .await
        .unwrap();
    assert!(inside.stdout.trim().ends_with("/sub"), "{inside:?}");
}

#[tokio::test]
async fn participant_text_cannot_drive_the_operators_terminal() {
    let (_env_dir, env) = fixture_env(|t| t);
    let server = TestServer::start();
    let session = server.create_running(&env, Some(3600)).await;
    let mut participant = server.participant(&session.id).await;
    let _: serde_json::Value = participant
        .call(Request::Note {
            session: session.id.clone(),
            text: "hi \u{1b}]52;c;ZXZpbA==\u{7} \u{1b}[2J there".into(),
        })
        .await
        .unwrap();
    let out = server.cli(&["show", &session.id]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        !text.contains('\u{1b}') && !text.contains('\u{7}'),
        "{text:?}"
    );
    assert!(text.contains("hi \\u{1b}]52;c;ZXZpbA=="), "{text}");
    // JSON output stays exact.
    let out = server.cli(&["show", &session.id, "--json"]);
    let view: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        view["notes"][0]["text"]
            .as_str()
            .unwrap()
            .contains('\u{1b}')
    );
}
