//! Shared test harness: a real `rebench serve` process on a temp data dir,
//! clients on its sockets, and fixture environments.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use rebench::client::Client;
use rebench::paths::DataPaths;
use rebench::protocol::{CreateSession, Credentials, Request, SessionView};
use rebench::session::Kind;

pub mod model_server;
pub mod tmux;
pub mod torch_env;

pub const BIN: &str = env!("CARGO_BIN_EXE_rebench");

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub struct TestServer {
    pub dir: tempfile::TempDir,
    pub paths: DataPaths,
    pub child: Option<Child>,
    /// Extra variables in the server's environment (kept across restarts).
    pub env: Vec<(String, String)>,
    /// A limit on the server's open descriptors (soft and hard), set with `prlimit`.
    pub nofile: Option<u64>,
}

impl TestServer {
    /// A stopped server leaves its sessions' containers paused, waiting for
    /// it to come back (as it should); a test's server never comes back.
    fn remove_containers(&self) {
        let Ok(entries) = std::fs::read_dir(self.paths.workspaces()) else {
            return;
        };
        let sessions: Vec<String> = entries
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        if sessions.is_empty() {
            return;
        }
        // One listing of every session container here (none without docker).
        let Ok(out) = Command::new("docker")
            .args(["ps", "-a", "--filter", "label=rebench.session"])
            .args(["--format", "{{.ID}} {{.Label \"rebench.session\"}}"])
            .output()
        else {
            return;
        };
        let listing = String::from_utf8_lossy(&out.stdout).to_string();
        let ours: Vec<&str> = listing
            .lines()
            .filter_map(|l| l.split_once(' '))
            .filter(|(_, session)| sessions.iter().any(|s| s == session))
            .map(|(id, _)| id)
            .collect();
        if !ours.is_empty() {
            let _ = Command::new("docker")
                .args(["rm", "-f"])
                .args(&ours)
                .output();
        }
    }

    pub fn start() -> TestServer {
        Self::start_with_env(&[])
    }

    /// A server whose environment also has `vars` (an operator's settings).
    pub fn start_with_env(vars: &[(&str, &str)]) -> TestServer {
        Self::launch(None, vars, None)
    }

    /// A server whose data dir is `data` (on a disk a test controls).
    pub fn start_in(data: &Path, vars: &[(&str, &str)]) -> TestServer {
        Self::launch(Some(data), vars, None)
    }

    /// A server that may open at most `nofile` descriptors.
    pub fn start_with_nofile(nofile: u64, vars: &[(&str, &str)]) -> TestServer {
        Self::launch(None, vars, Some(nofile))
    }

