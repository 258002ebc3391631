//! Finding, freezing, thawing and killing a session's processes, with real
//! background jobs, nohup and setsid children.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rebench::sandbox::SessionMarker;
use rebench::sandbox::procs::{
    freeze, is_task_client, kill_all, process_state, session_pids, thaw,
};

const WAIT: Duration = Duration::from_secs(10);
const TASK_HELPER_ENV: &str = "REBENCH_TEST_TASK_HELPER";

/// Each loop writes its pid, then a growing counter every 50 ms.
const LOOP: &str = r#"echo $$ > "$DIR/$0.pid"; i=0; while :; do i=$((i+1)); echo $i > "$DIR/$0.count"; sleep 0.05; done"#;

/// A background job, a nohup child and a setsid child, all from one shell.
const LAUNCHER: &str = r#"
sh -c "$LOOP" bg &
nohup sh -c "$LOOP" nohup > /dev/null 2>&1 &
setsid sh -c "$LOOP" setsid &
wait
"#;

const LOOP_NAMES: [&str; 3] = ["bg", "nohup", "setsid"];

fn unique_marker(tag: &str) -> SessionMarker {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    SessionMarker::new(format!("test-{tag}-{}-{nanos}", std::process::id()))
}

fn spawn_marked(marker: &SessionMarker, script: &str, dir: &Path) -> Child {
    let (key, value) = marker.env_pair();
    Command::new("sh")
        .args(["-c", script])
        .env(key, value)
        .env("DIR", dir)
        .env("LOOP", LOOP)
        .spawn()
        .unwrap()
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A started session: the launcher shell and its three loops.
struct Session {
    marker: SessionMarker,
    dir: tempfile::TempDir,
    launcher: Child,
    loops: HashMap<&'static str, i32>,
}

impl Session {
    fn start(tag: &str) -> Session {
        let marker = unique_marker(tag);
        let dir = tempfile::tempdir().unwrap();
        let launcher = spawn_marked(&marker, LAUNCHER, dir.path());
        let mut loops = HashMap::new();
        for name in LOOP_NAMES {
            let pid_file = dir.path().join(format!("{name}.pid"));
            let count_file = dir.path().join(format!("{name}.count"));
            wait_until(&format!("{name} to start"), || {
                read_trimmed(&pid_file).is_some_and(|pid| !pid.is_empty()) && count_file.exists()
            });
            let pid = read_trimmed(&pid_file).unwrap().parse().unwrap();
            loops.insert(name, pid);
        }
        Session {
            marker,
            dir,
            launcher,
            loops,
        }
    }

    fn launcher_pid(&self) -> i32 {
        self.launcher.id() as i32
    }

    fn known_pids(&self) -> Vec<i32> {
        let mut pids: Vec<i32> = self.loops.values().copied().collect();
        pids.push(self.launcher_pid());
        pids
    }

    fn count_files(&self) -> Vec<PathBuf> {
        LOOP_NAMES
            .iter()
            .map(|name| self.dir.path().join(format!("{name}.count")))
            .collect()
    }

    fn counters(&self) -> Vec<Option<String>> {
        self.count_files().iter().map(|f| read_trimmed(f)).collect()
    }

    /// Kills everything and reaps the launcher, our direct child.
    fn end(mut self) {
        kill_all(&self.marker);
        self.launcher.wait().unwrap();
    }
}

fn read_trimmed(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|text| text.trim().to_string())
}

fn is_gone(pid: i32) -> bool {
    matches!(process_state(pid), None | Some('Z' | 'X'))
}

