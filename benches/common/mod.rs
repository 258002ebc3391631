//! What the benchmarks that need a running server share: a server of their
//! own on a scratch data dir, its admin connection, a running session of
//! the fixture environment, and the stop.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rebench::client::Client;
use rebench::protocol::{
    AttachMode, AttachReply, CreateSession, Push, Request, SessionView, b64_decode, b64_encode,
};
use rebench::session::Kind;

pub struct BenchServer {
    root: PathBuf,
    server: Child,
    pub admin: Client,
}

impl BenchServer {
    /// `rebench serve` on a fresh data dir (with `env` added), once it answers.
    pub async fn start(name: &str, env: &[(&str, &str)]) -> anyhow::Result<BenchServer> {
        let root = std::env::temp_dir().join(format!("rebench-{name}-{}", std::process::id()));
        let server = Command::new(env!("CARGO_BIN_EXE_rebench"))
            .args(["serve", "--data-dir"])
            .arg(root.join("data"))
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .spawn()?;
        let socket = root.join("data").join("rebench.sock");
        let deadline = Instant::now() + Duration::from_secs(20);
        let admin = loop {
            match Client::connect(&socket, None, "bench").await {
                Ok(c) => break c,
                Err(_) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(20)).await
                }
                Err(e) => return Err(e.into()),
            }
        };
        Ok(BenchServer {
            root,
            server,
            admin,
        })
    }

    /// The server's process id.
    #[allow(dead_code)] // not every benchmark looks at the process
    pub fn pid(&self) -> u32 {
        self.server.id()
    }

    /// The server's data dir.
    pub fn data_dir(&self) -> PathBuf {
        self.root.join("data")
    }

    /// A session of the fixture environment, its clock started.
    #[allow(dead_code)] // not every benchmark needs one
    pub async fn running_session(&mut self, kind: Kind) -> anyhow::Result<SessionView> {
        let env_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/envs/fixed");
        let view: SessionView = self
            .admin
            .call(Request::CreateSession(Box::new(CreateSession {
                budget_s: Some(3600),
                allow_missing_hardware: true,
                ..CreateSession::new(env_dir.display().to_string(), "bench", kind)
            })))
            .await?;
        Ok(self
            .admin
            .call(Request::Begin {
                session: view.id.clone(),
            })
            .await?)
    }

    /// Stops the server (in order, else killed after 10 s) and removes its data.
    pub async fn stop(mut self) {
        let _ = self.admin.send(Request::Shutdown).await;
        let _ = tokio::time::timeout(Duration::from_secs(10), async {
            while self.server.try_wait().ok().flatten().is_none() {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await;
        // The rest is Drop's.
    }
}

impl Drop for BenchServer {
    /// A benchmark that panics leaves no server or data dir behind.
    fn drop(&mut self) {
        let _ = self.server.kill();
        let _ = self.server.wait();
        // Its paused sessions' processes stay frozen for a server that never comes back.
        let namespace = rebench::sandbox::cgroup::namespace_for(&self.data_dir());
        if let Some(root) = rebench::sandbox::cgroup::CgroupRoot::detect(&namespace) {
            root.remove_all();
        }
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// A benchmark's numeric setting from the environment, else `default`.
#[allow(dead_code)] // not every benchmark has settings
pub fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

/// What typing a command into a driven shell brought back.
#[allow(dead_code)] // not every benchmark types into a shell
pub struct ShellRun {
    pub elapsed: Duration,
    pub bytes: u64,
    /// The size of the same output as asciicast v2 event lines.
    pub asciicast: u64,
    /// Times the client fell behind and attached again.
    pub fell_behind: u32,
}

/// Types `command` into `shell` and reads its output until `needle`. A
/// client that cannot keep up is dropped (as a real one would be): it
/// attaches again and looks at the screen it gets.
#[allow(dead_code)] // not every benchmark types into a shell
pub async fn run_in_shell(
    admin: &mut Client,
    session: &str,
    shell: u32,
    command: &str,
    needle: &str,
) -> anyhow::Result<ShellRun> {
    let started = Instant::now();
    admin
        .send(Request::ShellInput {
            session: session.to_string(),
            shell,
            data: b64_encode(format!("{command}\r").as_bytes()),
        })
        .await?;
    let mut run = ShellRun {
        elapsed: Duration::ZERO,
        bytes: 0,
        asciicast: 0,
        fell_behind: 0,
    };
    let mut tail = String::new();
    loop {
        let bytes = match admin.next_push().await? {
            Push::ShellOutput { data, .. } => b64_decode(&data).map_err(anyhow::Error::msg)?,
            Push::ShellDetached { .. } => {
                run.fell_behind += 1;
                let reply: AttachReply = admin
                    .call(Request::ShellAttach {
                        session: session.to_string(),
                        shell,
                        mode: AttachMode::Driver,
                    })
                    .await?;
                b64_decode(&reply.screen).map_err(anyhow::Error::msg)?
            }
            _ => continue,
        };
        run.bytes += bytes.len() as u64;
        let text = String::from_utf8_lossy(&bytes);
        // One asciicast v2 event line: [seconds, "o", "text"]
        let event = serde_json::json!([started.elapsed().as_secs_f64(), "o", text]);
        run.asciicast += event.to_string().len() as u64 + 1;
        tail.push_str(&text);
        if tail.contains(needle) {
            run.elapsed = started.elapsed();
            return Ok(run);
        }
        let keep = tail.len().saturating_sub(64);
        tail = tail[tail.floor_char_boundary(keep)..].to_string();
    }
}

/// The `q` quantile (0 to 1) of `xs`, nearest rank.
#[allow(dead_code)] // not every benchmark reports quantiles
pub fn quantile(xs: &[Duration], q: f64) -> Duration {
    let mut xs = xs.to_vec();
    xs.sort();
    xs[((xs.len() - 1) as f64 * q).round() as usize]
}

/// Milliseconds, for printing.
#[allow(dead_code)] // not every benchmark prints times
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The smallest and the median of `xs` (ratios taken round by round).
#[allow(dead_code)] // not every benchmark compares rounds
pub fn min_median(mut xs: Vec<f64>) -> (f64, f64) {
    xs.sort_by(f64::total_cmp);
    (xs[0], xs[xs.len() / 2])
}