    /// The data dir is `data`, else a fresh one in the server's temp dir.
    fn launch(data: Option<&Path>, vars: &[(&str, &str)], nofile: Option<u64>) -> TestServer {
        let dir = tempfile::Builder::new()
            .prefix("rb")
            .tempdir_in("/tmp")
            .unwrap();
        let paths = DataPaths::new(data.map_or_else(|| dir.path().join("data"), Path::to_path_buf));
        let mut server = TestServer {
            dir,
            paths,
            child: None,
            nofile,
            env: vars
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        server.spawn();
        server
    }

    /// Starts the server process (again) and waits until it answers.
    pub fn spawn(&mut self) {
        let mut command = match self.nofile {
            Some(limit) => {
                let mut c = Command::new("prlimit");
                c.arg(format!("--nofile={limit}:{limit}")).arg(BIN);
                c
            }
            None => Command::new(BIN),
        };
        let child = command
            .args(["serve", "--data-dir"])
            .arg(&self.paths.root)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::os::unix::net::UnixStream::connect(self.paths.socket()).is_err() {
            assert!(Instant::now() < deadline, "server did not come up");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL: no chance to flush or say goodbye.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }

    pub async fn admin(&self) -> Client {
        Client::connect(&self.paths.socket(), None, "test-admin")
            .await
            .unwrap()
    }

    /// The participant socket and token of `session`, as an admin gets them.
    pub async fn credentials(&self, session: &str) -> Credentials {
        self.admin()
            .await
            .call(Request::Credentials {
                session: session.into(),
            })
            .await
            .unwrap()
    }

    pub async fn participant(&self, session: &str) -> Client {
        let creds = self.credentials(session).await;
        Client::connect(
            Path::new(&creds.socket),
            Some(&creds.token),
            "test-participant",
        )
        .await
        .unwrap()
    }

    /// Runs the CLI against this data dir.
    pub fn cli(&self, args: &[&str]) -> Output {
        Command::new(BIN)
            .arg("--data-dir")
            .arg(&self.paths.root)
            .args(args)
            .output()
            .unwrap()
    }

    /// `rebench new ENV --profile PROFILE` through the CLI; the new session's id.
    pub fn new_session_cli(&self, env: &Path, profile: &str) -> String {
        let out = self.cli(&[
            "new",
            env.to_str().unwrap(),
            "--participant",
            "p",
            "--profile",
            profile,
            "--json",
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let id: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        id["id"].as_str().unwrap().to_string()
    }

    /// Creates a session (starting score taken) and returns its view.
    pub async fn create(&self, env: &Path, budget_s: Option<u64>, kind: Kind) -> SessionView {
        let mut admin = self.admin().await;
        admin
            .call(Request::CreateSession(Box::new(CreateSession {
                budget_s,
                ..CreateSession::new(env.display().to_string(), "tess", kind)
            })))
            .await
            .unwrap()
    }

    /// Takes a score now through the admin socket; the score view.
    pub async fn score(&self, session: &str) -> serde_json::Value {
        self.admin()
            .await
            .call(Request::Score {
                session: session.into(),
            })
            .await
            .unwrap()
    }

    /// Runs `command` in the session through the admin socket (20 s limit).
    pub async fn exec(&self, session: &str, command: &str) -> rebench::protocol::ExecReply {
        self.admin()
            .await
            .call(Request::Exec {
                session: session.into(),
                command: command.into(),
                timeout_s: Some(20.0),
                cwd: None,
            })
            .await
            .unwrap()
    }

    /// A new shell in `session`, attached as its driver by the participant:
    /// the participant's client, the shell, and its screen at attach.
    pub async fn drive_new_shell(
        &self,
        session: &str,
        cols: u16,
        rows: u16,
    ) -> (Client, u32, Vec<u8>) {
        use rebench::protocol::{AttachMode, AttachReply, ShellInfo, b64_decode};
        let mut driver = self.participant(session).await;
        let info: ShellInfo = driver
            .call(Request::ShellOpen {
                session: session.into(),
                cols,
                rows,
            })
            .await
            .unwrap();
        let reply: AttachReply = driver
            .call(Request::ShellAttach {
                session: session.into(),
                shell: info.shell,
                mode: AttachMode::Driver,
            })
            .await
            .unwrap();
        let screen = b64_decode(&reply.screen).unwrap();
        (driver, info.shell, screen)
    }

    pub async fn create_running(&self, env: &Path, budget_s: Option<u64>) -> SessionView {
        let view = self.create(env, budget_s, Kind::Agent).await;
        let mut admin = self.admin().await;
        admin
            .call::<SessionView>(Request::Begin {
                session: view.id.clone(),
            })
            .await
            .unwrap()
    }

    pub async fn show(&self, session: &str) -> SessionView {
        self.admin()
            .await
            .call(Request::Show {
                session: session.into(),
            })
            .await
            .unwrap()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SAFETY-free: SIGTERM lets it pause sessions and stop shells.
            unsafe_term(child.id());
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        self.remove_containers();
        // Its paused sessions' processes stay frozen for a server that never comes back.
        let namespace = rebench::sandbox::cgroup::namespace_for(&self.paths.root);
        if let Some(root) = rebench::sandbox::cgroup::CgroupRoot::detect(&namespace) {
            root.remove_all();
        }
    }
}

fn unsafe_term(pid: u32) {
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(pid.to_string())
        .status();
}

/// A copy of the `fixed` fixture environment, with `patch` applied to its manifest text.
pub fn fixture_env(patch: impl Fn(String) -> String) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let env = dir.path().join("fixed");
    copy_dir(&repo_root().join("tests/fixtures/envs/fixed"), &env);
    let manifest = env.join("environment.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, patch(text)).unwrap();
    (dir, env)
}

pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// Polls `check` until it is true or the timeout passes.
pub fn wait_until(timeout: Duration, mut check: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if check() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    check()
}

/// Whether a process is stopped: by SIGSTOP (state T), or in a frozen
/// cgroup (v2 `cgroup.events`, v1 `freezer.state`).
pub fn is_stopped(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    if stat
        .rsplit(')')
        .next()
        .and_then(|s| s.trim().chars().next())
        == Some('T')
    {
        return true;
    }
    let groups = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap_or_default();
    groups.lines().any(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next(), parts.next(), parts.next());
        let (Some(controllers), Some(path)) = (controllers, path) else {
            return false;
        };
        let path = path.trim_start_matches('/');
        if controllers.is_empty() {
            ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"]
                .iter()
                .any(|base| {
                    std::fs::read_to_string(format!("{base}/{path}/cgroup.events"))
                        .is_ok_and(|e| e.lines().any(|l| l.trim() == "frozen 1"))
                })
        } else if controllers.split(',').any(|c| c == "freezer") {
            std::fs::read_to_string(format!("/sys/fs/cgroup/freezer/{path}/freezer.state"))
                .is_ok_and(|s| s.trim() == "FROZEN")
        } else {
            false
        }
    })
}

/// Whether a process is gone (or a zombie nobody reaped yet).
pub fn process_gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => {
            stat.rsplit(')')
                .next()
                .and_then(|rest| rest.trim().chars().next())
                == Some('Z')
        }
    }
}

