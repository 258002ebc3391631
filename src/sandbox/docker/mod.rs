//! A Docker engine as a place for sessions to run (the `docker` backend):
//! connecting to it (bollard, over its unix socket), the base image rebench
//! builds without a registry, and running async engine calls from the
//! server's blocking sandbox methods.

pub mod events;
pub mod image;

use std::future::Future;
use std::io::{Read, Write};
use std::time::Duration;

use anyhow::{Context, bail};
use bollard::{ClientVersion, Docker};

/// The engine API version asked for: Debian bookworm's docker.io (20.10)
/// speaks 1.41; a newer engine is negotiated down to what both know.
const API_VERSION: ClientVersion = ClientVersion {
    major_version: 1,
    minor_version: 41,
};
/// Seconds an engine request may take (image imports are the longest).
const REQUEST_TIMEOUT_S: u64 = 600;

/// Where the default engine is: `REBENCH_DOCKER_HOST`, else `DOCKER_HOST`,
/// else the local daemon's socket.
pub fn default_endpoint() -> String {
    ["REBENCH_DOCKER_HOST", "DOCKER_HOST"]
        .iter()
        .find_map(|var| std::env::var(var).ok().filter(|v| !v.is_empty()))
        .unwrap_or_else(|| "unix:///var/run/docker.sock".to_string())
}

/// The socket path of a `unix://` endpoint (the only kind this backend
/// reaches today; `tcp://` and `ssh://` hosts come with the host pool).
pub fn socket_path(endpoint: &str) -> anyhow::Result<&str> {
    match endpoint.strip_prefix("unix://") {
        Some(path) if path.starts_with('/') => Ok(path),
        _ => bail!(
            "the Docker endpoint {endpoint:?} is not supported: give unix:///path/to/docker.sock"
        ),
    }
}

/// Whether the engine at `endpoint` answers `/_ping`, asked without a
/// runtime (the backend is chosen before any is at hand).
pub fn ping(endpoint: &str) -> anyhow::Result<()> {
    let path = socket_path(endpoint)?;
    let fail = |why: String| {
        anyhow::anyhow!(
            "the Docker engine at {endpoint} does not answer ({why}); is dockerd running?"
        )
    };
    let mut stream =
        std::os::unix::net::UnixStream::connect(path).map_err(|e| fail(e.to_string()))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .map_err(|e| fail(e.to_string()))?;
    stream
        .write_all(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
        .map_err(|e| fail(e.to_string()))?;
    let mut reply = String::new();
    let _ = stream.take(4096).read_to_string(&mut reply);
    if reply.starts_with("HTTP/1.0 200") || reply.starts_with("HTTP/1.1 200") {
        Ok(())
    } else {
        Err(fail(format!(
            "it replied {:?}",
            reply.lines().next().unwrap_or_default()
        )))
    }
}

/// A connection to one engine, named for messages (`local`, or a host's name).
#[derive(Clone)]
pub struct Engine {
    pub name: String,
    pub endpoint: String,
    pub client: Docker,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Engine({} at {})", self.name, self.endpoint)
    }
}

impl Engine {
    /// Connects (nothing is sent until the first request).
    pub fn connect(name: &str, endpoint: &str) -> anyhow::Result<Engine> {
        let path = socket_path(endpoint)?;
        let client = Docker::connect_with_unix(path, REQUEST_TIMEOUT_S, &API_VERSION)
            .with_context(|| {
                format!("connecting to the Docker engine of host {name} ({endpoint})")
            })?;
        Ok(Engine {
            name: name.to_string(),
            endpoint: endpoint.to_string(),
            client,
        })
    }

    /// What an engine error means for an operator: the host, and what to do.
    pub fn explain(&self, doing: &str, error: impl std::fmt::Display) -> String {
        format!(
            "{doing} on Docker host {} ({}): {error}",
            self.name, self.endpoint
        )
    }
}

/// Held while an image is built, one per (engine, tag) in this process:
/// sessions asking at once for an image that is not there yet wait for
/// the one build instead of each starting their own.
pub async fn build_lock(engine: &Engine, tag: &str) -> tokio::sync::OwnedMutexGuard<()> {
    static BUILDS: std::sync::OnceLock<
        std::sync::Mutex<std::collections::HashMap<String, std::sync::Arc<tokio::sync::Mutex<()>>>>,
    > = std::sync::OnceLock::new();
    let lock = BUILDS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(format!("{} {tag}", engine.endpoint))
        .or_default()
        .clone();
    lock.lock_owned().await
}

/// Runs an engine call to completion from blocking code: on a runtime's
/// worker thread (it steps aside for the wait), on a blocking-pool thread,
/// or with no runtime at all (a runtime of its own).
pub fn block_on<F>(future: F) -> F::Output
where
    F: Future + Send,
    F::Output: Send,
{
    match tokio::runtime::Handle::try_current() {
        Ok(handle) => match handle.runtime_flavor() {
            tokio::runtime::RuntimeFlavor::CurrentThread => std::thread::scope(|scope| {
                scope
                    .spawn(|| own_runtime().block_on(future))
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            }),
            _ => tokio::task::block_in_place(|| handle.block_on(future)),
        },
        Err(_) => own_runtime().block_on(future),
    }
}

fn own_runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("cannot start a runtime for an engine call: {e}"))
}
