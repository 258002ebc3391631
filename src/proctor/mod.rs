//! The proctor's dashboard: every session live on one screen (clocks,
//! scores, idle times, alerts), a detail view that mirrors a session's
//! shells read-only, and the proctor's actions (pause, resume, extend,
//! note, end, score), each recorded with a reason and the proctor's name.
//!
//! The pieces: `model` (what we know of each session, kept current by
//! pushed events), `alerts` and `rows` (pure functions of the model and the
//! time), `app` with `update`/`replies` (state, `Action`s in, `Effect`s
//! out), `ui` (drawing, pure), `access`/`connection`/`runtime` (the admin
//! socket and the event loop). See docs/proctor.md.

pub mod alerts;
pub mod app;
pub mod detail;
pub mod dialog;
pub mod mirror;
pub mod model;
mod replies;
pub mod rows;
pub mod settings;
mod update;

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

pub async fn run(_args: ProctorArgs, _paths: &crate::paths::DataPaths) -> anyhow::Result<i32> {
    anyhow::bail!("rebench proctor is not built yet")
}
