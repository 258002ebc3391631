//! The protocol and its boundaries: tokens, malformed lines, the handshake,
//! shells over the socket, one server per data dir.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

mod common;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use common::*;
use rebench::client::Client;
use rebench::protocol::{
    AttachMode, AttachReply, ErrorCode, Push, Request, ServerLine, SessionView, ShellInfo,
    b64_decode, b64_encode,
};
use rebench::session::Phase;

/// Sends raw lines and reads one reply line each.
fn raw_exchange(stream: &mut UnixStream, line: &str) -> serde_json::Value {
    stream.write_all(line.as_bytes()).unwrap();
    stream.write_all(b"\n").unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut reply = String::new();
    reader.read_line(&mut reply).unwrap();
    serde_json::from_str(&reply).unwrap_or_else(|e| panic!("bad reply {reply:?}: {e}"))
}

#[tokio::test]
async fn malformed_lines_get_clear_errors_and_harm_no_one() {
    let server = TestServer::start();
    let mut stream = UnixStream::connect(server.paths.socket()).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let reply = raw_exchange(&mut stream, r#"{"id":1,"op":"list_sessions"}"#);
    assert_eq!(reply["type"], "error");
    assert_eq!(reply["code"], "not_authenticated", "{reply}");
    let reply = raw_exchange(&mut stream, "this is not json");
    assert_eq!(reply["code"], "bad_request");
    assert!(
        reply["message"]
            .as_str()
            .unwrap()
            .contains("malformed JSON"),
        "{reply}"
    );
    let reply = raw_exchange(
        &mut stream,
        r#"{"id":2,"op":"hello","version":1,"client":"raw"}"#,
    );
    assert_eq!(reply["type"], "response", "{reply}");
    assert_eq!(reply["result"]["role"], "admin");
    let reply = raw_exchange(&mut stream, r#"{"id":3,"op":"teleport"}"#);
    assert_eq!(reply["id"], 3);
    assert!(
        reply["message"].as_str().unwrap().contains("teleport"),
        "{reply}"
    );
    let reply = raw_exchange(
        &mut stream,
        r#"{"id":4,"op":"pause","session":"abc","reason":"nap"}"#,
    );
    assert!(
        reply["message"].as_str().unwrap().contains("nap"),
        "{reply}"
    );
    let reply = raw_exchange(&mut stream, r#"{"id":5,"op":"show","session":"../../etc"}"#);
    assert_eq!(reply["code"], "bad_request", "{reply}");
    // The same connection still works, and so do others.
    let reply = raw_exchange(&mut stream, r#"{"id":6,"op":"list_sessions"}"#);
    assert_eq!(reply["type"], "response", "{reply}");
    let mut other = server.admin().await;
    let list: Vec<SessionView> = other.call(Request::ListSessions).await.unwrap();
    assert!(list.is_empty());
}

#[tokio::test]
async fn a_wrong_protocol_version_is_refused_with_both_versions_named() {
    let server = TestServer::start();
    let mut stream = UnixStream::connect(server.paths.socket()).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let reply = raw_exchange(
        &mut stream,
        r#"{"id":1,"op":"hello","version":99,"client":"future"}"#,
    );
    assert_eq!(reply["code"], "version_mismatch");
    let msg = reply["message"].as_str().unwrap();
    assert!(msg.contains("99") && msg.contains('1'), "{msg}");
}

#[tokio::test]
async fn a_participant_token_reaches_only_its_own_session_and_participant_operations() {
    let (_env_dir, env) = fixture_env(|t| t);
    let server = TestServer::start();
    let mine = server.create_running(&env, Some(3600)).await;
    let theirs = server.create_running(&env, Some(3600)).await;
    let mut me = server.participant(&mine.id).await;
    assert_eq!(me.hello.role, "participant");
    // Own session: fine.
    let _: SessionView = me
        .call(Request::Show {
            session: mine.id.clone(),
        })
        .await
        .unwrap();
    let _: SessionView = me
        .call(Request::Note {
            session: mine.id.clone(),
            text: "hi".into(),
        })
        .await
        .unwrap();
    // Another session, admin operations, listing: refused.
    let refused = [
        Request::Show {
            session: theirs.id.clone(),
        },
        Request::Score {
            session: theirs.id.clone(),
        },
        Request::Pause {
            session: theirs.id.clone(),
            reason: rebench::session::PauseReason::Break,
            note: None,
        },
        Request::Extend {
            session: mine.id.clone(),
            by_s: 3600,
            reason: "more time".into(),
        },
        Request::End {
            session: theirs.id.clone(),
            reason: None,
            note: None,
        },
        Request::ListSessions,
        Request::Credentials {
            session: mine.id.clone(),
        },
        Request::Subscribe { session: None },
        Request::Shutdown,
    ];
    for request in refused {
        let err = me.request(request.clone()).await.unwrap_err();
        assert_eq!(err.code(), Some(ErrorCode::Forbidden), "{request:?}: {err}");
    }
    // A proctor's pause cannot be lifted by the participant.
    let _: SessionView = server
        .admin()
        .await
        .call(Request::Pause {
            session: mine.id.clone(),
            reason: rebench::session::PauseReason::Proctor,
            note: None,
        })
        .await
        .unwrap();
    let err = me
        .request(Request::Resume {
            session: mine.id.clone(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(ErrorCode::Forbidden), "{err}");
    // Nor may a participant pretend to be the proctor.
    let err = me
        .request(Request::Pause {
            session: mine.id.clone(),
            reason: rebench::session::PauseReason::Proctor,
            note: None,
        })
        .await
        .unwrap_err();
    assert!(
        matches!(
            err.code(),
            Some(ErrorCode::Forbidden) | Some(ErrorCode::InvalidState)
        ),
        "{err}"
    );
    // The other session is untouched; the participant socket wants a token.
    assert_eq!(server.show(&theirs.id).await.state, Phase::Running);
    let no_token = Client::connect(&server.paths.participant_socket(), None, "x").await;
    assert_eq!(
        no_token.err().unwrap().code(),
        Some(ErrorCode::NotAuthenticated)
    );
    let bad_token = Client::connect(&server.paths.participant_socket(), Some("0123"), "x").await;
    assert_eq!(
        bad_token.err().unwrap().code(),
        Some(ErrorCode::NotAuthenticated)
    );
}

#[tokio::test]
async fn a_hello_sent_with_the_first_request_answers_it_or_fails_it_with_its_own_error() {
    let (_env_dir, env) = fixture_env(|t| t);
    let server = TestServer::start();
    let session = server.create_running(&env, Some(3600)).await;
    let creds = server.credentials(&session.id).await;
    let socket = Path::new(&creds.socket);

    // The right token: the request is answered, and the hello's reply read on the way.
    let mut lazy = Client::connect_lazily(socket, Some(&creds.token), "lazy")
        .await
        .unwrap();
    let view: SessionView = lazy
        .call(Request::Show {
            session: session.id.clone(),
        })
        .await
        .unwrap();
    assert_eq!(view.id, session.id);
    assert_eq!(lazy.hello.role, "participant");
    assert_eq!(lazy.hello.session.as_deref(), Some(session.id.as_str()));

    // A wrong token: the request fails with the hello's refusal, not with
    // the "first request must be hello" that the server sends it.
    let mut refused = Client::connect_lazily(socket, Some("0123"), "lazy")
        .await
        .unwrap();
    let err = refused
        .request(Request::Show {
            session: session.id.clone(),
        })
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some(ErrorCode::NotAuthenticated), "{err}");
    assert!(!err.to_string().contains("first request"), "{err}");

    // The admin CLI's way: a request right behind the hello.
    let mut admin = Client::connect_admin_lazily(&server.paths, "lazy admin")
        .await
        .unwrap();
    let views: Vec<SessionView> = admin.call(Request::ListSessions).await.unwrap();
    assert!(views.iter().any(|v| v.id == session.id));
    assert_eq!(admin.hello.role, "admin");
}

#[tokio::test]
async fn a_session_shell_runs_the_in_shell_commands_and_is_recorded() {
    let (_env_dir, env) = fixture_env(|t| t);
    let server = TestServer::start();
    let session = server.create_running(&env, Some(3600)).await;
    let mut driver = server.participant(&session.id).await;
    let info: ShellInfo = driver
        .call(Request::ShellOpen {
            session: session.id.clone(),
            cols: 100,
            rows: 30,
        })
        .await
        .unwrap();
    let _: AttachReply = driver
        .call(Request::ShellAttach {
            session: session.id.clone(),
            shell: info.shell,
            mode: AttachMode::Driver,
        })
        .await
        .unwrap();
    let input = |text: &str| Request::ShellInput {
        session: session.id.clone(),
        shell: info.shell,
        data: b64_encode(text.as_bytes()),
    };
    std::fs::write(
        std::path::Path::new(&session.workspace).join("value"),
        "2.5",
    )
    .unwrap();
    driver
        .send(input("echo rb-$REBENCH_SESSION; pwd; score\r"))
        .await
        .unwrap();
    let mut screen = String::new();
    assert!(
        read_until(&mut driver, info.shell, "normalized", &mut screen).await,
        "no score in the shell: {screen}"
    );
    assert!(screen.contains(&format!("rb-{}", session.id)), "{screen}");
    assert!(
        screen.contains(&session.workspace),
        "the shell starts in the workspace: {screen}"
    );
    assert!(screen.contains("0.590"), "{screen}");
    // The score went into the log, requested by the participant.
    let view = server.show(&session.id).await;
    assert_eq!(view.scores.as_ref().unwrap().len(), 2);

    // A watcher gets the current screen at once, and cannot type.
    let mut watcher = server.admin().await;
    let snapshot: AttachReply = watcher
        .call(Request::ShellAttach {
            session: session.id.clone(),
            shell: info.shell,
            mode: AttachMode::Watch,
        })
        .await
        .unwrap();
    let shown = String::from_utf8_lossy(&b64_decode(&snapshot.screen).unwrap()).to_string();
    assert!(
        shown.contains("0.590"),
        "the snapshot shows the screen: {shown}"
    );
    let err = watcher.request(input("echo nope\r")).await.unwrap_err();
    assert_eq!(err.code(), Some(ErrorCode::Forbidden));

    // Exit; the recording holds both input and output.
    driver.send(input("exit\r")).await.unwrap();
    let exited = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            if let Ok(Push::ShellExited { .. }) = driver.next_push().await {
                return true;
            }
        }
    })
    .await;
    assert!(exited.unwrap_or(false), "shell exit is pushed");
    drop(driver);
    drop(watcher);
    std::thread::sleep(Duration::from_millis(400));
    let out = server.cli(&["events", &session.id]);
    let log = String::from_utf8_lossy(&out.stdout);
    assert!(
        log.contains("\"shell_opened\"") && log.contains("\"shell_exited\""),
        "{log}"
    );
}

#[test]
fn two_clients_starting_the_server_at_once_end_with_one_server() {
    let dir = tempfile::Builder::new()
        .prefix("rb")
        .tempdir_in("/tmp")
        .unwrap();
    let data = dir.path().join("data");
    let spawn = || {
        std::process::Command::new(BIN)
            .arg("--data-dir")
            .arg(&data)
            .args(["sessions", "--json"])
            .output()
    };
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(spawn);
        let b = s.spawn(spawn);
        (a.join().unwrap().unwrap(), b.join().unwrap().unwrap())
    });
    assert!(a.status.success(), "{}", String::from_utf8_lossy(&a.stderr));
    assert!(b.status.success(), "{}", String::from_utf8_lossy(&b.stderr));
    let servers = count_servers(&data);
    assert_eq!(servers, 1, "exactly one server for the data dir");
    // A second `serve` by hand is refused with a clear message.
    let second = std::process::Command::new(BIN)
        .arg("serve")
        .arg("--data-dir")
        .arg(&data)
        .output()
        .unwrap();
    assert_eq!(second.status.code(), Some(3));
    let msg = String::from_utf8_lossy(&second.stderr);
    assert!(
        msg.contains("another rebench server owns this data dir"),
        "{msg}"
    );
    let stop = std::process::Command::new(BIN)
        .arg("--data-dir")
        .arg(&data)
        .arg("shutdown")
        .output()
        .unwrap();
    assert!(
        stop.status.success(),
        "{}{}",
        String::from_utf8_lossy(&stop.stdout),
        String::from_utf8_lossy(&stop.stderr)
    );
    assert!(wait_until(Duration::from_secs(5), || count_servers(&data) == 0));
}

