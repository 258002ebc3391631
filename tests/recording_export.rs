//! Export against a real server: a human session driven through a shell
//! (score, note, pause) and an agent session driven through exec, exported
//! as jsonl and asciicast v2/v3 and read back.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

mod common;

use std::time::Duration;

use common::*;
use rebench::client::Client;
use rebench::protocol::{
    AttachMode, AttachReply, ExecReply, Push, Request, SessionView, ShellInfo, b64_decode,
    b64_encode,
};
use rebench::recording::keyframes::screen_at;
use rebench::recording::timeline::{MarkerKind, Timeline};
use rebench::recording::{ExportArgs, ExportFormat, export_to, read_bytes};
use rebench::session::{Kind, PauseReason};

async fn read_until(client: &mut Client, needle: &str, seen: &mut String) -> bool {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !seen.contains(needle) {
        match tokio::time::timeout_at(deadline, client.next_push()).await {
            Ok(Ok(Push::ShellOutput { data, .. })) => {
                seen.push_str(&String::from_utf8_lossy(&b64_decode(&data).unwrap()))
            }
            Ok(Ok(Push::ShellExited { .. })) => seen.push_str("\n[exited]"),
            Ok(Ok(_)) => {}
            Ok(Err(_)) | Err(_) => return false,
        }
    }
    true
}

async fn export(
    server: &TestServer,
    session: &str,
    format: ExportFormat,
    shell: Option<u32>,
) -> Vec<u8> {
    let mut admin = server.admin().await;
    let args = ExportArgs {
        session: session.to_string(),
        format,
        shell,
        output: None,
    };
    let mut out = Vec::new();
    export_to(&mut admin, &args, &mut out).await.unwrap();
    out
}

/// A human-style session: a shell that scores, a note, a pause, an exit.
async fn human_session(server: &TestServer) -> (SessionView, ShellInfo) {
    let (_env_dir, env) = fixture_env(|t| t);
    let created = server.create(&env, Some(3600), Kind::Human).await;
    let mut admin = server.admin().await;
    let view: SessionView = admin
        .call(Request::Begin {
            session: created.id.clone(),
        })
        .await
        .unwrap();
    let mut driver = server.participant(&view.id).await;
    let info: ShellInfo = driver
        .call(Request::ShellOpen {
            session: view.id.clone(),
            cols: 90,
            rows: 25,
        })
        .await
        .unwrap();
    let _: AttachReply = driver
        .call(Request::ShellAttach {
            session: view.id.clone(),
            shell: info.shell,
            mode: AttachMode::Driver,
        })
        .await
        .unwrap();
    let input = |text: &str| Request::ShellInput {
        session: view.id.clone(),
        shell: info.shell,
        data: b64_encode(text.as_bytes()),
    };
    std::fs::write(std::path::Path::new(&view.workspace).join("value"), "2.5").unwrap();
    let mut seen = String::new();
    driver
        .send(input("printf 'caf\\303\\251 %s\\n' ok; score\r"))
        .await
        .unwrap();
    assert!(
        read_until(&mut driver, "normalized", &mut seen).await,
        "{seen}"
    );
    let _: SessionView = admin
        .call(Request::Note {
            session: view.id.clone(),
            text: "looks stuck on the tokenizer".into(),
        })
        .await
        .unwrap();
    let _: SessionView = admin
        .call(Request::Pause {
            session: view.id.clone(),
            reason: PauseReason::Break,
            note: None,
        })
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let _: SessionView = admin
        .call(Request::Resume {
            session: view.id.clone(),
        })
        .await
        .unwrap();
    driver.send(input("echo done-here; exit\r")).await.unwrap();
    assert!(
        read_until(&mut driver, "[exited]", &mut seen).await,
        "{seen}"
    );
    // Let the recorder's batch reach the store.
    tokio::time::sleep(Duration::from_millis(400)).await;
    (view, info)
}