#[test]
fn finds_freezes_thaws_and_kills_the_whole_session() {
    let session = Session::start("main");
    let other = Session::start("other");
    let mut unmarked = Command::new("sleep").arg("30").spawn().unwrap();
    let unmarked_pid = unmarked.id() as i32;

    // Discovery: every process of ours, nothing of anyone else's.
    let found = session_pids(&session.marker);
    for pid in session.known_pids() {
        assert!(found.contains(&pid), "{pid} missing from {found:?}");
    }
    assert!(!found.contains(&unmarked_pid));
    for pid in other.known_pids() {
        assert!(!found.contains(&pid));
    }

    // Freeze: everything stops, counters stop; the other session keeps going.
    let report = freeze(&session.marker, &[session.launcher_pid()]);
    for pid in session.known_pids() {
        assert!(report.frozen.contains(&pid), "{pid} not frozen");
        assert_eq!(process_state(pid), Some('T'), "{pid} not stopped");
    }
    for pid in session_pids(&session.marker) {
        assert_eq!(process_state(pid), Some('T'), "{pid} not stopped");
    }
    let frozen_counts = session.counters();
    let other_counts = other.counters();
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        session.counters(),
        frozen_counts,
        "counters moved while frozen"
    );
    assert_ne!(other.counters(), other_counts, "other session was frozen");
    assert_ne!(process_state(unmarked_pid), Some('T'));

    // Thaw: counters move again.
    thaw(&session.marker, &[session.launcher_pid()]);
    wait_until("counters to move after thaw", || {
        session
            .counters()
            .iter()
            .zip(&frozen_counts)
            .all(|(now, before)| now != before)
    });
    for pid in session.known_pids() {
        assert_ne!(process_state(pid), Some('T'), "{pid} still stopped");
    }

    // Kill: nothing of ours is left; the other session and the unmarked process live.
    let signalled = kill_all(&session.marker);
    assert!(
        signalled >= session.known_pids().len(),
        "signalled {signalled}"
    );
    assert!(session_pids(&session.marker).is_empty());
    for pid in session.known_pids() {
        assert!(is_gone(pid), "{pid} survived kill_all");
    }
    for pid in other.known_pids() {
        assert!(!is_gone(pid), "{pid} of the other session was killed");
    }
    assert!(!is_gone(unmarked_pid));

    session.end();
    other.end();
    unmarked.kill().unwrap();
    unmarked.wait().unwrap();
}

#[test]
fn freeze_catches_processes_forked_mid_freeze() {
    let marker = unique_marker("forker");
    let dir = tempfile::tempdir().unwrap();
    // Forks continuously; the double fork orphans each sleep.
    let mut forker = spawn_marked(&marker, "while :; do (sleep 0.3 &); done", dir.path());
    wait_until("the forker to fork", || session_pids(&marker).len() > 3);

    // No roots: only the sweeps can stop it.
    freeze(&marker, &[]);
    let frozen = session_pids(&marker);
    for pid in &frozen {
        assert_eq!(process_state(*pid), Some('T'), "{pid} escaped the freeze");
    }
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        session_pids(&marker),
        frozen,
        "processes appeared while frozen"
    );

    kill_all(&marker);
    assert!(session_pids(&marker).is_empty());
    forker.wait().unwrap();
}

#[test]
fn task_clients_are_not_frozen() {
    let marker = unique_marker("task");
    let (key, value) = marker.env_pair();
    // Re-run this test binary as `<exe> task ...`: its exe is ours and argv[1] is
    // "task", like the in-shell `rebench task` client. It runs the `task` test below.
    let mut client = Command::new(std::env::current_exe().unwrap())
        .args(["task", "--exact", "--test-threads=1"])
        .env(key, value)
        .env(TASK_HELPER_ENV, "1")
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let client_pid = client.id() as i32;
    wait_until("the task client to start", || {
        is_task_client(client_pid) && session_pids(&marker).contains(&client_pid)
    });

    let report = freeze(&marker, &[]);
    assert!(!report.frozen.contains(&client_pid));
    assert_ne!(process_state(client_pid), Some('T'));

    kill_all(&marker);
    client.wait().unwrap();
    assert!(!is_task_client(std::process::id() as i32));
}

/// Stand-in for the `rebench task` client; idle unless started by
/// `task_clients_are_not_frozen`.
#[test]
fn task() {
    if std::env::var_os(TASK_HELPER_ENV).is_some() {
        std::thread::sleep(Duration::from_secs(30));
    }
}