fn count_servers(data: &std::path::Path) -> usize {
    let needle = data.display().to_string();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| {
            c.split(|&b| b == 0)
                .map(|a| String::from_utf8_lossy(a).to_string())
                .collect::<Vec<_>>()
        })
        .filter(|args| args.iter().any(|a| a == "serve") && args.contains(&needle))
        .count()
}

#[test]
fn a_broken_manifest_is_reported_with_file_and_field() {
    // Every kind of problem at once: a bad value, a bad duration, a wrong
    // type, a missing key and an unknown key.
    let (_dir, env) = fixture_env(|t| {
        t.replace("transform = \"log\"", "transform = \"sqrt\"")
            .replace("timeout = \"2s\"", "timeout = \"soon\"")
            .replace("gpus = 0", "gpus = \"two\"")
            .replace("default = \"2h\"\n", "")
            + "\nsurprise = 1\n"
    });
    let out = std::process::Command::new(BIN)
        .args(["env", "validate"])
        .arg(&env)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    let file = env.join("environment.toml").display().to_string();
    let problems: Vec<&str> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix(&format!("{file}: ")))
        .collect();
    let fields: Vec<&str> = problems
        .iter()
        .map(|p| p.split(": ").next().unwrap())
        .collect();
    assert_eq!(
        fields,
        vec![
            "budget.default",
            "hardware.gpus",
            "scoring.surprise",
            "scoring.timeout",
            "scoring.transform"
        ],
        "{text}"
    );
    assert!(problems[2].contains("unknown key `surprise`"), "{text}");
    assert!(problems[1].ends_with("(line 13)"), "{text}");
}

