//! Commands that talk to the server on the admin socket.

use anyhow::{Context, bail};

use crate::client::Client;
use crate::environment::discovery;
use crate::environment::duration::parse_duration;
use crate::paths::DataPaths;
use crate::protocol::{CreateSession, Credentials, ExecReply, Request, ScoreView, SessionView};
use crate::session::Kind;

use super::print;
use super::{Command, NewArgs};

fn admin_name() -> String {
    let user = std::env::var("USER").unwrap_or_else(|_| "admin".into());
    format!("{user} (cli)")
}

pub async fn run(command: Command, paths: &DataPaths, json: bool) -> anyhow::Result<i32> {
    if let Command::Shutdown = command {
        return shutdown(paths, json).await;
    }
    // One-shot commands: the hello rides with the request.
    let mut client = Client::connect_admin_lazily(paths, &admin_name()).await?;
    let show = |v: &SessionView| {
        if json {
            println!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
        } else {
            print!("{}", print::session(v));
        }
    };
    match command {
        Command::Shutdown => bail!("shutdown is handled before connecting"),
        Command::Backup { dir } => {
            let dir = std::path::absolute(&dir).context("the backup folder")?;
            let reply: crate::protocol::BackupReply = client
                .call(Request::Backup {
                    dir: dir.display().to_string(),
                })
                .await?;
            if json {
                println!("{}", serde_json::to_string(&reply)?);
            } else {
                println!(
                    "backed up {} sessions to {} (serve it with `rebench --data-dir {} serve`)",
                    reply.sessions,
                    dir.display(),
                    dir.display()
                );
            }
        }
        Command::Hosts => {
            let hosts: Vec<crate::protocol::HostView> = client.call(Request::Hosts).await?;
            if json {
                println!("{}", serde_json::to_string(&hosts)?);
            } else {
                print!("{}", super::print::hosts_text(&hosts));
            }
        }
        Command::New(args) => {
            let view = create(&mut client, args, paths).await?;
            if json {
                let mut out = serde_json::json!({"id": view.id, "state": view.state});
                if view.state == crate::session::Phase::Queued {
                    out["queue_position"] = serde_json::json!(view.queue_position);
                    out["waiting_for"] = serde_json::json!(view.waiting_for);
                }
                println!("{out}");
            } else {
                println!("{}", view.id);
                if let Some(line) = super::print::queue_line(&view) {
                    // stdout stays the id alone (scripts read it).
                    eprintln!("{line}");
                }
            }
        }
        Command::Start { new, raw } => {
            let view = create(&mut client, new, paths).await?;
            if raw {
                return super::attach::start_and_attach(client, paths, view).await;
            }
            drop(client);
            return crate::tui::workspace::run(paths, &view.id, true).await;
        }
        Command::Begin { session } => show(&client.call(Request::Begin { session }).await?),
        Command::Attach {
            session,
            raw,
            shell,
            watch,
        } => {
            if raw || watch || shell.is_some() {
                return super::attach::attach(client, paths, &session, shell, watch).await;
            }
            drop(client);
            return crate::tui::workspace::run(paths, &session, false).await;
        }
        Command::Sessions { watch: false } => {
            let views: Vec<SessionView> = client.call(Request::ListSessions).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&views)?);
            } else {
                print!("{}", print::sessions_table(&views));
            }
        }
        Command::Sessions { watch: true } => return watch_sessions(client, json).await,
        Command::Show { session } => show(&client.call(Request::Show { session }).await?),
        Command::Events { session } => {
            let events: Vec<serde_json::Value> = client.call(Request::Events { session }).await?;
            for e in events {
                println!("{}", serde_json::to_string(&e)?);
            }
        }
        Command::Score { session } => {
            let view: SessionView = client
                .call(Request::Show {
                    session: session.clone(),
                })
                .await?;
            let score: ScoreView = client.call(Request::Score { session }).await?;
            print_score(&score, &view.unit, json);
        }
        Command::Pause {
            session,
            reason,
            note,
        } => {
            let reason = reason.parse().map_err(anyhow::Error::msg)?;
            show(
                &client
                    .call(Request::Pause {
                        session,
                        reason,
                        note,
                    })
                    .await?,
            );
        }
        Command::Resume { session } => show(&client.call(Request::Resume { session }).await?),
        Command::Extend {
            session,
            by,
            reason,
        } => {
            let (sign, magnitude) = match by.trim().strip_prefix('-') {
                Some(rest) => (-1, rest),
                None => (1, by.trim().strip_prefix('+').unwrap_or(by.trim())),
            };
            let by_s = sign
                * i64::try_from(
                    parse_duration(magnitude)
                        .map_err(anyhow::Error::msg)
                        .context("--by")?
                        .as_secs(),
                )
                .context("--by")?;
            show(
                &client
                    .call(Request::Extend {
                        session,
                        by_s,
                        reason,
                    })
                    .await?,
            );
        }
        Command::Priority { session, priority } => {
            let view: crate::protocol::SessionView = client
                .call(Request::Prioritize { session, priority })
                .await?;
            if json {
                println!("{}", serde_json::to_string(&view)?);
            } else if let Some(line) = super::print::queue_line(&view) {
                println!("{}: {line}", view.id);
            }
        }
        Command::Note { session, text } => {
            show(
                &client
                    .call(Request::Note {
                        session,
                        text: text.join(" "),
                    })
                    .await?,
            );
        }
        Command::Submit {
            session,
            answer,
            answer_file,
        } => {
            let answer = read_answer(answer, answer_file.as_deref())?;
            show(&client.call(Request::Submit { session, answer }).await?)
        }
        Command::End {
            session,
            reason,
            note,
        } => show(
            &client
                .call(Request::End {
                    session,
                    reason,
                    note,
                })
                .await?,
        ),
        Command::Exec {
            session,
            timeout,
            cwd,
            command,
        } => {
            let timeout_s = optional_seconds(timeout.as_deref(), "--timeout")?;
            let reply: ExecReply = client
                .call(Request::Exec {
                    session,
                    command: join_command(&command),
                    timeout_s,
                    cwd,
                })
                .await?;
            return Ok(print_exec(&reply, json));
        }
        Command::Agent {
            session,
            force,
            command,
        } => {
            let view: SessionView = client
                .call(Request::Show {
                    session: session.clone(),
                })
                .await?;
            if view.kind != Kind::Agent && !force {
                bail!(
                    "session {session} is a {} session: an agent would share it with its participant \
                     (create one with `rebench new ENV --participant NAME --kind agent`, or add --force)",
                    view.kind
                );
            }
            ready_for_an_agent(&mut client, &session).await?;
            let creds: Credentials = client.call(Request::Credentials { session }).await?;
            drop(client);
            let (program, args) = command.split_first().context("agent needs a command")?;
            let status = tokio::process::Command::new(program)
                .args(args)
                .env("REBENCH_SOCKET", &creds.socket)
                .env("REBENCH_SESSION", &creds.session)
                .env("REBENCH_TOKEN", &creds.token)
                .status()
                .await
                .with_context(|| format!("cannot run {program}"))?;
            return Ok(exit_code(
                status.code(),
                std::os::unix::process::ExitStatusExt::signal(&status),
                false,
            ));
        }
        Command::Serve
        | Command::SandboxEnter { .. }
        | Command::TaskFamilyScore
        | Command::Env(_)
        | Command::Task(_)
        | Command::Export(_)
        | Command::Replay(_)
        | Command::Report(_)
        | Command::Campaign(_)
        | Command::Import(_)
        | Command::Proctor(_) => bail!("not a server command"),
    }
    Ok(0)
}

