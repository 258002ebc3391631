//! Isolated sessions (`REBENCH_ISOLATION=bwrap`) through the real server:
//! every shell and command of a session runs in its bubblewrap jail, which
//! shows the workspace and hides the data dir (store, admin socket, other
//! workspaces), the environment folder (scorer, reference) and the server;
//! jobs share one pid namespace and all die with the session, even those
//! that scrub the session marker from their environment.
//!
//! Needs bubblewrap (and user namespaces): without it these tests print
//! "SKIPPED: ..." and pass, unless `REBENCH_REQUIRE_BWRAP=1` (CI).

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

mod common;

use std::time::Duration;

use common::*;
use rebench::protocol::{
    AttachMode, AttachReply, Push, Request, ShellInfo, b64_decode, b64_encode,
};

fn isolated_server() -> TestServer {
    TestServer::start_with_env(&[("REBENCH_ISOLATION", "bwrap")])
}

/// Host pids whose command line is exactly `argv`.
fn host_pids_running(argv: &[&str]) -> Vec<i32> {
    let want: Vec<u8> = argv
        .iter()
        .flat_map(|a| [a.as_bytes(), b"\0"].concat())
        .collect();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == want))
        .collect()
}

/// Host pids whose command line contains `text`.
fn host_pids_containing(text: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(text))
        })
        .collect()
}

fn state_of(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit(')').next()?.trim().chars().next()
}

#[tokio::test]
async fn an_isolated_session_sees_its_workspace_and_nothing_it_must_not() {
    if !bwrap_works("isolation tests") {
        return;
    }
    let (_env_dir, env) = fixture_env(|t| t);
    let server = isolated_server();
    let other = server.create_running(&env, Some(3600)).await;
    let session = server.create_running(&env, Some(3600)).await;
    let data = server.paths.root.display().to_string();
    let env_dir = env.canonicalize().unwrap().display().to_string();
    let server_pid = server.child.as_ref().unwrap().id();
    let probe = format!(
        "echo made > made-inside; \
         ls {data}; echo ---; ls {data}/workspaces; echo ---; \
         ls -A {env_dir} | wc -l; \
         test -e {data}/rebench.sock && echo ADMIN-SOCKET; \
         test -e {data}/db && echo DATABASE; \
         kill -0 {server_pid} 2>/dev/null && echo SERVER-VISIBLE; \
         ps -e -o comm= | grep -c rebench; \
         rebench task status >/dev/null && echo TASK-CLIENT-OK; \
         mkdir -p $XDG_CACHE_HOME/x && echo cache-in-$XDG_CACHE_HOME"
    );
    let seen = server.exec(&session.id, &probe).await;
    assert_eq!(seen.exit_code, Some(0), "{seen:?}");
    let out = seen.stdout;
    let parts: Vec<&str> = out.split("---\n").collect();
    assert_eq!(parts.len(), 3, "{out}");
    assert!(!parts[0].contains("db"), "the store is hidden: {out}");
    assert!(parts[0].contains("workspaces"), "{out}");
    assert_eq!(parts[1].trim(), session.id, "only its own workspace: {out}");
    assert!(!out.contains(&other.id), "{out}");
    let rest: Vec<&str> = parts[2].lines().collect();
    assert_eq!(
        rest[0], "0",
        "the environment folder (scorer, reference) is empty: {out}"
    );
    assert!(!out.contains("ADMIN-SOCKET"), "{out}");
    assert!(!out.contains("DATABASE"), "{out}");
    assert!(!out.contains("SERVER-VISIBLE"), "{out}");
    assert!(out.contains("cache-in-/tmp/.cache"), "{out}");
    assert_eq!(session.isolation, "bwrap");
    assert!(
        out.contains("TASK-CLIENT-OK"),
        "the in-session client reaches the server: {out}\n{}",
        seen.stderr
    );
    // Only the jail's own rebench processes (the launcher, the task client) show.
    assert_eq!(
        std::fs::read_to_string(std::path::Path::new(&session.workspace).join("made-inside"))
            .unwrap(),
        "made\n"
    );
    // A participant cannot lift the hiding: no capabilities, no remount.
    let remount = server
        .exec(
            &session.id,
            &format!("umount -l {data} 2>&1; ls {data}/db 2>&1"),
        )
        .await;
    assert!(
        !remount.stdout.contains("conf") && !remount.stdout.contains("snap"),
        "{remount:?}"
    );
}

