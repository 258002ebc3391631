//! The session shell's start: its own rc (the operator's `~/.bashrc` only
//! when the operator or the environment asks), a short prompt, and a pane
//! that says so when a shell's startup prints nothing.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

mod common;

use std::time::Duration;

use common::*;
use rebench::client::Client;
use rebench::protocol::{Push, Request, SessionView, b64_decode};
use rebench::session::Kind;

/// A home folder whose `.bashrc` runs `rc`, and optionally a rebench config.
fn operator_home(rc: &str, config: Option<&str>) -> tempfile::TempDir {
    // Not under /tmp, which a jail replaces with its own (the checkout, and
    // so the target folder, may be under /tmp too).
    let home = tempfile::tempdir_in("/var/tmp").unwrap();
    std::fs::write(home.path().join(".bashrc"), rc).unwrap();
    if let Some(config) = config {
        std::fs::create_dir_all(home.path().join(".config/rebench")).unwrap();
        std::fs::write(home.path().join(".config/rebench/config.toml"), config).unwrap();
    }
    home
}

fn server_with_home(home: &tempfile::TempDir) -> TestServer {
    let home = home.path().to_str().unwrap();
    TestServer::start_with_env(&[("HOME", home), ("XDG_CONFIG_HOME", "")])
}

/// A running session on `env` with one driven shell: the client, the
/// session id, the shell, and what its screen showed at attach.
async fn open_shell(server: &TestServer, env: &std::path::Path) -> (Client, String, u32, String) {
    let view = server.create(env, Some(3600), Kind::Human).await;
    let _: SessionView = server
        .admin()
        .await
        .call(Request::Begin {
            session: view.id.clone(),
        })
        .await
        .unwrap();
    let (driver, shell, screen) = server.drive_new_shell(&view.id, 120, 30).await;
    let screen = String::from_utf8_lossy(&screen).into_owned();
    (driver, view.id, shell, screen)
}

/// Everything the shell prints until `needle` shows (or `limit` passes).
async fn output_until(driver: &mut Client, start: String, needle: &str, limit: Duration) -> String {
    let mut seen = start;
    let _ = tokio::time::timeout(limit, async {
        while !seen.contains(needle) {
            if let Ok(Push::ShellOutput { data, .. }) = driver.next_push().await {
                seen.push_str(&String::from_utf8_lossy(&b64_decode(&data).unwrap()));
            }
        }
    })
    .await;
    seen
}

#[tokio::test]
async fn the_operators_bashrc_is_not_loaded_unless_asked_and_the_prompt_is_short() {
    let home = operator_home("echo OPERATOR-RC-LOADED\n", None);
    let server = server_with_home(&home);
    let (_d, env) = fixture_env(|t| t);
    let (mut driver, id, _, screen) = open_shell(&server, &env).await;
    let prompt = format!("[rebench {id}] workspace # ");
    let prompt_user = format!("[rebench {id}] workspace $ ");
    let seen = output_until(
        &mut driver,
        screen,
        &format!("[rebench {id}] workspace"),
        Duration::from_secs(15),
    )
    .await;
    assert!(
        seen.contains(&prompt) || seen.contains(&prompt_user),
        "{seen}"
    );
    assert!(!seen.contains("OPERATOR-RC-LOADED"), "{seen}");

    // The environment asks for it: loaded.
    let (_d, env) = fixture_env(|t| format!("{t}\n[sandbox]\noperator_bashrc = true\n"));
    let (mut driver, _, _, screen) = open_shell(&server, &env).await;
    let seen = output_until(
        &mut driver,
        screen,
        "OPERATOR-RC-LOADED",
        Duration::from_secs(15),
    )
    .await;
    assert!(seen.contains("OPERATOR-RC-LOADED"), "{seen}");
}

#[tokio::test]
async fn a_shell_whose_startup_prints_nothing_says_so_in_its_pane() {
    // The operator asks for their rc, and it hangs (a stale lock, say).
    let home = operator_home(
        "sleep 8\necho OPERATOR-RC-DONE\n",
        Some("operator_bashrc = true\n"),
    );
    let server = server_with_home(&home);
    let (_d, env) = fixture_env(|t| t);
    let (mut driver, id, _, screen) = open_shell(&server, &env).await;
    let seen = output_until(
        &mut driver,
        screen,
        "printed nothing",
        Duration::from_secs(15),
    )
    .await;
    assert!(
        seen.contains(rebench::server::shells::SILENT_START_NOTICE),
        "the pane says why it is blank: {seen}"
    );
    assert!(!seen.contains("OPERATOR-RC-DONE"), "{seen}");
    // The rc finishes after all: its output, then the prompt.
    let seen = output_until(
        &mut driver,
        seen,
        &format!("[rebench {id}]"),
        Duration::from_secs(15),
    )
    .await;
    assert!(seen.contains("OPERATOR-RC-DONE"), "{seen}");
    assert!(
        seen.contains(&format!("[rebench {id}] workspace")),
        "{seen}"
    );
}