/// The session an agent is about to work in, running: its clock is started
/// when it has not been (after its hardware is granted and its starting
/// score taken: waited for, and said so); refused when it has ended.
async fn ready_for_an_agent(client: &mut Client, session: &str) -> anyhow::Result<()> {
    let mut said_queued = false;
    loop {
        let view: SessionView = client
            .call(Request::Show {
                session: session.to_string(),
            })
            .await?;
        let scoring_start = view.state == crate::session::Phase::Created
            && view.pauses.last().is_some_and(|p| p.end.is_none());
        match view.state {
            crate::session::Phase::Ended => {
                bail!("session {session} has ended: an agent cannot work in it")
            }
            crate::session::Phase::Queued => {
                if !said_queued && let Some(line) = super::print::queue_line(&view) {
                    eprintln!("{session}: {line}");
                    said_queued = true;
                }
            }
            crate::session::Phase::Created if !scoring_start => {
                client
                    .call::<SessionView>(Request::Begin {
                        session: session.to_string(),
                    })
                    .await?;
                eprintln!("started the clock of session {session}");
                return Ok(());
            }
            crate::session::Phase::Created => {}
            crate::session::Phase::Running | crate::session::Phase::Paused => return Ok(()),
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
}

/// How long `rebench shutdown` waits for the server to let go of the data dir.
const SHUTDOWN_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// Asks the data dir's server to stop and returns once it has: it pauses
/// running sessions and syncs before it lets go of the data dir, so the
/// next `rebench serve` (or a backup of the folder) finds it free. Starts
/// no server where none runs.
async fn shutdown(paths: &DataPaths, json: bool) -> anyhow::Result<i32> {
    let lock = paths.lock_file();
    let mut client = match Client::connect_lazily(&paths.socket(), None, &admin_name()).await {
        Ok(client) => client,
        Err(crate::client::ClientError::NoServer { .. }) if !crate::server::lock_held(&lock) => {
            if !json {
                println!("no server runs for {}", paths.root.display());
            }
            return Ok(0);
        }
        Err(e) => return Err(e.into()),
    };
    match client.request(Request::Shutdown).await {
        Ok(_) => {}
        // The server may exit before its reply is written: what was
        // asked for happened.
        Err(crate::client::ClientError::Io(_)) => {}
        Err(e) => return Err(e.into()),
    }
    drop(client);
    let deadline = tokio::time::Instant::now() + SHUTDOWN_WAIT;
    while crate::server::lock_held(&lock) {
        if tokio::time::Instant::now() >= deadline {
            bail!(
                "the server for {} was asked to stop but still runs after {} s (its log: {})",
                paths.root.display(),
                SHUTDOWN_WAIT.as_secs(),
                paths.log_file().display()
            );
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    if !json {
        println!("server for {} stopped", paths.root.display());
    }
    Ok(0)
}

/// Reprints the table whenever a session event arrives (and every few seconds
/// on a terminal, so clocks move). JSON mode prints one array per line.
async fn watch_sessions(mut client: Client, json: bool) -> anyhow::Result<i32> {
    use std::io::IsTerminal;
    let tty = std::io::stdout().is_terminal();
    client.request(Request::Subscribe { session: None }).await?;
    loop {
        let views: Vec<SessionView> = client.call(Request::ListSessions).await?;
        if json {
            println!("{}", serde_json::to_string(&views)?);
        } else {
            if tty {
                print!("\x1b[H\x1b[2J");
            }
            print!("{}", print::sessions_table(&views));
            if !tty {
                println!();
            }
        }
        let refresh = std::time::Duration::from_secs(if tty { 5 } else { 3600 });
        match tokio::time::timeout(refresh, client.next_push()).await {
            Ok(Ok(_)) | Err(_) => {}
            Ok(Err(e)) => return Err(e.into()),
        }
        // Take the rest of a burst (a score, a pause) as one update.
        while let Ok(Ok(_)) =
            tokio::time::timeout(std::time::Duration::from_millis(100), client.next_push()).await
        {
        }
    }
}

async fn create(
    client: &mut Client,
    args: NewArgs,
    paths: &DataPaths,
) -> anyhow::Result<SessionView> {
    let env = discovery::resolve(&args.env, &discovery::search_path(&paths.root))?;
    let budget_s = optional_seconds(args.budget.as_deref(), "--budget")?.map(|s| s as u64);
    let kind = args
        .kind
        .parse()
        .map_err(anyhow::Error::msg)
        .context("--kind")?;
    let (env_dir, task) = match &env.family {
        Some(family) => (family.entry.clone(), Some(family.task.clone())),
        None => (env.dir.clone(), None),
    };
    let env_dir = std::path::absolute(&env_dir).unwrap_or(env_dir);
    let request = CreateSession {
        env_dir: env_dir.display().to_string(),
        task,
        participant: args.participant,
        kind,
        budget_s,
        profile: args.profile,
        allow_missing_hardware: args.allow_missing_hardware,
        no_input_recording: args.no_input_recording,
        sandbox: args.sandbox,
        agent: args.agent.map(|name| crate::session::AgentIdentity {
            name,
            model: args.model.unwrap_or_default(),
            scaffold: "external".into(),
        }),
        campaign: None,
        limits: Default::default(),
        priority: args.priority,
    };
    Ok(client
        .call(Request::CreateSession(Box::new(request)))
        .await?)
}

/// A duration flag (`90m`, `1h30m`) as seconds, with the flag named in errors.
pub fn optional_seconds(text: Option<&str>, flag: &str) -> anyhow::Result<Option<f64>> {
    text.map(|t| {
        parse_duration(t)
            .map(|d| d.as_secs_f64())
            .map_err(anyhow::Error::msg)
            .context(flag.to_string())
    })
    .transpose()
}

pub fn print_score(score: &ScoreView, unit: &str, json: bool) {
    if json {
        let value = serde_json::json!({
            "seq": score.seq,
            "raw": score.raw,
            "normalized": score.normalized,
            "valid": score.valid,
            "message": score.message,
            "hidden": score.hidden,
        });
        println!("{value}");
    } else {
        println!("{}", print::score_line(score, unit));
    }
}

pub fn print_exec(reply: &ExecReply, json: bool) -> i32 {
    if json {
        println!("{}", serde_json::to_string(reply).unwrap_or_default());
    } else {
        print!("{}", reply.stdout);
        eprint!("{}", reply.stderr);
        if reply.stdout_truncated || reply.stderr_truncated {
            eprintln!("[rebench: output truncated]");
        }
        if reply.timed_out {
            eprintln!(
                "[rebench: timed out after {:.1}s; the command's process group was killed]",
                reply.duration_ms as f64 / 1000.0
            );
        }
    }
    exit_code(reply.exit_code, reply.signal, reply.timed_out)
}

/// The shell convention: the exit code, 128+signal, 124 for a timeout.
fn exit_code(code: Option<i32>, signal: Option<i32>, timed_out: bool) -> i32 {
    if timed_out {
        return 124;
    }
    code.or(signal.map(|s| 128 + s)).unwrap_or(1)
}

/// One argument is taken as a shell command line; several are quoted and joined.
pub fn join_command(args: &[String]) -> String {
    if args.len() == 1 {
        return args[0].clone();
    }
    args.iter()
        .map(|a| crate::command_line::shell_quote(a))
        .collect::<Vec<_>>()
        .join(" ")
}

/// An answer given inline or in a file (`--answer`, `--answer-file`/`--submission-file`).
pub fn read_answer(
    inline: Option<String>,
    file: Option<&std::path::Path>,
) -> anyhow::Result<Option<String>> {
    match file {
        Some(path) => std::fs::read_to_string(path)
            .map(Some)
            .with_context(|| format!("reading the answer from {}", path.display())),
        None => Ok(inline),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_quoted_for_the_shell() {
        assert_eq!(join_command(&["ls -l | wc".into()]), "ls -l | wc");
        assert_eq!(
            join_command(&["echo".into(), "a b".into(), "it's".into()]),
            r"echo 'a b' 'it'\''s'"
        );
        assert_eq!(exit_code(Some(3), None, false), 3);
        assert_eq!(exit_code(None, Some(9), false), 137);
        assert_eq!(exit_code(Some(0), None, true), 124);
    }
}