#[tokio::test]
async fn jobs_share_the_jail_and_all_die_with_the_session_marker_or_not() {
    if !bwrap_works("isolation tests") {
        return;
    }
    let (_env_dir, env) = fixture_env(|t| t);
    let server = isolated_server();
    let session = server.create_running(&env, Some(3600)).await;
    // One job keeps the session marker, one scrubs its environment.
    let command =
        "nohup sleep 301 >/dev/null 2>&1 & env -i /bin/sleep 302 >/dev/null 2>&1 & echo started";
    let started = server.exec(&session.id, command).await;
    assert_eq!(started.stdout.trim(), "started", "{started:?}");
    // A later command sees both (one pid namespace per session).
    let command = "ps -e -o args= | grep -c '^[/a-z]*sleep 30[12]$'";
    let seen = server.exec(&session.id, command).await;
    assert_eq!(seen.stdout.trim(), "2", "{seen:?}");
    let marked = host_pids_running(&["sleep", "301"]);
    let scrubbed = host_pids_running(&["/bin/sleep", "302"]);
    assert_eq!(
        (marked.len(), scrubbed.len()),
        (1, 1),
        "{marked:?} {scrubbed:?}"
    );
    // Pausing freezes both jobs: the jail's cgroup or pid namespace holds
    // the one that scrubbed its marker too.
    let _: serde_json::Value = server
        .admin()
        .await
        .call(Request::Pause {
            session: session.id.clone(),
            reason: rebench::session::PauseReason::Proctor,
            note: None,
        })
        .await
        .unwrap();
    assert!(
        wait_until(Duration::from_secs(5), || is_stopped(marked[0])
            && is_stopped(scrubbed[0])),
        "{:?} {:?}",
        state_of(marked[0]),
        state_of(scrubbed[0])
    );
    let _: serde_json::Value = server
        .admin()
        .await
        .call(Request::End {
            session: session.id.clone(),
            reason: None,
            note: None,
        })
        .await
        .unwrap();
    assert!(
        wait_until(Duration::from_secs(10), || {
            state_of(marked[0]).is_none_or(|s| s == 'Z')
                && state_of(scrubbed[0]).is_none_or(|s| s == 'Z')
        }),
        "survivors: {:?} {:?}",
        state_of(marked[0]),
        state_of(scrubbed[0])
    );
}

#[tokio::test]
async fn an_isolated_shell_runs_in_the_jail_and_can_score() {
    if !bwrap_works("isolation tests") {
        return;
    }
    let (_env_dir, env) = fixture_env(|t| t);
    let server = isolated_server();
    let session = server.create_running(&env, Some(3600)).await;
    let mut driver = server.participant(&session.id).await;
    let info: ShellInfo = driver
        .call(Request::ShellOpen {
            session: session.id.clone(),
            cols: 100,
            rows: 30,
        })
        .await
        .unwrap();
    let _: AttachReply = driver
        .call(Request::ShellAttach {
            session: session.id.clone(),
            shell: info.shell,
            mode: AttachMode::Driver,
        })
        .await
        .unwrap();
    std::fs::write(
        std::path::Path::new(&session.workspace).join("value"),
        "2.5",
    )
    .unwrap();
    driver
        .send(Request::ShellInput {
            session: session.id.clone(),
            shell: info.shell,
            data: b64_encode(b"echo pid-$$-of-$(ls /proc | grep -c '^[0-9]')-procs; score\r"),
        })
        .await
        .unwrap();
    let mut screen = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !screen.contains("normalized") {
        match tokio::time::timeout_at(deadline, driver.next_push()).await {
            Ok(Ok(Push::ShellOutput { data, .. })) => {
                screen.push_str(&String::from_utf8_lossy(&b64_decode(&data).unwrap()))
            }
            Ok(Ok(_)) => {}
            other => panic!("{other:?}: {screen}"),
        }
    }
    // The shell's pid is small: it lives in the jail's pid namespace, which
    // holds only a handful of processes.
    // (The typed line is echoed too: take the printed one, with digits.)
    let printed = screen
        .split("pid-")
        .filter_map(|rest| rest.split('-').next()?.parse::<u32>().ok())
        .next();
    assert!(printed.is_some_and(|pid| pid < 50), "{printed:?}: {screen}");
    assert!(screen.contains("0.590"), "{screen}");
}

