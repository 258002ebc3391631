//! Waiting for a lost server: a UI whose server went away (shut down in
//! order, or the connection broke) keeps its screen and tries again with
//! backoff (1, 2, 4, 8, then every 15 s) instead of exiting.

/// The longest wait between two tries.
pub const RECONNECT_MAX_GAP_S: f64 = 15.0;

/// Set while the server is away. Times are the UI's monotonic seconds.
#[derive(Debug, Clone, PartialEq)]
pub struct Reconnect {
    /// Tries made so far.
    pub attempts: u32,
    /// What happened, for the screen.
    pub why: String,
    /// An orderly shutdown (running sessions are paused, `server_shutdown`).
    pub shutdown: bool,
    /// When the next try is due.
    pub next_s: f64,
    /// Why the last try failed.
    pub last_error: Option<String>,
}

impl Reconnect {
    /// The server was lost at `now_s`; the first try is a second later.
    /// Losing it again right after a reconnection keeps the count of tries.
    pub fn lost(previous: Option<&Reconnect>, why: String, shutdown: bool, now_s: f64) -> Self {
        Reconnect {
            attempts: previous.map_or(0, |r| r.attempts),
            why,
            shutdown,
            next_s: now_s + 1.0,
            last_error: None,
        }
    }

    /// A try failed: the next one after a longer wait.
    pub fn failed(&mut self, why: String, now_s: f64) {
        self.attempts += 1;
        let gap = 2f64
            .powi(self.attempts.min(4) as i32)
            .min(RECONNECT_MAX_GAP_S);
        self.next_s = now_s + gap;
        self.last_error = Some(why);
    }

    /// Seconds until the next try.
    pub fn wait_s(&self, now_s: f64) -> f64 {
        (self.next_s - now_s).max(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tries_back_off_to_fifteen_seconds_and_keep_their_count() {
        let mut r = Reconnect::lost(None, "gone".into(), true, 10.0);
        assert_eq!(r.next_s, 11.0);
        let mut gaps = Vec::new();
        for _ in 0..6 {
            r.failed("refused".into(), 100.0);
            gaps.push(r.next_s - 100.0);
        }
        assert_eq!(gaps, [2.0, 4.0, 8.0, 15.0, 15.0, 15.0]);
        assert_eq!(r.last_error.as_deref(), Some("refused"));
        let again = Reconnect::lost(Some(&r), "gone again".into(), false, 200.0);
        assert_eq!(again.attempts, 6);
        assert!(again.last_error.is_none());
        assert_eq!(again.wait_s(200.5), 0.5);
    }
}
