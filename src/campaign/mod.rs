//! Agent campaigns: many agent sessions from one `campaign.toml` — the
//! file (`spec`), the runner that schedules and resumes runs (`runner`),
//! the built-in reference scaffold (`scaffold`) on its model API clients
//! (`model_api`), external scaffolds (`external`) and `campaign status`.
//! The server keeps the campaign and knows which session serves which run;
//! see docs/campaigns.md.

pub mod external;
pub mod model_api;
pub mod runner;
pub mod scaffold;
pub mod spec;
pub mod status;

use std::path::PathBuf;

use clap::Subcommand;

use crate::client::Client;
use crate::paths::DataPaths;
use crate::protocol::{CampaignView, Request};

#[derive(Debug, Subcommand)]
pub enum CampaignCommand {
    /// Run a campaign file: its sessions are made and driven, at most
    /// `concurrency` at once; run it again to continue after a stop or crash.
    Run { file: PathBuf },
    /// A campaign's runs: state, score, tokens, cost, with a progress bar.
    Status {
        name: String,
        /// Redraw every 2 seconds until every run is finished.
        #[arg(long)]
        watch: bool,
    },
    /// Every campaign in the data dir.
    List,
    /// Stop a campaign: no run starts after this; running ones end as abandoned.
    Stop { name: String },
}

pub async fn run(command: CampaignCommand, paths: &DataPaths, json: bool) -> anyhow::Result<i32> {
    match command {
        CampaignCommand::Run { file } => runner::run(&file, paths, json).await,
        CampaignCommand::Status { name, watch } => {
            let mut client = Client::connect_admin(paths, "rebench campaign status").await?;
            loop {
                let view: CampaignView = client
                    .call(Request::CampaignShow { name: name.clone() })
                    .await?;
                let finished = view.counts.queued + view.counts.running == 0;
                if json {
                    println!("{}", serde_json::to_string(&view)?);
                } else {
                    if watch {
                        // Home and clear: a table that redraws in place.
                        print!("\x1b[H\x1b[2J");
                    }
                    print!("{}", crate::command_line::printable(&status::table(&view)));
                }
                if !watch || finished {
                    return Ok(0);
                }
                tokio::time::sleep(std::time::Duration::from_secs(2)).await;
            }
        }
        CampaignCommand::List => {
            let mut client = Client::connect_admin(paths, "rebench campaign list").await?;
            let views: Vec<CampaignView> = client.call(Request::CampaignList).await?;
            if json {
                println!("{}", serde_json::to_string(&views)?);
            } else if views.is_empty() {
                println!("no campaigns");
            } else {
                for v in views {
                    println!(
                        "{:<24} {:>4} runs: {} done, {} failed, {} running, {} queued{}",
                        v.name,
                        v.runs.len(),
                        v.counts.done,
                        v.counts.failed,
                        v.counts.running,
                        v.counts.queued,
                        if v.stopped_at.is_some() {
                            " (stopped)"
                        } else {
                            ""
                        }
                    );
                }
            }
            Ok(0)
        }
        CampaignCommand::Stop { name } => {
            let mut client = Client::connect_admin(paths, "rebench campaign stop").await?;
            let view: CampaignView = client.call(Request::CampaignStop { name }).await?;
            if json {
                println!("{}", serde_json::to_string(&view)?);
            } else {
                println!(
                    "campaign {} stopped: {} done, {} failed, {} never started",
                    view.name, view.counts.done, view.counts.failed, view.counts.queued
                );
            }
            Ok(0)
        }
    }
}