#[tokio::test]
async fn subscribers_see_a_scoring_run_start_and_its_entry_redacted_for_participants() {
    let (_env_dir, env) = fixture_env(|t| t);
    let server = TestServer::start();
    let session = server.create_running(&env, Some(3600)).await;
    let mut me = server.participant(&session.id).await;
    me.request(Request::Subscribe {
        session: Some(session.id.clone()),
    })
    .await
    .unwrap();
    let mut admin = server.admin().await;
    let _: serde_json::Value = admin
        .call(Request::Score {
            session: session.id.clone(),
        })
        .await
        .unwrap();
    let mut saw_start = false;
    let scored = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match me.next_push().await.unwrap() {
                Push::ScoringStarted { phase, .. } => {
                    assert_eq!(phase, rebench::session::ScorePhase::Intermediate);
                    saw_start = true;
                }
                Push::SessionEvent { event, .. } => {
                    if let rebench::session::EventKind::Scored { entry } = event.kind {
                        return entry;
                    }
                }
                _ => {}
            }
        }
    })
    .await
    .expect("a scored event is pushed");
    assert!(saw_start, "scoring_started comes before the entry");
    assert!(scored.valid);
    assert_eq!(
        scored.details,
        serde_json::Value::Null,
        "details never reach a participant"
    );
    assert!(
        scored.output.is_empty(),
        "scorer output never reaches a participant"
    );
}