#[tokio::test]
async fn a_scorer_can_run_participant_code_inside_the_jail() {
    if !bwrap_works("isolation tests") {
        return;
    }
    // The scorer counts the environment folder's files itself, and again
    // through REBENCH_JAIL: the participant's view has none of them.
    let (_env_dir, env) = fixture_env(|t| t);
    std::fs::write(
        env.join("score.sh"),
        r#"#!/bin/sh
exec python3 -c '
import json, os, subprocess
jail = json.loads(os.environ["REBENCH_JAIL"])
count = ["sh", "-c", "ls -A \"$1\" | wc -l; env | grep -c -e REBENCH_ENV_DIR -e REBENCH_JAIL -e REBENCH_WORKSPACE", "sh", os.environ["REBENCH_ENV_DIR"]]
outside = subprocess.run(count, capture_output=True, text=True).stdout.split()
inside = subprocess.run(jail + count, capture_output=True, text=True)
print(json.dumps({"raw": 1.0, "message": "outside %s inside %s in %s" % (outside[0], " ".join(inside.stdout.split()), inside.stderr.strip() or "the jail")}))
'
"#,
    )
    .unwrap();
    let server = isolated_server();
    let session = server.create_running(&env, Some(3600)).await;
    let entry: serde_json::Value = server
        .admin()
        .await
        .call(Request::Score {
            session: session.id.clone(),
        })
        .await
        .unwrap();
    let text = entry.to_string();
    // None of the scorer's own variables reach the participant code either.
    assert!(text.contains("inside 0 0 in the jail"), "{text}");
    assert!(!text.contains("outside 0 "), "{text}");
}

#[tokio::test]
async fn prefix_sum_runs_the_solution_in_the_jail_and_checks_it_outside() {
    if !bwrap_works("isolation tests") {
        return;
    }
    let server = isolated_server();
    let env = repo_root().join("environments/prefix-sum");
    let session: rebench::protocol::SessionView = server
        .admin()
        .await
        .call(Request::CreateSession(Box::new(
            rebench::protocol::CreateSession {
                budget_s: Some(3600),
                profile: Some("smoke".into()),
                ..rebench::protocol::CreateSession::new(
                    env.display().to_string(),
                    "tess",
                    rebench::session::Kind::Agent,
                )
            },
        )))
        .await
        .unwrap();
    // The starting score already ran in the jail.
    let _: rebench::protocol::SessionView = server
        .admin()
        .await
        .call(Request::Begin {
            session: session.id.clone(),
        })
        .await
        .unwrap();
    let ws = std::path::Path::new(&session.workspace);
    let reference = env.join("reference/solution.py");
    let score = || async {
        let entry: serde_json::Value = server
            .admin()
            .await
            .call(Request::Score {
                session: session.id.clone(),
            })
            .await
            .unwrap();
        entry
    };
    // A solution that would copy the reference if it could see it.
    let starting = std::fs::read_to_string(ws.join("solution.py")).unwrap();
    std::fs::write(
        ws.join("solution.py"),
        format!(
            "import os\nif os.path.exists({:?}):\n    raise RuntimeError('LEAKED')\n{starting}",
            reference.display().to_string()
        ),
    )
    .unwrap();
    let entry = score().await;
    assert_eq!(entry["valid"], true, "{entry}");
    assert_eq!(entry["details"]["runner"], "REBENCH_JAIL", "{entry}");
    // Wrong answers are still caught (outside, against the answers).
    std::fs::write(
        ws.join("solution.py"),
        "def prefix_sum(xs):\n    return [0] * len(xs)\n",
    )
    .unwrap();
    let entry = score().await;
    assert_eq!(entry["valid"], false, "{entry}");
    assert!(
        entry["message"]
            .as_str()
            .unwrap_or("")
            .contains("wrong answer at index"),
        "{entry}"
    );
    let leftovers = std::fs::read_dir(ws)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(".prefix-sum-run-")
        })
        .count();
    assert_eq!(leftovers, 0);
}

#[tokio::test]
async fn a_jail_killed_from_inside_is_replaced_by_the_next_command() {
    if !bwrap_works("isolation tests") {
        return;
    }
    let (_env_dir, env) = fixture_env(|t| t);
    let server = isolated_server();
    let session = server.create_running(&env, Some(3600)).await;
    // The jail's init is pid 2 inside (bwrap is 1): killing it ends the jail.
    let init = server.exec(&session.id, "ps -o pid=,args= -p 2").await;
    assert!(init.stdout.contains("sleep infinity"), "{init:?}");
    let _ = server.exec(&session.id, "kill -KILL 2; sleep 5").await;
    let after = server
        .exec(&session.id, "echo alive; ps -o pid=,args= -p 2")
        .await;
    assert_eq!(after.exit_code, Some(0), "{after:?}");
    assert!(after.stdout.starts_with("alive"), "{after:?}");
    assert!(
        after.stdout.contains("sleep infinity"),
        "a new jail: {after:?}"
    );
}

