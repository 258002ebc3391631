//! rebench: timed research-engineering sessions for humans and agents.
//!
//! Layers, inner to outer: `environment` → `session` → `store` → `sandbox` →
//! `scoring` → `server` → `protocol`/`client` → `cli`. Inner layers never
//! import outer ones (the protocol's plain types are shared by both ends).

pub mod cli;
pub mod client;
pub mod command_line;
pub mod environment;
pub mod paths;
pub mod protocol;
pub mod recording;
pub mod report;
pub mod sandbox;
pub mod scoring;
pub mod server;
pub mod session;
pub mod settings;
pub mod store;
pub mod taskstd;
pub mod tui;
