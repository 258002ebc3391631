//! The proctor's dashboard (in progress).

#[derive(clap::Args, Debug, Clone)]
pub struct ProctorArgs {
    #[arg(long, default_value = "10m")]
    pub idle_after: String,
    #[arg(long, default_value = "30m")]
    pub paused_after: String,
    #[arg(long)]
    pub name: Option<String>,
}

pub async fn run(_args: ProctorArgs, _paths: &crate::paths::DataPaths) -> anyhow::Result<i32> {
    anyhow::bail!("rebench proctor is not built yet")
}
