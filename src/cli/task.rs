//! `rebench task …`: the participant's commands inside a session shell (and
//! an agent scaffold's). They use the session's own token, so they reach only
//! that session and only participant operations.

use anyhow::Context;
use clap::Subcommand;

use crate::client::Client;
use crate::protocol::{ExecReply, Request, ScoreView, SessionView};

use super::print;
use super::session_cmd::{join_command, optional_seconds, print_exec, print_score};

#[derive(Debug, Subcommand)]
pub enum TaskCommand {
    /// Score the current workspace now.
    Score,
    /// Clock, budget and best score.
    Status,
    /// The score log.
    Log,
    /// Add a time-stamped note.
    Note { text: Vec<String> },
    /// Pause the clock (freezes the session's processes, this shell included).
    Pause {
        /// break (default), technical_issue, api_outage
        reason: Option<String>,
    },
    /// Resume after your own pause.
    Resume,
    /// Submit: final score, end of the session. ANSWER: for a task scored
    /// from an answer (words are joined with spaces).
    Submit {
        answer: Vec<String>,
        /// The answer, read from a file.
        #[arg(
            long = "submission-file",
            value_name = "FILE",
            conflicts_with = "answer"
        )]
        submission_file: Option<std::path::PathBuf>,
    },
    /// Print the instructions.
    Instructions,
    /// Run a command in the session (agents).
    Exec {
        #[arg(long)]
        timeout: Option<String>,
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Report model usage (agents).
    Usage {
        #[arg(long)]
        tokens_in: u64,
        #[arg(long)]
        tokens_out: u64,
        #[arg(long, default_value_t = 0.0)]
        cost_usd: f64,
    },
}

impl TaskCommand {
    /// Whether the command's exit code is another program's.
    pub fn runs_a_command(&self) -> bool {
        matches!(self, TaskCommand::Exec { .. })
    }
}

struct SessionEnv {
    socket: String,
    session: String,
    token: String,
}

fn session_env() -> anyhow::Result<SessionEnv> {
    let var = |name: &str| {
        std::env::var(name)
            .ok()
            .filter(|v| !v.is_empty())
            .with_context(|| format!("{name} is not set: `rebench task` runs inside a session shell or `rebench agent`"))
    };
    Ok(SessionEnv {
        socket: var("REBENCH_SOCKET")?,
        session: var("REBENCH_SESSION")?,
        token: var("REBENCH_TOKEN")?,
    })
}

pub async fn run(command: TaskCommand, json: bool) -> anyhow::Result<i32> {
    let env = session_env()?;
    let mut client =
        Client::connect_lazily(std::path::Path::new(&env.socket), Some(&env.token), "task").await?;
    let session = env.session.clone();
    let view = |v: &SessionView| {
        if json {
            println!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
        } else {
            print!("{}", print::session(v));
        }
    };
    match command {
        TaskCommand::Score => {
            let unit = client
                .call::<SessionView>(Request::Show {
                    session: session.clone(),
                })
                .await?
                .unit;
            if !json {
                eprintln!("scoring… (the clock keeps running)");
            }
            let score: ScoreView = client.call(Request::Score { session }).await?;
            print_score(&score, &unit, json);
        }
        TaskCommand::Status => {
            let mut v: SessionView = client.call(Request::Show { session }).await?;
            v.scores = None;
            view(&v);
        }
        TaskCommand::Log => view(&client.call(Request::Show { session }).await?),
        TaskCommand::Note { text } => {
            let _: SessionView = client
                .call(Request::Note {
                    session,
                    text: text.join(" "),
                })
                .await?;
            if !json {
                println!("note saved");
            }
        }
        TaskCommand::Pause { reason } => {
            let reason = reason
                .as_deref()
                .unwrap_or("break")
                .parse()
                .map_err(anyhow::Error::msg)?;
            let v: SessionView = client
                .call(Request::Pause {
                    session: session.clone(),
                    reason,
                    note: None,
                })
                .await?;
            if json {
                view(&v);
            } else {
                println!(
                    "paused ({reason}) at {} active. Everything in this session is frozen, this shell too, until you resume:\n  from the workspace, or from another terminal: rebench resume {session}",
                    print::clock(v.active_s)
                );
            }
        }
        TaskCommand::Resume => view(&client.call(Request::Resume { session }).await?),
        TaskCommand::Submit {
            answer,
            submission_file,
        } => {
            let inline = (!answer.is_empty()).then(|| answer.join(" "));
            let answer = super::session_cmd::read_answer(inline, submission_file.as_deref())?;
            view(&client.call(Request::Submit { session, answer }).await?)
        }
        TaskCommand::Instructions => {
            let reply: crate::protocol::InstructionsReply =
                client.call(Request::Instructions { session }).await?;
            println!("{}", reply.instructions);
        }
        TaskCommand::Exec { timeout, command } => {
            let timeout_s = optional_seconds(timeout.as_deref(), "--timeout")?;
            let reply: ExecReply = client
                .call(Request::Exec {
                    session,
                    command: join_command(&command),
                    timeout_s,
                    cwd: None,
                })
                .await?;
            return Ok(print_exec(&reply, json));
        }
        TaskCommand::Usage {
            tokens_in,
            tokens_out,
            cost_usd,
        } => {
            client
                .request(Request::Usage {
                    session,
                    tokens_in,
                    tokens_out,
                    cost_usd,
                })
                .await?;
        }
    }
    Ok(0)
}
