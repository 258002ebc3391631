//! The spawner's side (`rebench-enter --serve`): a small process that was
//! itself started as a session process (through the launcher: the
//! session's cgroup, scrubbed environment, jail), reading requests on its
//! stdin socket and starting each command as its own child. Commands are
//! born where they belong: nothing is joined or exec'd twice per command.
//!
//! It trusts nothing it could not already do as a session process: it
//! runs the participant's commands with the participant's rights.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, Stdio};

use super::wire::{FromSpawner, Incoming, Outgoing, ToSpawner, encode};
use crate::sandbox::enter::scrub;
use crate::sandbox::sys::set_nonblocking;

/// Serves requests on `control` until the server hangs up.
pub fn serve(control: OwnedFd) -> anyhow::Result<()> {
    // The participant's processes run as this process's user: without
    // this they could take the control socket out of it (ptrace,
    // pidfd_getfd).
    // SAFETY: prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
    set_nonblocking(control.as_fd(), false)?;
    send(control.as_fd(), &FromSpawner::Ready, None)?;
    let mut incoming = Incoming::default();
    let mut running: HashMap<u64, (Child, OwnedFd)> = HashMap::new();
    loop {
        let ids: Vec<u64> = running.keys().copied().collect();
        let mut polled = vec![libc::pollfd {
            fd: control.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }];
        polled.extend(ids.iter().map(|id| libc::pollfd {
            fd: running[id].1.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }));
        // SAFETY: a valid array of pollfd of the given length.
        let ready = unsafe { libc::poll(polled.as_mut_ptr(), polled.len() as libc::nfds_t, -1) };
        if ready < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err.into());
        }
        for (id, polled) in ids.iter().zip(&polled[1..]) {
            if polled.revents == 0 {
                continue;
            }
            let Some((child, _)) = running.get_mut(id) else {
                continue;
            };
            if let Some(status) = child.try_wait()? {
                running.remove(id);
                let exited = FromSpawner::Exited {
                    id: *id,
                    code: status.code(),
                    signal: status.signal(),
                };
                send(control.as_fd(), &exited, None)?;
            }
        }
        if polled[0].revents == 0 {
            continue;
        }
        if !incoming.fill(control.as_fd())? {
            // The server hung up: the commands carry on (background jobs
            // belong to the session), this process is done.
            return Ok(());
        }
        while let Some((request, fds)) = incoming.next::<ToSpawner>(ToSpawner::fds)? {
            let ToSpawner::Spawn { id, argv, env, cwd } = request;
            match start(&argv, &env, &cwd, fds) {
                Ok((child, pidfd)) => {
                    send(
                        control.as_fd(),
                        &FromSpawner::Started { id },
                        Some(pidfd.as_fd()),
                    )?;
                    running.insert(id, (child, pidfd));
                }
                Err(e) => {
                    let failed = FromSpawner::Failed {
                        id,
                        message: e.to_string(),
                        not_found: e.kind() == io::ErrorKind::NotFound,
                    };
                    send(control.as_fd(), &failed, None)?;
                }
            }
        }
    }
}

/// Starts one command with the given stdio, in a process group of its own;
/// returns it and its pidfd.
fn start(
    argv: &[String],
    env: &[(String, String)],
    cwd: &std::path::Path,
    fds: Vec<OwnedFd>,
) -> io::Result<(Child, OwnedFd)> {
    let Some((program, args)) = argv.split_first() else {
        return Err(io::Error::other("an empty command"));
    };
    // The same environment the launcher would have given it.
    let vars = env.iter().map(|(k, v)| (k.into(), v.into()));
    let env = scrub(vars, &[]).map_err(io::Error::other)?;
    let mut stdio = fds.into_iter();
    let (Some(stdin), Some(stdout), Some(stderr)) = (stdio.next(), stdio.next(), stdio.next())
    else {
        return Err(io::Error::other("a command needs three descriptors"));
    };
    // A path, so that std starts it with posix_spawn (a vfork) instead of
    // fork: it would fork to search a PATH other than this process's.
    let program = resolve(program, &env)?;
    let child = Command::new(program)
        .args(args)
        .env_clear()
        .envs(env)
        .current_dir(cwd)
        .process_group(0)
        .stdin(Stdio::from(stdin))
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::from(stderr))
        .spawn()?;
    match pidfd_open(child.id()) {
        Ok(pidfd) => Ok((child, pidfd)),
        Err(e) => {
            // Without its pidfd the server could not stop it: it does not run.
            let mut child = child;
            let _ = child.kill();
            let _ = child.wait();
            Err(e)
        }
    }
}

/// `program` as the command's PATH finds it (a name with a slash as is).
fn resolve(
    program: &str,
    env: &[(std::ffi::OsString, std::ffi::OsString)],
) -> io::Result<std::path::PathBuf> {
    if program.contains('/') {
        return Ok(program.into());
    }
    let path = env
        .iter()
        .rev()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.clone())
        .unwrap_or_else(|| "/usr/bin:/bin".into());
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("{program}: not found in PATH"),
            )
        })
}

fn is_executable(path: &std::path::Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn pidfd_open(pid: u32) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags, and returns a new descriptor.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::c_int, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a descriptor the kernel just made for us.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

fn send(
    control: BorrowedFd<'_>,
    message: &FromSpawner,
    fd: Option<BorrowedFd<'_>>,
) -> io::Result<()> {
    let fds = fd.map(|fd| vec![fd.as_raw_fd()]).unwrap_or_default();
    let mut outgoing = Outgoing::new(encode(message)?, fds);
    // The socket blocks: each call sends what fits, until all is sent.
    while !outgoing.send(control)? {}
    Ok(())
}
