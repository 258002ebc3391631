//! A session's spawner: one long-lived session process that starts the
//! session's commands (`rebench exec`, an agent's calls) as its own
//! children. Started once through the session's launcher, it is already in
//! the session's cgroup, jail and scrubbed environment, so a command costs
//! one fork and one exec, where going through the launcher each time cost
//! a second program start and a cgroup migration (which stalls every fork
//! on the machine while it runs). See `docs/sandbox.md`.

pub mod client;
pub mod serve;
mod wire;

pub use client::{Exit, SpawnError, Spawned, Spawner};

/// The argument that makes the small launcher program serve as a spawner.
pub const SERVE_FLAG: &str = "--serve";
