//! `rebench-enter`: how a process of a session starts (see
//! `rebench::sandbox::enter`): what `rebench sandbox-enter` does on the
//! server's own machine, as a small program of its own: it starts in a
//! fraction of the time the whole CLI takes, which every command of an
//! agent pays.
//!
//! Usage: rebench-enter [--target PID] [--cgroup DIR]... --cwd DIR
//!        [--env KEY=VALUE]... -- COMMAND [ARG]...
//!        rebench-enter --serve   (a session's spawner, on its stdin socket;
//!        started as a session process: see `rebench::sandbox::spawner`)

use std::ffi::OsString;
use std::path::PathBuf;

use std::os::fd::{FromRawFd, OwnedFd};

use rebench::sandbox::enter::{Launch, launch_here};
use rebench::sandbox::spawner::SERVE_FLAG;
use rebench::sandbox::spawner::serve::serve;

fn parse(mut args: impl Iterator<Item = OsString>) -> Result<Launch, String> {
    let mut launch = Launch {
        target: None,
        cgroups: Vec::new(),
        docker: None,
        cwd: PathBuf::new(),
        env: Vec::new(),
        argv: Vec::new(),
    };
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match arg.to_str() {
            Some("--") => {
                launch.argv = args.collect();
                break;
            }
            Some("--target") => {
                let text = value("--target")?;
                launch.target = Some(
                    text.to_str()
                        .and_then(|t| t.parse().ok())
                        .ok_or(format!("--target {}: not a pid", text.to_string_lossy()))?,
                );
            }
            Some("--cgroup") => launch.cgroups.push(value("--cgroup")?.into()),
            Some("--cwd") => launch.cwd = value("--cwd")?.into(),
            Some("--env") => launch.env.push(value("--env")?),
            _ => return Err(format!("unexpected argument {}", arg.to_string_lossy())),
        }
    }
    if launch.cwd.as_os_str().is_empty() {
        return Err("--cwd is required".into());
    }
    Ok(launch)
}

fn main() {
    if std::env::args_os().nth(1).is_some_and(|a| a == SERVE_FLAG) {
        // SAFETY: fd 0 is the socket the server gave us as stdin; nothing else owns it.
        let control = unsafe { OwnedFd::from_raw_fd(0) };
        if let Err(e) = serve(control) {
            eprintln!("rebench-enter --serve: {e:#}");
            std::process::exit(1);
        }
        return;
    }
    let code = match parse(std::env::args_os().skip(1)) {
        Ok(spec) => match launch_here(&spec) {
            Ok(code) => code,
            Err(e) => {
                eprintln!("rebench-enter: {e:#}");
                1
            }
        },
        Err(e) => {
            eprintln!("rebench-enter: {e}");
            2
        }
    };
    std::process::exit(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> impl Iterator<Item = OsString> {
        list.iter()
            .map(OsString::from)
            .collect::<Vec<_>>()
            .into_iter()
    }

    #[test]
    fn it_reads_what_the_prefix_writes() {
        let launch = parse(args(&[
            "--target", "77", "--cgroup", "/cg", "--cgroup", "/cpuset", "--cwd", "/ws", "--env",
            "A=b", "--", "bash", "-c", "true",
        ]))
        .unwrap();
        assert_eq!(launch.target, Some(77));
        assert_eq!(
            launch.cgroups,
            [PathBuf::from("/cg"), PathBuf::from("/cpuset")]
        );
        assert_eq!(launch.cwd, PathBuf::from("/ws"));
        assert_eq!(launch.env, [OsString::from("A=b")]);
        assert_eq!(launch.argv, ["bash", "-c", "true"]);
    }

    #[test]
    fn bad_arguments_are_named() {
        let err = |list: &[&str]| parse(args(list)).unwrap_err();
        assert_eq!(
            err(&["--target", "x", "--cwd", "/"]),
            "--target x: not a pid"
        );
        assert_eq!(err(&["--cwd"]), "--cwd needs a value");
        assert_eq!(err(&["--bogus"]), "unexpected argument --bogus");
        assert_eq!(err(&["--", "true"]), "--cwd is required");
    }
}
