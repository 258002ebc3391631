//! The terminal recording as the server keeps it: crash safety and the
//! input-recording switch.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

mod common;

use std::time::Duration;

use common::*;
use rebench::client::Client;
use rebench::protocol::{
    CreateSession, Push, RecordingPage, Request, SessionView, b64_decode, b64_encode,
};
use rebench::session::Kind;

/// A running session with a driven shell; the TempDir holds its environment.
async fn session_with_shell(
    server: &TestServer,
    no_input_recording: bool,
) -> (tempfile::TempDir, String, Client, u32) {
    let (env_dir, env) = fixture_env(|t| t);
    let mut admin = server.admin().await;
    let view: SessionView = admin
        .call(Request::CreateSession(Box::new(CreateSession {
            budget_s: Some(3600),
            no_input_recording,
            ..CreateSession::new(env.display().to_string(), "rec", Kind::Human)
        })))
        .await
        .unwrap();
    let _: SessionView = admin
        .call(Request::Begin {
            session: view.id.clone(),
        })
        .await
        .unwrap();
    let (driver, shell, _) = server.drive_new_shell(&view.id, 80, 24).await;
    (env_dir, view.id, driver, shell)
}

async fn type_and_wait(driver: &mut Client, session: &str, shell: u32, text: &str, needle: &str) {
    driver
        .send(Request::ShellInput {
            session: session.into(),
            shell,
            data: b64_encode(text.as_bytes()),
        })
        .await
        .unwrap();
    let mut seen = String::new();
    let found = tokio::time::timeout(Duration::from_secs(15), async {
        while !seen.contains(needle) {
            if let Ok(Push::ShellOutput { data, .. }) = driver.next_push().await {
                seen.push_str(&String::from_utf8_lossy(&b64_decode(&data).unwrap()));
            }
        }
    })
    .await;
    assert!(found.is_ok(), "{needle:?} never showed: {seen}");
}

async fn recorded(server: &TestServer, session: &str, shell: u32) -> (String, String) {
    let page: RecordingPage = server
        .admin()
        .await
        .call(Request::Recording {
            session: session.into(),
            shell,
            from: 0,
            limit: None,
        })
        .await
        .unwrap();
    let (mut output, mut input) = (String::new(), String::new());
    for chunk in page.chunks {
        let text = String::from_utf8_lossy(&b64_decode(&chunk.data).unwrap()).to_string();
        match chunk.kind.as_str() {
            "output" => output.push_str(&text),
            "input" => input.push_str(&text),
            _ => {}
        }
    }
    (output, input)
}

#[tokio::test]
async fn output_survives_kill_minus_nine_of_the_server() {
    let mut server = TestServer::start();
    let (_env, session, mut driver, shell) = session_with_shell(&server, false).await;
    type_and_wait(
        &mut driver,
        &session,
        shell,
        "echo before-the-crash-$((6*7))\r",
        "before-the-crash-42",
    )
    .await;
    // Past the 200 ms recording flush, then no chance to flush again.
    std::thread::sleep(Duration::from_millis(600));
    drop(driver);
    server.kill9();
    server.spawn();
    let (output, input) = recorded(&server, &session, shell).await;
    assert!(
        output.contains("before-the-crash-42"),
        "recorded output after the crash: {output}"
    );
    assert!(
        input.contains("echo before-the-crash"),
        "recorded input: {input}"
    );
}

#[tokio::test]
async fn keystrokes_are_not_recorded_when_input_recording_is_off() {
    let server = TestServer::start();
    let (_env, session, mut driver, shell) = session_with_shell(&server, true).await;
    type_and_wait(
        &mut driver,
        &session,
        shell,
        "echo secret-$((6*7))\r",
        "secret-42",
    )
    .await;
    std::thread::sleep(Duration::from_millis(400));
    let (output, input) = recorded(&server, &session, shell).await;
    assert!(
        output.contains("secret-42"),
        "output is still recorded: {output}"
    );
    assert!(input.is_empty(), "no keystrokes kept: {input:?}");
    let view = server.show(&session).await;
    assert!(
        !view.records_input,
        "the session says input is not recorded"
    );
}

