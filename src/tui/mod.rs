//! The expert workspace UI (in progress).

/// Opens the expert workspace on `session` in this terminal.
pub async fn run_workspace(_paths: &crate::paths::DataPaths, session: &str, _fresh: bool) -> anyhow::Result<i32> {
    anyhow::bail!("the workspace UI is not built yet; use `rebench attach {session} --raw`")
}