fn json_lines(bytes: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8(bytes.to_vec())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn last_screen(timeline: &Timeline) -> String {
    let track = &timeline.tracks[0];
    screen_at(track, track.end()).contents()
}

#[tokio::test]
async fn a_human_session_exports_as_jsonl_and_asciicast_and_reads_back() {
    let server = TestServer::start();
    let (view, info) = human_session(&server).await;

    // jsonl: the framing `rebench report --from` reads.
    let jsonl = export(&server, &view.id, ExportFormat::Jsonl, None).await;
    let records = json_lines(&jsonl);
    let first = &records[0];
    assert_eq!(first["record"], "session");
    assert_eq!(first["format"], "rebench-jsonl");
    assert_eq!(first["version"], 1);
    assert_eq!(first["session"]["id"], view.id.as_str());
    let scores = first["session"]["scores"].as_array().expect("scores");
    assert_eq!(scores.len(), 2, "starting and intermediate");
    let kinds: Vec<&str> = records
        .iter()
        .map(|r| r["record"].as_str().unwrap())
        .collect();
    let first_chunk = kinds.iter().position(|k| *k == "chunk").expect("chunks");
    assert!(kinds[1..first_chunk].iter().all(|k| *k == "event"));
    assert!(kinds[first_chunk..].iter().all(|k| *k == "chunk"));
    let event_types: Vec<&str> = records[1..first_chunk]
        .iter()
        .map(|r| r["event"]["type"].as_str().unwrap())
        .collect();
    for wanted in [
        "created",
        "started",
        "scored",
        "note",
        "paused",
        "resumed",
        "shell_opened",
    ] {
        assert!(event_types.contains(&wanted), "{wanted} in {event_types:?}");
    }
    let chunk = &records[first_chunk];
    let mut keys: Vec<&str> = chunk
        .as_object()
        .unwrap()
        .keys()
        .map(|k| k.as_str())
        .collect();
    keys.sort();
    assert_eq!(
        keys,
        ["active_ms", "at", "data", "kind", "record", "seq", "shell"]
    );
    assert_eq!(chunk["shell"], info.shell);
    assert!(
        chrono::DateTime::parse_from_rfc3339(chunk["at"].as_str().unwrap()).is_ok(),
        "{chunk}"
    );
    let chunk_kinds: Vec<&str> = records[first_chunk..]
        .iter()
        .map(|r| r["kind"].as_str().unwrap())
        .collect();
    for wanted in ["resize", "input", "output", "exit"] {
        assert!(chunk_kinds.contains(&wanted), "{wanted} in chunks");
    }

    // Read back: markers with values (an admin export), the clock, the screen.
    let from_jsonl = read_bytes(&jsonl, "s.jsonl").unwrap();
    assert!(from_jsonl.damage.is_none());
    let labels: Vec<&str> = from_jsonl
        .markers
        .iter()
        .map(|m| m.label.as_str())
        .collect();
    assert!(
        labels
            .iter()
            .any(|l| l.starts_with("score 0.59")
                && l.contains("(raw 2.5 ms, intermediate, by tess)")),
        "{labels:?}"
    );
    assert!(
        labels
            .iter()
            .any(|l| l.contains("looks stuck on the tokenizer"))
    );
    assert!(
        from_jsonl
            .markers
            .iter()
            .any(|m| m.kind == MarkerKind::Pause)
    );
    assert!(
        from_jsonl
            .markers
            .iter()
            .any(|m| m.kind == MarkerKind::Resume)
    );
    // The break lasted ~300 ms (the starting score's pause came before t = 0).
    assert!(
        from_jsonl.pauses.iter().any(|p| p.end >= p.start + 250),
        "{:?}",
        from_jsonl.pauses
    );
    assert_eq!(from_jsonl.base_budget_ms, Some(3_600_000));
    let end = from_jsonl.duration();
    assert!(from_jsonl.active_ms_at(end).unwrap() <= end);
    assert!(from_jsonl.remaining_ms_at(end).unwrap() > 3_500_000);
    let screen = last_screen(&from_jsonl);
    assert!(screen.contains("café ok"), "{screen}");
    assert!(screen.contains("done-here"), "{screen}");

    // asciicast v2 and v3 of the same shell show the same screens at the same times.
    for format in [ExportFormat::AsciicastV2, ExportFormat::AsciicastV3] {
        let cast = export(&server, &view.id, format, Some(info.shell)).await;
        let text = String::from_utf8(cast.clone()).expect("asciicast is UTF-8");
        assert!(text.contains("\"m\", \"score 0.59"), "{format:?}: {text}");
        assert!(text.contains("\"m\", \"paused (break)"), "{format:?}");
        let back = read_bytes(&cast, "s.cast").unwrap();
        let original = &from_jsonl.tracks[0];
        let zero = original.start();
        for e in &original.events {
            assert_eq!(
                screen_at(original, e.t).contents_formatted(),
                screen_at(&back.tracks[0], e.t - zero).contents_formatted(),
                "{format:?} at {} ms",
                e.t - zero
            );
        }
        assert_eq!(
            back.scores.len(),
            2,
            "{format:?}: scores read back from markers"
        );
    }

    // A shell without a recording is refused, naming the ones there are.
    let mut admin = server.admin().await;
    let args = ExportArgs {
        session: view.id.clone(),
        format: ExportFormat::AsciicastV2,
        shell: Some(7),
        output: None,
    };
    let err = export_to(&mut admin, &args, &mut Vec::new())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("shell 7") && err.contains(&info.shell.to_string()),
        "{err}"
    );
}

#[tokio::test]
async fn an_agent_session_exports_its_exec_calls_as_a_transcript() {
    let (_env_dir, env) = fixture_env(|t| t);
    let server = TestServer::start();
    let view = server.create_running(&env, Some(3600)).await;
    let mut agent = server.participant(&view.id).await;
    for command in ["echo agent-was-here", "ls /definitely-missing"] {
        let _: ExecReply = agent
            .call(Request::Exec {
                session: view.id.clone(),
                command: command.into(),
                timeout_s: Some(10.0),
                cwd: None,
            })
            .await
            .unwrap();
    }
    let cast = export(&server, &view.id, ExportFormat::AsciicastV2, None).await;
    let timeline = read_bytes(&cast, "agent.cast").unwrap();
    let screen = last_screen(&timeline);
    assert!(
        screen.contains("$ echo agent-was-here\nagent-was-here"),
        "{screen}"
    );
    assert!(screen.contains("$ ls /definitely-missing"), "{screen}");
    assert!(screen.contains("[exit 2]"), "{screen}");

    let jsonl = export(&server, &view.id, ExportFormat::Jsonl, None).await;
    let timeline = read_bytes(&jsonl, "agent.jsonl").unwrap();
    assert_eq!(timeline.tracks.len(), 1);
    assert_eq!(timeline.tracks[0].label, "agent (exec)");
}