pub fn process_state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit(')').next()?.trim().chars().next()
}

/// Whether bubblewrap can make a jail here. When it cannot, `what` is
/// skipped, loudly on the real stderr; with `REBENCH_REQUIRE_BWRAP=1` (CI)
/// that is a failure instead.
pub fn bwrap_works(what: &str) -> bool {
    // The server's own probe: the tests skip exactly where it would not jail.
    let works = rebench::sandbox::jail::Isolation::named("bwrap").is_ok();
    if !works {
        let text = format!(
            "SKIPPED: {what} did not run: bwrap is missing or cannot create namespaces here"
        );
        if std::env::var_os("REBENCH_REQUIRE_BWRAP").is_some_and(|v| v == "1") {
            panic!("{text}");
        }
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "\n{text}\n");
    }
    works
}

/// A session jail as the server makes one for an isolated session's scorer:
/// `hidden` emptied, `read_only` and `writable` shown again. `prefix` is the
/// REBENCH_JAIL value that runs a command inside it in `cwd`. Stopped when
/// dropped.
pub struct TestJail {
    pub prefix: String,
    _jail: rebench::sandbox::jail::Jail,
    _tmp: tempfile::TempDir,
}

pub fn test_jail(
    hidden: &[PathBuf],
    read_only: &[PathBuf],
    writable: &[PathBuf],
    cwd: &Path,
) -> TestJail {
    let tmp = tempfile::tempdir().unwrap();
    let layout = rebench::sandbox::jail::Layout {
        hidden: hidden.to_vec(),
        read_only: read_only.to_vec(),
        writable: writable.to_vec(),
        tmp: tmp.path().join("tmp"),
        devices: Vec::new(),
    };
    let marker = rebench::sandbox::SessionMarker::new("test-jail");
    let jail = rebench::sandbox::jail::Jail::start(Path::new("bwrap"), &layout, &marker, None, &[])
        .expect("starting a jail");
    let launch = rebench::sandbox::enter::Launch {
        target: Some(jail.init_pid()),
        cgroups: Vec::new(),
        docker: None,
        cwd: cwd.to_path_buf(),
        env: Vec::new(),
        argv: Vec::new(),
    };
    let prefix =
        serde_json::to_string(&rebench::sandbox::enter::prefix(Path::new(BIN), &launch)).unwrap();
    TestJail {
        prefix,
        _jail: jail,
        _tmp: tmp,
    }
}