#[tokio::test]
async fn a_flooding_shell_stops_being_recorded_at_the_quota_and_the_log_says_so() {
    let server = TestServer::start_with_env(&[("REBENCH_RECORDING_QUOTA_MB", "1")]);
    let (_env, session, mut driver, shell) = session_with_shell(&server, false).await;
    // ~2.3 MB of output, more than the 1 MiB quota.
    type_and_wait(
        &mut driver,
        &session,
        shell,
        "seq 1 350000; echo SEQ-$((1+1))-DONE\n",
        "SEQ-2-DONE",
    )
    .await;
    // The shell goes on, live.
    type_and_wait(
        &mut driver,
        &session,
        shell,
        "echo after-$((2+2))\n",
        "after-4",
    )
    .await;
    let mut recorded_bytes = 0usize;
    let mut kinds = std::collections::BTreeMap::<String, usize>::new();
    let mut all = String::new();
    let mut from = 0;
    loop {
        let page: RecordingPage = server
            .admin()
            .await
            .call(Request::Recording {
                session: session.clone(),
                shell,
                from,
                limit: None,
            })
            .await
            .unwrap();
        for chunk in &page.chunks {
            *kinds.entry(chunk.kind.clone()).or_default() += 1;
            let data = b64_decode(&chunk.data).unwrap();
            if chunk.kind == "output" || chunk.kind == "input" {
                recorded_bytes += data.len();
            }
            all.push_str(&String::from_utf8_lossy(&data));
        }
        match page.next {
            Some(next) => from = next,
            None => break,
        }
    }
    assert!(
        recorded_bytes <= 1024 * 1024,
        "{recorded_bytes} bytes recorded"
    );
    assert!(
        recorded_bytes > 512 * 1024,
        "recorded up to the quota: {recorded_bytes} {kinds:?} {:?}",
        server.show(&session).await.notes
    );
    assert!(!all.contains("after-4"));
    let view = server.show(&session).await;
    assert!(
        view.notes
            .iter()
            .any(|n| n.by == "rebench" && n.text.contains("recording quota (1 MiB) is used up")),
        "{:?}",
        view.notes
    );
}

#[tokio::test]
async fn an_attach_serves_the_configured_scrollback_and_the_recording_keeps_all() {
    let server = TestServer::start_with_env(&[("REBENCH_SCROLLBACK_LINES", "50")]);
    let (_env, session, mut driver, shell) = session_with_shell(&server, false).await;
    type_and_wait(
        &mut driver,
        &session,
        shell,
        "for i in $(seq 1 300); do echo row-$i; done; echo END-$((1+1))\n",
        "END-2",
    )
    .await;
    let mut watcher = server.admin().await;
    let reply: rebench::protocol::AttachReply = watcher
        .call(Request::ShellAttach {
            session: session.clone(),
            shell,
            mode: rebench::protocol::AttachMode::Watch,
        })
        .await
        .unwrap();
    let mut screen = vt100::Parser::new(reply.rows, reply.cols, 10_000);
    screen.process(&b64_decode(&reply.screen).unwrap());
    screen.screen_mut().set_scrollback(usize::MAX);
    let history = screen.screen().scrollback();
    assert_eq!(history, 50, "the history an attach carries is the setting");
    assert_eq!(
        reply.scrollback_lines,
        Some(50),
        "the reply says how much the server keeps, for the client to keep as much"
    );
    let oldest = screen.screen().rows(0, reply.cols).next().unwrap();
    let last_row: u32 = oldest.trim().strip_prefix("row-").unwrap().parse().unwrap();
    assert!(
        last_row > 200,
        "the newest lines, not the first: {oldest:?}"
    );
    // The recording has every line.
    let (output, _) = recorded(&server, &session, shell).await;
    for i in [1, 2, 150, 300] {
        assert!(output.contains(&format!("row-{i}\r\n")), "row-{i} recorded");
    }
}