#[tokio::test]
async fn a_driver_too_slow_for_the_output_is_dropped_told_and_can_take_the_shell_back() {
    let (_env_dir, env) = fixture_env(|t| t);
    let server = TestServer::start();
    let session = server.create_running(&env, Some(3600)).await;
    let mut driver = server.participant(&session.id).await;
    let info: ShellInfo = driver
        .call(Request::ShellOpen {
            session: session.id.clone(),
            cols: 100,
            rows: 30,
        })
        .await
        .unwrap();
    let attach = Request::ShellAttach {
        session: session.id.clone(),
        shell: info.shell,
        mode: AttachMode::Driver,
    };
    let _: AttachReply = driver.call(attach.clone()).await.unwrap();
    let input = |text: &str| Request::ShellInput {
        session: session.id.clone(),
        shell: info.shell,
        data: b64_encode(text.as_bytes()),
    };
    // A flood far larger than the server queues for one client, while this
    // client reads nothing.
    driver
        .send(input(
            "head -c 40000000 /dev/zero | tr '\\0' x; touch flood-done\r",
        ))
        .await
        .unwrap();
    let done = std::path::Path::new(&session.workspace).join("flood-done");
    assert!(
        wait_until(Duration::from_secs(120), || done.exists()),
        "the flood did not finish: the server waited for the slow client?"
    );
    let told = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            if let Push::ShellDetached {
                fell_behind,
                reason,
                ..
            } = driver.next_push().await.unwrap()
            {
                return (fell_behind, reason);
            }
        }
    })
    .await
    .expect("the slow driver was never told it was dropped");
    assert!(told.0, "{told:?}");
    assert!(told.1.contains("fell behind"), "{told:?}");
    // Attaching again gives the current screen and the keyboard back.
    let _: AttachReply = driver.call(attach).await.unwrap();
    driver.send(input("echo back-$((6*7))\r")).await.unwrap();
    let mut screen = String::new();
    assert!(
        read_until(&mut driver, info.shell, "back-42", &mut screen).await,
        "typing after re-attaching: {}",
        &screen[screen.len().saturating_sub(300)..]
    );
}

