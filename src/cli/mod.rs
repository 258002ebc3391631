//! The `rebench` command line: argument parsing and thin dispatch to the
//! client (server-side commands) or to local environment tools.

mod attach;
mod env_bench;
mod env_calibrate;
mod env_cmd;
mod print;
mod session_cmd;
mod task;

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::paths::DataPaths;

#[derive(Debug, Parser)]
#[command(
    name = "rebench",
    version,
    about = "Timed research-engineering sessions for humans and agents (RE-Bench style)"
)]
pub struct Cli {
    /// The data dir (database, workspaces, sockets). Default: $REBENCH_DATA_DIR, else ~/.local/share/rebench.
    #[arg(long, global = true, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Print machine-readable JSON (field names in the README).
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the runner server in the foreground (other commands start it in the background).
    /// `REBENCH_BACKEND=local|bwrap|docker` picks where sessions run unless they ask.
    Serve,
    /// Internal: start a session process (its cgroup, a scrubbed environment, its jail).
    #[command(hide = true)]
    SandboxEnter {
        /// Host pid of the jail's init (isolated sessions).
        #[arg(long)]
        target: Option<i32>,
        /// A cgroup folder to join (repeated: each of them).
        #[arg(long)]
        cgroup: Vec<std::path::PathBuf>,
        /// Run in this container (docker sessions): the engine's endpoint.
        #[arg(long, requires_all = ["container", "user"])]
        docker: Option<String>,
        #[arg(long)]
        container: Option<String>,
        #[arg(long)]
        user: Option<String>,
        #[arg(long)]
        cwd: std::path::PathBuf,
        /// KEY=VALUE to set after the environment is scrubbed.
        #[arg(long = "env")]
        env: Vec<std::ffi::OsString>,
        #[arg(last = true, required = true)]
        command: Vec<std::ffi::OsString>,
    },
    /// Stop the data dir's server and wait until it has (running sessions are paused first, so no budget is lost)
    Shutdown,
    /// Copy the data dir's store (sessions, logs, recordings) into DIR, a new
    /// data dir, while the server runs. Workspaces are not copied.
    Backup { dir: PathBuf },
    /// The machines sessions run on: every GPU (index, uuid, model, memory,
    /// the session holding it), CPU cores and memory free, sessions queued.
    Hosts,
    /// Environments: list, show, validate, prepare, add, calibrate, bench.
    #[command(subcommand)]
    Env(env_cmd::EnvCommand),
    /// Create a session (its starting solution is scored) and print its id.
    New(NewArgs),
    /// Create a session and open the workspace UI on it (Enter starts the clock).
    Start {
        #[command(flatten)]
        new: NewArgs,
        /// A bare terminal attach instead of the workspace UI.
        #[arg(long)]
        raw: bool,
    },
    /// Start a session's clock.
    Begin {
        /// The session's id (as `new` printed it; `rebench sessions` lists them).
        session: String,
    },
    /// Reopen the workspace UI on a session; --raw (or --shell/--watch) attaches a bare shell, detach with Ctrl-\.
    Attach {
        /// The session's id (as `new` printed it; `rebench sessions` lists them).
        session: String,
        /// A bare terminal attach instead of the workspace UI.
        #[arg(long)]
        raw: bool,
        /// Shell number (default: the first live shell, or a new one).
        #[arg(long)]
        shell: Option<u32>,
        /// Watch read-only instead of driving.
        #[arg(long)]
        watch: bool,
    },
    /// List sessions.
    Sessions {
        /// Keep printing the table as sessions change (server push).
        #[arg(long)]
        watch: bool,
    },
    /// Show one session with its score log.
    Show {
        /// The session's id (as `new` printed it; `rebench sessions` lists them).
        session: String,
    },
    /// The session's full event log (JSON lines).
    Events {
        /// The session's id (as `new` printed it; `rebench sessions` lists them).
        session: String,
    },
    /// Take a score now.
    Score {
        /// The session's id (as `new` printed it; `rebench sessions` lists them).
        session: String,
    },
    /// Pause the clock and freeze the session's processes.
    Pause {
        /// The session's id (as `new` printed it; `rebench sessions` lists them).
        session: String,
        /// break, proctor, technical_issue, api_outage
        #[arg(long)]
        reason: String,
        /// What happened, in words (recorded with the pause).
        #[arg(long)]
        note: Option<String>,
    },
    /// Resume the clock and thaw the session's processes.
    Resume {
        /// The session's id (as `new` printed it; `rebench sessions` lists them).
        session: String,
    },
    /// Extend the budget.
    Extend {
        /// The session's id (as `new` printed it; `rebench sessions` lists them).
        session: String,
        /// A duration such as 30m or 1h30m; negative (-15m) takes time off,
        /// never below the time already used.
        #[arg(long = "by", value_name = "DURATION", allow_hyphen_values = true)]
        by: String,
        /// Why (recorded with the change, shown to proctors).
        #[arg(long)]
        reason: String,
    },
    /// Add a note to the session log.
    Note {
        /// The session's id (as `new` printed it; `rebench sessions` lists them).
        session: String,
        /// The note's text (words are joined with spaces).
        text: Vec<String>,
    },
    /// Move a queued session in the hardware queue: higher goes first
    /// (sessions of equal priority keep their order of arrival).
    Priority {
        /// The session's id (as `new` printed it; `rebench sessions` lists them).
        session: String,
        #[arg(allow_negative_numbers = true)]
        priority: i32,
    },
    /// Submit: take the final score and end the session.
    Submit {
        /// The session's id (as `new` printed it; `rebench sessions` lists them).
        session: String,
        /// The answer, for a task scored from it (a Task Standard family's `score`).
        #[arg(long, conflicts_with = "answer_file")]
        answer: Option<String>,
        /// The answer, read from a file.
        #[arg(long = "answer-file", value_name = "FILE")]
        answer_file: Option<std::path::PathBuf>,
    },
    /// End the session without a final score.
    End {
        /// The session's id (as `new` printed it; `rebench sessions` lists them).
        session: String,
        /// ended_by_proctor (default) or abandoned
        #[arg(long)]
        reason: Option<String>,
        /// Why, in words: recorded, and shown on the participant's summary.
        #[arg(long)]
        note: Option<String>,
    },
    /// Run a command in the session (as an agent does); the exit code is propagated.
    Exec {
        /// The session's id (as `new` printed it; `rebench sessions` lists them).
        session: String,
        /// Timeout, e.g. 60s (default 10m).
        #[arg(long)]
        timeout: Option<String>,
        /// Working directory, relative to the workspace.
        #[arg(long)]
        cwd: Option<String>,
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Run an agent scaffold with the session's socket and token in its environment.
    Agent {
        /// The session's id (as `new` printed it; `rebench sessions` lists them).
        session: String,
        /// Also on a human session (whose participant would then share it).
        #[arg(long)]
        force: bool,
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Export a session's recording (asciicast v2/v3), its complete log (jsonl) or an Inspect eval log (inspect).
    Export(crate::recording::ExportArgs),
    /// Replay a session or a recording file (asciicast v2/v3, rebench jsonl, `script`).
    Replay(crate::tui::replay::ReplayArgs),
    /// Agent campaigns: many agent sessions from one campaign.toml.
    #[command(subcommand)]
    Campaign(crate::campaign::CampaignCommand),
    /// Bring runs made elsewhere into the store (Inspect eval logs).
    #[command(subcommand)]
    Import(crate::inspect::ImportCommand),
    /// The expert baseline and the agent comparison.
    Report(crate::report::ReportArgs),
    /// The proctor's live dashboard of every session.
    Proctor(crate::tui::proctor::ProctorArgs),
    /// Commands for inside a session (they use REBENCH_SOCKET, REBENCH_SESSION, REBENCH_TOKEN).
    #[command(subcommand)]
    Task(task::TaskCommand),
    /// The scorer of a Task Standard family's session (run by the server).
    #[command(hide = true)]
    TaskFamilyScore,
}

#[derive(Debug, Args)]
pub struct NewArgs {
    /// Environment id (searched in ./environments, $REBENCH_ENVIRONMENTS, the config file's
    /// `environments`, <data-dir>/environments, beside the binary, the checkout it was built from) or folder.
    pub env: String,
    /// Who works in it: the name the report and the proctor show.
    #[arg(long)]
    pub participant: String,
    /// human or agent
    #[arg(long, default_value = "human")]
    pub kind: String,
    /// Budget, e.g. 8h, 90m, 1h30m (default: the environment's).
    #[arg(long)]
    pub budget: Option<String>,
    /// Scoring profile, e.g. smoke or full.
    #[arg(long)]
    pub profile: Option<String>,
    /// Start even when the machine lacks the environment's hardware (recorded on the session).
    #[arg(long)]
    pub allow_missing_hardware: bool,
    /// Do not record keystrokes (terminal output is always recorded).
    #[arg(long)]
    pub no_input_recording: bool,
    /// The agent's name, for an agent session (the report compares agents by it).
    #[arg(long)]
    pub agent: Option<String>,
    /// The agent's model.
    #[arg(long, requires = "agent")]
    pub model: Option<String>,
    /// Where the session's processes run: local, bwrap or docker (default:
    /// $REBENCH_BACKEND, else the safest that works on the server's machine).
    #[arg(long)]
    pub sandbox: Option<String>,
    /// Its place in the hardware queue when its hardware is taken: higher
    /// goes first (default 0: first come, first served).
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub priority: i32,
}

/// Runs the CLI; returns the process exit code.
pub fn run(cli: Cli) -> i32 {
    let paths = DataPaths::resolve(cli.data_dir.as_deref());
    let json = cli.json;
    match cli.command {
        Command::Serve => serve(paths),
        // Before any runtime: joining namespaces needs a single thread.
        Command::TaskFamilyScore => report(crate::taskstd::score_cmd::run()),
        Command::SandboxEnter {
            target,
            cgroup,
            docker,
            container,
            user,
            cwd,
            env,
            command,
        } => report(crate::sandbox::enter::launch(
            &crate::sandbox::enter::Launch {
                target,
                cgroups: cgroup,
                docker: docker.map(|endpoint| crate::sandbox::enter::DockerTarget {
                    endpoint,
                    container: container.unwrap_or_default(),
                    user: user.unwrap_or_default(),
                }),
                cwd,
                env,
                argv: command,
            },
        )),
        Command::Env(cmd) => fail_as(json, 1, env_cmd::run(cmd, &paths, json)),
        Command::Task(cmd) => {
            let failure = if cmd.runs_a_command() {
                HARNESS_FAILED
            } else {
                1
            };
            fail_as(json, failure, block_on(task::run(cmd, json)))
        }
        Command::Export(args) => fail_as(json, 1, block_on(crate::recording::export(args, &paths))),
        Command::Replay(args) => fail_as(json, 1, block_on(crate::tui::replay::run(args, &paths))),
        Command::Report(args) => fail_as(json, 1, block_on(crate::report::run(args, &paths))),
        Command::Campaign(cmd) => {
            fail_as(json, 1, block_on(crate::campaign::run(cmd, &paths, json)))
        }
        Command::Import(cmd) => fail_as(json, 1, block_on(crate::inspect::run(cmd, &paths, json))),
        Command::Proctor(args) => {
            fail_as(json, 1, block_on(crate::tui::proctor::run(args, &paths)))
        }
        other => {
            let failure = if other.runs_a_command() {
                HARNESS_FAILED
            } else {
                1
            };
            fail_as(
                json,
                failure,
                block_on(session_cmd::run(other, &paths, json)),
            )
        }
    }
}

/// The exit code of `exec` and `agent` when rebench itself failed or
/// refused (a paused or ended session, no server): as `docker run` does, so
/// that it is never mistaken for the command's own exit code (124 stays the
/// timeout).
pub const HARNESS_FAILED: i32 = 125;

impl Command {
    /// Whether the command's exit code is another program's.
    fn runs_a_command(&self) -> bool {
        matches!(self, Command::Exec { .. } | Command::Agent { .. })
    }
}

/// `result`'s exit code; a failure is printed (as `{"error": {"code",
/// "message"}}` on stdout with `--json`) and exits with `failure`.
fn fail_as(json: bool, failure: i32, result: anyhow::Result<i32>) -> i32 {
    let Err(e) = result else {
        return report(result);
    };
    if !json {
        report(Err(e));
        return failure;
    }
    let not_found = e.chain().any(|cause| {
        matches!(
            cause.downcast_ref::<crate::environment::EnvError>(),
            Some(crate::environment::EnvError::NotFound { .. })
        )
    });
    let code = e
        .chain()
        .find_map(|cause| cause.downcast_ref::<crate::client::ClientError>())
        .map_or_else(
            || if not_found { "not_found" } else { "failed" }.into(),
            error_code,
        );
    let message = format!("{e:#}");
    println!(
        "{}",
        serde_json::json!({"error": {"code": code, "message": message}})
    );
    failure
}

/// The protocol's error code, or what kept the request from being answered.
fn error_code(e: &crate::client::ClientError) -> serde_json::Value {
    use crate::client::ClientError;
    match e {
        ClientError::Server { code, .. } => serde_json::to_value(code).unwrap_or_default(),
        ClientError::Io(_) => "connection_lost".into(),
        ClientError::Protocol(_) => "protocol".into(),
        ClientError::NoServer { .. } => "no_server".into(),
    }
}

fn block_on<F: std::future::Future<Output = anyhow::Result<i32>>>(
    future: F,
) -> anyhow::Result<i32> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(future)
}

fn report(result: anyhow::Result<i32>) -> i32 {
    match result {
        Ok(code) => code,
        // The reader went away (`rebench export … | head`): what it wanted
        // it got; nothing to say, as other tools do.
        Err(e) if closed_output(&e) => 0,
        Err(e) => {
            // Errors may quote a participant's text (a scorer's message).
            eprintln!("rebench: {}", print::printable(&format!("{e:#}")));
            1
        }
    }
}

/// Whether `e` is the output's reader having gone (a broken pipe).
fn closed_output(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

fn serve(paths: DataPaths) -> i32 {
    if let Err(e) = paths.create() {
        eprintln!(
            "rebench: cannot create the data dir {}: {e}",
            paths.root.display()
        );
        return 1;
    }
    init_server_log(&paths);
    limit_malloc_arenas();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("rebench: cannot start the runtime: {e}");
            return 1;
        }
    };
    match runtime.block_on(crate::server::serve(paths.clone())) {
        Ok(()) => 0,
        Err(e) => {
            tracing::error!("server stopped: {e:#}");
            eprintln!("rebench serve ({}): {e:#}", paths.root.display());
            if e.downcast_ref::<crate::server::LockError>().is_some() {
                3
            } else {
                1
            }
        }
    }
}

/// Shell output is handled on whichever runtime thread is free, and glibc
/// gives threads heaps of their own that keep what was freed: after 100 MB
/// of output the server held 72-86 MB, growing with each flood (memory
/// bench). One heap holds it at 44-53 MB, flat; a flood through the runner
/// took a few percent longer in the same comparison.
fn limit_malloc_arenas() {
    // SAFETY: mallopt only changes the allocator's settings; called before
    // the runtime's threads exist.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

/// The server logs to `<data-dir>/rebench.log`, never to a terminal.
fn init_server_log(paths: &DataPaths) {
    let Ok(file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(paths.log_file())
    else {
        return;
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("REBENCH_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(false)
        .with_writer(std::sync::Mutex::new(file))
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_that_went_away_is_not_an_error() {
        let gone = anyhow::Error::from(std::io::Error::from(std::io::ErrorKind::BrokenPipe))
            .context("writing the export");
        assert!(closed_output(&gone));
        assert_eq!(report(Err(gone)), 0);
        let other = anyhow::Error::from(std::io::Error::from(std::io::ErrorKind::PermissionDenied));
        assert!(!closed_output(&other));
    }
}
