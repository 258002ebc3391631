//! Running an environment's scorer and checking protected files.
//!
//! `runner` spawns the scorer and bounds what it may cost us (time, output,
//! stray processes); `result` turns its last stdout line into a score;
//! `protected` detects tampering with files the scorer relies on.

mod capture;
mod duration_text;
mod io_text;
mod lenient_json;
pub mod protected;
pub mod result;
pub mod runner;

pub use runner::{ScorerInvocation, ScorerOutcome, run_scorer};

/// Default cap on the scorer output (stdout + stderr) kept in an outcome.
pub const OUTPUT_LIMIT: usize = 64 * 1024;