/// Reads `shell`'s output pushed to `client` into `screen` until it holds
/// `needle` (30 s at most); whether it did.
pub async fn read_until(
    client: &mut Client,
    shell: u32,
    needle: &str,
    screen: &mut String,
) -> bool {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !screen.contains(needle) {
        match tokio::time::timeout_at(deadline, client.next_push()).await {
            Ok(Ok(rebench::protocol::Push::ShellOutput { shell: s, data, .. })) if s == shell => {
                screen.push_str(&String::from_utf8_lossy(
                    &rebench::protocol::b64_decode(&data).unwrap(),
                ));
            }
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                screen.push_str(&format!("\n[client error: {e}]"));
                return false;
            }
            Err(_) => return false,
        }
    }
    true
}

/// Opens a shell in `session` as its participant, drives it, types `input`
/// and reads until `needle`; what the screen showed, and whether it did.
pub async fn shell_until(
    server: &TestServer,
    session: &str,
    input: &str,
    needle: &str,
) -> (String, bool) {
    use rebench::protocol::b64_encode;
    let (mut driver, shell, _) = server.drive_new_shell(session, 100, 30).await;
    driver
        .send(Request::ShellInput {
            session: session.into(),
            shell,
            data: b64_encode(input.as_bytes()),
        })
        .await
        .unwrap();
    let mut screen = String::new();
    let found = read_until(&mut driver, shell, needle, &mut screen).await;
    (screen, found)
}

/// Whether a Docker engine answers at the default endpoint. When none does,
/// `what` is skipped, loudly on the real stderr; with
/// `REBENCH_REQUIRE_DOCKER=1` (CI) that is a failure instead.
pub fn docker_works(what: &str) -> bool {
    let endpoint = rebench::sandbox::docker::default_endpoint();
    let Err(e) = rebench::sandbox::docker::ping(&endpoint) else {
        return true;
    };
    let text = format!("SKIPPED: {what} did not run: {e:#}");
    if std::env::var_os("REBENCH_REQUIRE_DOCKER").is_some_and(|v| v == "1") {
        panic!("{text}");
    }
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "\n{text}\n");
    false
}

/// The base image, built once for the whole binary (servers would each
/// build it at once otherwise).
pub fn base_image() -> &'static str {
    static TAG: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TAG.get_or_init(|| {
        let engine = rebench::sandbox::docker::Engine::connect(
            "local",
            &rebench::sandbox::docker::default_endpoint(),
        )
        .unwrap();
        rebench::sandbox::docker::block_on(rebench::sandbox::docker::image::ensure_base_image(
            &engine,
            &|line| eprintln!("{line}"),
        ))
        .expect("building the base image")
    })
}

/// The containers on the default engine labelled for `session` (running or not).
pub fn session_containers(session: &str) -> Vec<String> {
    let out = Command::new("docker")
        .args(["ps", "-a", "--format", "{{.Names}} {{.State}}", "--filter"])
        .arg(format!("label=rebench.session={session}"))
        .output()
        .expect("running the docker client");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

/// Whether this machine lets us make cgroups (as the server would).
pub fn cgroups_usable() -> bool {
    rebench::sandbox::cgroup::CgroupRoot::detect("security-test-probe").is_some()
}

/// `cgroups_usable`, saying so when not (a failure under
/// `REBENCH_REQUIRE_CGROUPS=1`, as in CI run as root).
pub fn cgroups_or_skip(what: &str) -> bool {
    if cgroups_usable() {
        return true;
    }
    let text = format!("SKIPPED: {what} did not run: no cgroup hierarchy this user may write");
    if std::env::var_os("REBENCH_REQUIRE_CGROUPS").is_some_and(|v| v == "1") {
        panic!("{text}");
    }
    eprintln!("\n{text}\n");
    false
}