/// A session frozen for an exclusive score whose jail had died (killed
/// from inside here; after a server restart it is simply not there yet)
/// gets a new jail for the scorer. Its start must not wait on a child
/// stuck joining the frozen cgroup: that hung the score for good, with the
/// session's processes frozen and its clock running.
#[tokio::test]
async fn an_exclusive_score_starts_a_new_jail_in_the_frozen_session() {
    if !bwrap_works("isolation tests") || !cgroups_or_skip("the frozen-jail test") {
        return;
    }
    let (_env_dir, env) = fixture_env(|t| {
        t.replace(
            "protected = [\"helper.py\"]",
            "protected = [\"helper.py\"]\nexclusive = true",
        )
    });
    let server = isolated_server();
    let session = server.create_running(&env, Some(3600)).await;
    let _ = server.exec(&session.id, "kill -KILL 2; sleep 5").await;
    let entry = tokio::time::timeout(Duration::from_secs(60), server.score(&session.id))
        .await
        .expect("the exclusive score hung starting a new jail");
    assert_eq!(entry["valid"], true, "{entry}");
    assert_eq!(entry["details"]["session_stopped"], true, "{entry}");
    // The new jail is the session's: in its cgroup, running again, usable.
    let in_session_group: Vec<i32> = host_pids_running(&["sleep", "infinity"])
        .into_iter()
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/cgroup")).is_ok_and(|groups| {
                groups
                    .lines()
                    .any(|l| l.ends_with(&format!("/{}", session.id)))
            })
        })
        .collect();
    assert_eq!(in_session_group.len(), 1, "{in_session_group:?}");
    assert!(!is_stopped(in_session_group[0]), "the jail stayed frozen");
    let after = server.exec(&session.id, "echo alive").await;
    assert_eq!(after.exit_code, Some(0), "{after:?}");
    assert!(after.stdout.starts_with("alive"), "{after:?}");
}

/// Issue 20: a command enters the jail through the small launcher
/// (`rebench-enter`, not the whole CLI's `sandbox-enter`), with the same
/// effect: inside the jail's pid namespace, no capabilities, its exit code
/// or signal passed on, and nothing but its stdio open (a descriptor the
/// server inherited without close-on-exec does not reach it).
#[tokio::test]
async fn a_command_enters_the_jail_through_the_small_launcher_and_holds_only_its_stdio() {
    if !bwrap_works("isolation tests") {
        return;
    }
    // A descriptor the server inherits without close-on-exec.
    let leaked = std::fs::File::open("/dev/null").unwrap();
    // SAFETY: dup of an open descriptor; the copy has no close-on-exec.
    let inherited = unsafe { libc::dup(std::os::fd::AsRawFd::as_raw_fd(&leaked)) };
    assert!(inherited > 2);
    let (_env_dir, env) = fixture_env(|t| t);
    let server = isolated_server();
    // SAFETY: closing the copy this process holds (the server has its own).
    unsafe { libc::close(inherited) };
    let session = server.create_running(&env, Some(3600)).await;
    let seen = server
        .exec(
            &session.id,
            "echo pid=$$; grep -E '^(CapEff|CapBnd|NoNewPrivs)' /proc/self/status; \
             ls /proc/$$/fd | sort -n | tr '\\n' ' '; echo; exit 3",
        )
        .await;
    assert_eq!(seen.exit_code, Some(3), "{seen:?}");
    let out = seen.stdout;
    let pid: i32 = out
        .lines()
        .find_map(|l| l.strip_prefix("pid="))
        .unwrap()
        .parse()
        .unwrap();
    assert!(pid < 100, "not in the jail's pid namespace: {out}");
    assert!(out.contains("CapEff:\t0000000000000000"), "{out}");
    assert!(out.contains("CapBnd:\t0000000000000000"), "{out}");
    assert!(out.contains("NoNewPrivs:\t1"), "{out}");
    let fds = out.lines().nth(4).unwrap_or_default();
    assert_eq!(fds.trim(), "0 1 2", "only stdio: {out}");
    // On the host, the command's parent is the small launcher.
    let id = session.id.clone();
    let watch = {
        let mut admin = server.admin().await;
        tokio::spawn(async move {
            admin
                .call::<serde_json::Value>(Request::Exec {
                    session: id,
                    command: "sleep 2; true # helper-probe".into(),
                    timeout_s: Some(20.0),
                    cwd: None,
                })
                .await
        })
    };
    let mut parent = String::new();
    for _ in 0..200 {
        if let Some(pid) = host_pids_containing("helper-probe").into_iter().next() {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            let ppid = stat
                .rsplit(')')
                .next()
                .and_then(|s| s.split_whitespace().nth(1));
            parent = ppid
                .and_then(|p| std::fs::read(format!("/proc/{p}/cmdline")).ok())
                .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
                .unwrap_or_default();
            if !parent.is_empty() {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(
        !parent.contains("sandbox-enter"),
        "a helper process: {parent}"
    );
    assert!(parent.contains("serve"), "{parent}");
    watch.await.unwrap().unwrap();
    let killed = server.exec(&session.id, "kill -9 $$").await;
    assert_eq!(
        (killed.exit_code, killed.signal),
        (None, Some(9)),
        "{killed:?}"
    );
}