#[tokio::test]
async fn shutdown_always_answers_before_the_server_goes() {
    let mut server = TestServer::start();
    for round in 0..5 {
        let mut stream = UnixStream::connect(server.paths.socket()).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let hello = raw_exchange(
            &mut stream,
            r#"{"id":1,"op":"hello","version":1,"client":"raw"}"#,
        );
        assert_eq!(hello["type"], "response", "{hello}");
        let reply = raw_exchange(&mut stream, r#"{"id":2,"op":"shutdown"}"#);
        assert_eq!(reply["result"]["stopping"], true, "round {round}: {reply}");
        if let Some(mut child) = server.child.take() {
            let _ = child.wait();
        }
        server.spawn();
    }
}

/// Interactive input is one-way (id 0): success sends nothing back, and a
/// refusal comes as a push naming the shell.
#[tokio::test]
async fn one_way_input_is_answered_only_when_refused() {
    let (_env_dir, env) = fixture_env(|t| t);
    let server = TestServer::start();
    let session = server.create_running(&env, Some(3600)).await;
    let (driver, shell, _) = server.drive_new_shell(&session.id, 80, 24).await;
    let mut watcher = server.admin().await;
    let _: AttachReply = watcher
        .call(Request::ShellAttach {
            session: session.id.clone(),
            shell,
            mode: AttachMode::Watch,
        })
        .await
        .unwrap();
    let input = |text: &str| Request::ShellInput {
        session: session.id.clone(),
        shell,
        data: b64_encode(text.as_bytes()),
    };
    let (mut reader, mut writer) = driver.into_parts();
    writer.post(input("echo one-way-$((6*7))\r")).await.unwrap();
    writer
        .post(Request::ShellResize {
            session: session.id.clone(),
            shell,
            cols: 100,
            rows: 30,
        })
        .await
        .unwrap();
    // Only output comes back: no response line for either request.
    let mut screen = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !screen.contains("one-way-42") {
        let line = tokio::time::timeout_at(deadline, reader.next_line())
            .await
            .expect("the echo in time")
            .unwrap();
        match line {
            ServerLine::Event {
                event: Push::ShellOutput { data, .. },
            } => screen.push_str(&String::from_utf8_lossy(&b64_decode(&data).unwrap())),
            ServerLine::Event { .. } => {}
            other => panic!("one-way input got an answer: {other:?}"),
        }
    }
    // A watcher's input is refused, and says which shell.
    let (mut w_reader, mut w_writer) = watcher.into_parts();
    w_writer.post(input("echo nope\r")).await.unwrap();
    let refused = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match w_reader.next_line().await.unwrap() {
                ServerLine::Event {
                    event: Push::InputRefused { shell, code, .. },
                } => break (shell, code),
                ServerLine::Event { .. } => {}
                other => panic!("a refusal of one-way input came as {other:?}"),
            }
        }
    })
    .await
    .expect("the refusal in time");
    assert_eq!(refused, (shell, ErrorCode::Forbidden));
    // The shell says when input last reached it (a workspace reopens that tab).
    let mut admin = server.admin().await;
    let shells: Vec<ShellInfo> = admin
        .call(Request::ShellList {
            session: session.id.clone(),
        })
        .await
        .unwrap();
    assert!(shells[0].last_input_at.is_some(), "{shells:?}");
}

/// More time by typing while paused: one-way input (id 0) is held to the
/// same rule as any input; it is refused out loud and nothing runs.
#[tokio::test]
async fn one_way_input_while_paused_is_refused_and_runs_nothing() {
    let (_env_dir, env) = fixture_env(|t| t);
    let server = TestServer::start();
    let session = server.create_running(&env, Some(3600)).await;
    let (driver, shell, _) = server.drive_new_shell(&session.id, 80, 24).await;
    let _: SessionView = server
        .admin()
        .await
        .call(Request::Pause {
            session: session.id.clone(),
            reason: rebench::session::PauseReason::Break,
            note: None,
        })
        .await
        .unwrap();
    let (mut reader, mut writer) = driver.into_parts();
    writer
        .post(Request::ShellInput {
            session: session.id.clone(),
            shell,
            data: b64_encode(b"touch typed-while-paused\r"),
        })
        .await
        .unwrap();
    let refused = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match reader.next_line().await.unwrap() {
                ServerLine::Event {
                    event: Push::InputRefused { code, .. },
                } => break code,
                ServerLine::Event { .. } => {}
                other => panic!("one-way input got {other:?}"),
            }
        }
    })
    .await
    .expect("a refusal");
    assert_eq!(refused, ErrorCode::InvalidState);
    let _: SessionView = server
        .admin()
        .await
        .call(Request::Resume {
            session: session.id.clone(),
        })
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !std::path::Path::new(&session.workspace)
            .join("typed-while-paused")
            .exists()
    );
}
