//! Running one preparation step (venv creation, pip, the environment's
//! command): output streamed line by line to the progress log, a time limit
//! that kills the whole process group, and the last lines kept for the error.

use super::PrepareError;
use crate::environment::duration::format_duration;
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Lines of output quoted in a failure message.
const TAIL_LINES: usize = 30;
/// After the step exits, how long to wait for a descendant still holding its pipes.
const DRAIN_GRACE: Duration = Duration::from_secs(1);
const POLL: Duration = Duration::from_millis(100);

/// One process to run for a step.
pub struct Step<'a> {
    /// Shown in progress lines and errors, e.g. "pip install".
    pub name: &'a str,
    pub argv: &'a [String],
    pub cwd: &'a Path,
    /// Added to the inherited environment.
    pub env: &'a [(String, String)],
    pub timeout: Duration,
}

/// Runs `step` to completion, copying its output to `log` as `  | line`.
pub fn run(step: &Step, log: &mut dyn Write) -> Result<(), PrepareError> {
    let Some(program) = step.argv.first() else {
        return Err(failed(step, "empty command".to_string(), Vec::new()));
    };
    let mut child = Command::new(program)
        .args(&step.argv[1..])
        .current_dir(step.cwd)
        .envs(step.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Own group, so a timeout also kills what the step started (pip's builds).
        .process_group(0)
        .spawn()
        .map_err(|source| PrepareError::Spawn {
            step: step.name.to_string(),
            program: program.clone(),
            source,
        })?;

    let (sender, lines) = mpsc::channel::<String>();
    for pipe in [
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    ]
    .into_iter()
    .flatten()
    {
        let sender = sender.clone();
        std::thread::spawn(move || forward_lines(pipe, &sender));
    }
    drop(sender); // `lines` disconnects once both readers are done.

    let deadline = Instant::now() + step.timeout;
    let mut tail = VecDeque::new();
    let mut exited: Option<(ExitStatus, Instant)> = None;
    loop {
        // No `continue` on a line: a chatty step must still meet its deadline.
        match lines.recv_timeout(POLL) {
            Ok(line) => {
                let _ = writeln!(log, "  | {line}");
                if tail.len() == TAIL_LINES {
                    tail.pop_front();
                }
                tail.push_back(line);
            }
            Err(mpsc::RecvTimeoutError::Disconnected) if exited.is_some() => break,
            // Both pipes closed but the process lives on: poll without spinning.
            Err(mpsc::RecvTimeoutError::Disconnected) => std::thread::sleep(POLL),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        if exited.is_none() {
            match child.try_wait() {
                Ok(Some(status)) => exited = Some((status, Instant::now())),
                Ok(None) => {}
                Err(e) => return Err(failed(step, format!("could not wait: {e}"), tail.into())),
            }
        }
        match exited {
            Some((_, at)) if at.elapsed() > DRAIN_GRACE => break,
            None if Instant::now() >= deadline => {
                kill_group(&mut child);
                return Err(PrepareError::TimedOut {
                    step: step.name.to_string(),
                    timeout: format_duration(step.timeout),
                    tail: tail.into_iter().collect::<Vec<_>>().join("\n"),
                });
            }
            _ => {}
        }
    }
    let _ = log.flush();
    match exited {
        Some((status, _)) if status.success() => Ok(()),
        Some((status, _)) => Err(failed(step, describe(status), tail.into())),
        None => Err(failed(step, "ended without a status".into(), tail.into())),
    }
}

fn forward_lines(pipe: Box<dyn Read + Send>, sender: &mpsc::Sender<String>) {
    let mut reader = BufReader::new(pipe);
    let mut buf = Vec::new();
    // Lossy per line: pip and compilers may print anything.
    while reader.read_until(b'\n', &mut buf).is_ok_and(|n| n > 0) {
        let line = String::from_utf8_lossy(&buf).trim_end().to_string();
        if sender.send(line).is_err() {
            return;
        }
        buf.clear();
    }
}

fn kill_group(child: &mut Child) {
    if let Ok(pid) = i32::try_from(child.id()) {
        // SAFETY: kill(2) on the group we created; it touches no memory.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
    let _ = child.kill();
    let _ = child.wait();
}

fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None) => status.to_string(),
    }
}

fn failed(step: &Step, status: String, tail: Vec<String>) -> PrepareError {
    PrepareError::StepFailed {
        step: step.name.to_string(),
        status,
        tail: tail.join("\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str, timeout: Duration) -> (Result<(), PrepareError>, String) {
        let argv = vec!["sh".to_string(), "-c".to_string(), script.to_string()];
        let env = vec![("GREETING".to_string(), "hello".to_string())];
        let step = Step {
            name: "test step",
            argv: &argv,
            cwd: Path::new("/"),
            env: &env,
            timeout,
        };
        let mut log = Vec::new();
        let result = run(&step, &mut log);
        (result, String::from_utf8(log).unwrap())
    }

    #[test]
    fn streams_both_pipes_and_passes_env() {
        let (result, log) = sh(
            "echo $GREETING; echo oops >&2; pwd",
            Duration::from_secs(10),
        );
        result.unwrap();
        assert!(log.contains("  | hello\n"), "{log}");
        assert!(log.contains("  | oops\n"), "{log}");
        assert!(log.contains("  | /\n"), "{log}");
    }

    #[test]
    fn failure_quotes_the_status_and_last_lines() {
        let (result, _) = sh("echo first; echo why >&2; exit 3", Duration::from_secs(10));
        let text = result.unwrap_err().to_string();
        assert!(
            text.starts_with("test step failed (exit status 3)"),
            "{text}"
        );
        assert!(text.contains("why"), "{text}");
    }

    #[test]
    fn timeout_kills_the_group() {
        let started = Instant::now();
        let (result, _) = sh("sleep 30 & sleep 30; echo late", Duration::from_millis(300));
        let text = result.unwrap_err().to_string();
        assert!(text.starts_with("test step timed out after "), "{text}");
        assert!(started.elapsed() < Duration::from_secs(10));
    }

    #[test]
    fn missing_program_names_it() {
        let argv = vec!["/no/such/program".to_string()];
        let step = Step {
            name: "venv",
            argv: &argv,
            cwd: Path::new("/"),
            env: &[],
            timeout: Duration::from_secs(1),
        };
        let text = run(&step, &mut Vec::new()).unwrap_err().to_string();
        assert!(
            text.starts_with("venv could not start: /no/such/program: "),
            "{text}"
        );
    }
}
