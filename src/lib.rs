//! rebench: timed research-engineering sessions for humans and agents.
//!
//! Layers, inner to outer: `environment` → `session` → `store` → `sandbox` →
//! `scoring` → `server` → `protocol`/`client`. Inner layers never import outer ones.

pub mod environment;
pub mod sandbox;
pub mod scoring;
