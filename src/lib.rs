//! rebench: timed research-engineering sessions for humans and agents.
//!
//! Layers, inner to outer: `paths`/`settings`/`command_line` →
//! `environment` → `session` → `store` → `sandbox` → `scoring`/`taskstd` →
//! `protocol` → `server` → `client` → `recording`/`report`/`campaign` → `tui` →
//! `cli`.
//! Inner layers never use outer ones (`tests/architecture.rs` checks it);
//! docs/architecture.md says where each kind of change goes.

pub mod campaign;
pub mod cli;
pub mod client;
pub mod command_line;
pub mod environment;
pub mod hardware;
pub mod inspect;
pub mod paths;
pub mod protocol;
pub mod recording;
pub mod report;
pub mod sandbox;
pub mod scoring;
pub mod screen_feed;
pub mod server;
pub mod session;
pub mod settings;
pub mod socket;
pub mod store;
pub mod taskstd;
pub mod tui;
