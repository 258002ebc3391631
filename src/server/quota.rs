//! A session's recording quota: terminal output and keystrokes are recorded
//! up to a limit per session (`REBENCH_RECORDING_QUOTA_MB`, default 1024),
//! so that one flooding shell cannot fill the disk every session records
//! to. Past it the shells go on, unrecorded, and the session's log says so
//! once, with where it stopped.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The operator's setting, in MiB.
pub const QUOTA_VAR: &str = "REBENCH_RECORDING_QUOTA_MB";
const DEFAULT_MB: u64 = 1024;

pub struct RecordingQuota {
    limit: u64,
    used: AtomicU64,
    exceeded: AtomicBool,
}

/// What recording `bytes` more may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Charge {
    Record,
    /// The first chunk past the limit: not recorded; say so now.
    JustExceeded,
    /// Past the limit already.
    Skip,
}

impl RecordingQuota {
    pub fn new(limit: u64) -> RecordingQuota {
        RecordingQuota {
            limit,
            used: AtomicU64::new(0),
            exceeded: AtomicBool::new(false),
        }
    }

    /// The operator's limit (`REBENCH_RECORDING_QUOTA_MB`), else 1 GiB.
    pub fn limit_from_env() -> u64 {
        std::env::var(QUOTA_VAR)
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(DEFAULT_MB)
            .saturating_mul(1024 * 1024)
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    pub fn charge(&self, bytes: usize) -> Charge {
        if self.exceeded.load(Ordering::Acquire) {
            return Charge::Skip;
        }
        let before = self.used.fetch_add(bytes as u64, Ordering::AcqRel);
        if before.saturating_add(bytes as u64) <= self.limit {
            return Charge::Record;
        }
        if self.exceeded.swap(true, Ordering::AcqRel) {
            Charge::Skip
        } else {
            Charge::JustExceeded
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_is_recorded_up_to_the_limit_and_the_crossing_is_told_once() {
        let quota = RecordingQuota::new(10);
        assert_eq!(quota.charge(6), Charge::Record);
        assert_eq!(quota.charge(4), Charge::Record);
        assert_eq!(quota.charge(1), Charge::JustExceeded);
        assert_eq!(quota.charge(1), Charge::Skip);
        assert_eq!(quota.charge(0), Charge::Skip);
    }
}
