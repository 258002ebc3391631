//! Inspect interop: `rebench import inspect` turns the samples of Inspect
//! eval logs into agent runs in the store; `rebench export --format inspect`
//! writes a session as an Inspect eval log. See docs/inspect.md.

pub mod convert;
pub mod export;
pub mod import;
pub mod log;
pub mod terminal;

/// `rebench import …`
#[derive(clap::Subcommand, Debug)]
pub enum ImportCommand {
    /// Inspect eval logs (.eval, .json): each sample and epoch becomes an
    /// ended, read-only agent session (`--json`: `{"ids": [...]}`).
    Inspect(import::ImportInspectArgs),
}

pub async fn run(
    cmd: ImportCommand,
    paths: &crate::paths::DataPaths,
    json: bool,
) -> anyhow::Result<i32> {
    match cmd {
        ImportCommand::Inspect(args) => import::run(args, paths, json).await,
    }
}
