//! What the benchmarks that need a running server share: a server of their
//! own on a scratch data dir, its admin connection, a running session of
//! the fixture environment, and the stop.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rebench::client::Client;
use rebench::protocol::{CreateSession, Request, SessionView};
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
    #[allow(dead_code)] // not every benchmark looks into it
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
        let _ = self.server.kill();
        let _ = self.server.wait();
        let _ = std::fs::remove_dir_all(&self.root);
    }
}
