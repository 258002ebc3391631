//! The expert's workspace: a full-screen terminal UI over the runner's
//! protocol. Shells as tabs, the session clock, scores, notes, pauses.
//!
//! The pieces: `app` (state, `Action`s in, `Effect`s out) with `update` and
//! `replies` changing it; `ui` drawing it (pure); `prefix` and `config` for
//! workspace commands; `connection` and `runtime` wiring it to the terminal
//! and the server. See docs/tui.md.

pub mod app;
pub use crate::settings as config;
mod connection;
mod event_loop;
pub mod layout;
pub mod prefix;
mod replies;
pub mod ui;
mod update;

use crate::tui::runtime;
use crate::tui::{terminal, widgets::theme};

/// Opens the expert workspace on `session` in this terminal. `fresh` = just
/// created: show the start screen ("press Enter to start the clock");
/// otherwise (attach) go straight to the shells. Returns the exit code.
///
/// The screen follows the session's state rather than `fresh` alone: a
/// session whose clock has not started always gets the start screen (its
/// shells would refuse input), and an ended one its summary.
pub async fn run(
    paths: &crate::paths::DataPaths,
    session: &str,
    fresh: bool,
) -> anyhow::Result<i32> {
    // Settings errors are reported before the terminal is taken over.
    let config = config::load_user_config()?;
    let client = connection::open(paths, session).await?;
    let theme = theme::Theme::from_env();
    let app = app::App::new(session, &config, theme, ratatui::layout::Rect::default());
    let _ = fresh;
    let ending = {
        let (_guard, terminal) = terminal::TerminalGuard::enter(config.mouse)?;
        let reopen = async || connection::reopen(paths, session).await;
        runtime::run(terminal, app, client, reopen).await
    };
    // The terminal is restored here (guard dropped): now it is safe to print.
    let again = crate::command_line::rebench_command(paths, &format!("attach {session}"));
    match ending? {
        runtime::Ending::App(app::Exit::Detached) => {
            println!("Detached from session {session}; it goes on and its clock keeps running.");
            println!("Come back with: {again}");
            Ok(0)
        }
        runtime::Ending::App(app::Exit::Quit) => {
            println!("Left session {session}. {again} opens it again.");
            Ok(0)
        }
        runtime::Ending::App(app::Exit::Failed(why)) => {
            eprintln!("rebench: cannot open session {session}: {why}");
            Ok(1)
        }
        runtime::Ending::App(app::Exit::ServerShutdown) => {
            eprintln!("rebench: the server was shut down.");
            eprintln!(
                "Session {session} is paused (server_shutdown): its clock stopped and its shells ended; \
                 the workspace is kept. When the server is back, {again} reopens it (resume with the prefix key, p)."
            );
            Ok(1)
        }
        runtime::Ending::App(app::Exit::Lost(why)) => {
            eprintln!("rebench: {why}");
            eprintln!("The session goes on on the server; {again} reconnects.");
            Ok(1)
        }
        runtime::Ending::Signal(name) => {
            eprintln!("rebench: {name}; the workspace closed. Session {session} goes on: {again}");
            Ok(1)
        }
    }
}
