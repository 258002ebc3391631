//! An external scaffold (`api = "command"`): run like `rebench agent`, with
//! the session's socket, id and token in its environment, until it exits
//! or the session ends. A scaffold that exits with the session still
//! running is submitted for (exit code 0) or failed (any other).

use std::time::Duration;

use super::scaffold::RunError;
use super::spec::AgentSpec;
use crate::client::Client;
use crate::protocol::{Credentials, Request, SessionView};
use crate::session::Phase;

pub async fn run(
    admin: &mut Client,
    session: &str,
    command: &[String],
    agent: &AgentSpec,
) -> Result<(), RunError> {
    let creds: Credentials = admin
        .call(Request::Credentials {
            session: session.to_string(),
        })
        .await?;
    let (program, args) = command
        .split_first()
        .ok_or_else(|| RunError::Failed("the agent's command is empty".into()))?;
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .env("REBENCH_SOCKET", &creds.socket)
        .env("REBENCH_SESSION", &creds.session)
        .env("REBENCH_TOKEN", &creds.token)
        .env("REBENCH_AGENT", &agent.name)
        .env("REBENCH_MODEL", agent.model.clone().unwrap_or_default())
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    let runner = std::process::id() as libc::pid_t;
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        command.pre_exec(move || {
            // Its own group, killed whole when the run ends; and killed by
            // the kernel when the runner dies (kill -9 too): a scaffold left
            // behind would act on the session beside the one a new runner starts.
            libc::setpgid(0, 0);
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            if libc::getppid() != runner {
                libc::_exit(1);
            }
            Ok(())
        });
    }
    let mut child = command
        .spawn()
        .map_err(|e| RunError::Failed(format!("cannot run {program}: {e}")))?;
    let group = child.id().map(|pid| pid as libc::pid_t);
    let result = wait_for(admin, session, &mut child, program).await;
    if let Some(group) = group {
        // SAFETY: a signal to the scaffold's own process group.
        unsafe {
            libc::kill(-group, libc::SIGKILL);
        }
    }
    result
}

async fn wait_for(
    admin: &mut Client,
    session: &str,
    child: &mut tokio::process::Child,
    program: &str,
) -> Result<(), RunError> {
    let status = loop {
        tokio::select! {
            status = child.wait() => break status,
            _ = tokio::time::sleep(Duration::from_secs(1)) => {
                let view: SessionView = admin
                    .call(Request::Show { session: session.to_string() })
                    .await?;
                if view.state == Phase::Ended {
                    let _ = child.kill().await;
                    return Ok(());
                }
            }
        }
    }
    .map_err(|e| RunError::Failed(format!("waiting for {program}: {e}")))?;
    let view: SessionView = admin
        .call(Request::Show {
            session: session.to_string(),
        })
        .await?;
    if view.state == Phase::Ended {
        return Ok(());
    }
    if !status.success() {
        return Err(RunError::Failed(format!(
            "{program} exited ({status}) before the session ended"
        )));
    }
    admin
        .call::<SessionView>(Request::Submit {
            session: session.to_string(),
            answer: None,
        })
        .await?;
    Ok(())
}
