//! The proctor's dashboard: every session live on one screen (clocks,
//! scores, idle times, alerts), a detail view that mirrors a session's
//! shells read-only, and the proctor's actions (pause, resume, extend,
//! note, end, score), each recorded with a reason and the proctor's name.
//!
//! The pieces: `model` (what we know of each session, kept current by
//! pushed events), `alerts` and `rows` (pure functions of the model and the
//! time), `app` with `update`/`replies` (state, `Action`s in, `Effect`s
//! out), `ui` (drawing, pure), `access` (the admin socket) and
//! `event_loop` (its place in the shared `tui::runtime`). See docs/proctor.md.

pub mod access;
pub mod alerts;
pub mod app;
pub mod detail;
pub mod dialog;
mod event_loop;
pub mod model;
mod replies;
pub mod rows;
pub mod sample;
pub mod settings;
pub mod ui;
mod update;

use crate::tui::runtime;

#[derive(clap::Args, Debug, Clone)]
pub struct ProctorArgs {
    /// Alert when a running session has had no keystroke or exec for this long.
    #[arg(long, default_value = "10m")]
    pub idle_after: String,
    /// Alert when a session has been paused for this long.
    #[arg(long, default_value = "30m")]
    pub paused_after: String,
    /// The proctor's name, recorded with every action (default: $USER).
    #[arg(long)]
    pub name: Option<String>,
}

/// Opens the dashboard in this terminal; returns the exit code.
pub async fn run(args: ProctorArgs, paths: &crate::paths::DataPaths) -> anyhow::Result<i32> {
    // Everything that can fail is checked before the terminal is taken over.
    let limits = settings::Thresholds::parse(&args.idle_after, &args.paused_after)
        .map_err(anyhow::Error::msg)?;
    let name = proctor_name(args.name.as_deref());
    let me = recorded_name(&name);
    let client = access::connect_admin(paths, &me).await?;
    let theme = crate::tui::widgets::theme::Theme::from_env();
    let mut app = app::App::new(&me, limits, theme, chrono::Utc::now());
    app.tz = *chrono::Local::now().offset();
    let ending = {
        let (_guard, terminal) = crate::tui::terminal::TerminalGuard::enter(false)?;
        // Never starts a server: the operator stopped it, or it crashed.
        let reopen = async || access::reconnect_admin(paths, &me).await;
        runtime::run(terminal, app, client, reopen).await
    };
    // The terminal is restored here: now it is safe to print.
    match ending? {
        runtime::Ending::App(app::Exit::Quit) => Ok(0),
        // Lost servers are waited for inside (see `App::lost_server`).
        runtime::Ending::App(app::Exit::Lost(why)) => {
            eprintln!("rebench proctor: {why}");
            Ok(1)
        }
        runtime::Ending::App(app::Exit::ServerShutdown) => {
            eprintln!("rebench proctor: the server was shut down.");
            Ok(1)
        }
        runtime::Ending::Signal(name) => {
            eprintln!("rebench proctor: {name}; the dashboard closed (the sessions go on).");
            Ok(1)
        }
    }
}

/// What actions are recorded as (`by`): "ana (proctor)", or "proctor".
fn recorded_name(name: &str) -> String {
    match name {
        "proctor" => name.to_string(),
        _ => format!("{name} (proctor)"),
    }
}

/// `--name`, else the login name, else "proctor".
fn proctor_name(flag: Option<&str>) -> String {
    flag.map(str::trim)
        .filter(|n| !n.is_empty())
        .map(String::from)
        .or_else(|| std::env::var("USER").ok().filter(|u| !u.is_empty()))
        .unwrap_or_else(|| "proctor".into())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_name_flag_wins_and_blank_names_do_not_count() {
        assert_eq!(super::proctor_name(Some(" ana ")), "ana");
        assert!(!super::proctor_name(Some("  ")).is_empty());
        assert_eq!(super::recorded_name("ana"), "ana (proctor)");
        assert_eq!(super::recorded_name("proctor"), "proctor");
    }
}
