//! Group commit: callers that ask for a flush while one runs share the next
//! one, instead of each waiting for a flush of its own (fifty agents each
//! appending an event made fifty flushes one after another).
//!
//! A caller's write is durable once a flush that *started* after it has
//! succeeded; every flush covers every write made before it began.

use std::sync::{Condvar, Mutex};

#[derive(Default)]
struct State {
    /// Tickets handed out (one per caller).
    issued: u64,
    /// Every ticket up to this one is covered by a finished flush.
    finished: u64,
    /// Every ticket up to this one is covered by a successful flush.
    durable: u64,
    running: bool,
    last_error: Option<String>,
}

#[derive(Default)]
pub struct GroupFlush {
    state: Mutex<State>,
    done: Condvar,
}

impl GroupFlush {
    /// Returns once everything written before the call is durable (or the
    /// flush that should have made it so failed). `flush` runs in one
    /// caller's thread, for all callers waiting then.
    pub fn flush(&self, flush: impl Fn() -> Result<(), String>) -> Result<(), String> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.issued += 1;
        let ticket = state.issued;
        loop {
            if state.durable >= ticket {
                return Ok(());
            }
            if state.finished >= ticket {
                return Err(state
                    .last_error
                    .clone()
                    .unwrap_or_else(|| "the flush failed".into()));
            }
            if state.running {
                state = self.done.wait(state).unwrap_or_else(|e| e.into_inner());
                continue;
            }
            // Ours to run: it covers every ticket issued so far.
            state.running = true;
            let covers = state.issued;
            drop(state);
            let result = flush();
            state = self.state.lock().unwrap_or_else(|e| e.into_inner());
            state.running = false;
            state.finished = state.finished.max(covers);
            match result {
                Ok(()) => state.durable = state.durable.max(covers),
                Err(e) => state.last_error = Some(e),
            }
            self.done.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn callers_waiting_together_share_flushes_and_see_failures() {
        let group = Arc::new(GroupFlush::default());
        let flushes = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..16)
            .map(|_| {
                let group = group.clone();
                let flushes = flushes.clone();
                std::thread::spawn(move || {
                    group.flush(|| {
                        flushes.fetch_add(1, Ordering::SeqCst);
                        std::thread::sleep(std::time::Duration::from_millis(30));
                        Ok(())
                    })
                })
            })
            .collect();
        for t in threads {
            assert_eq!(t.join().unwrap(), Ok(()));
        }
        let n = flushes.load(Ordering::SeqCst);
        assert!((1..16).contains(&n), "{n} flushes for 16 callers");

        // A failed flush fails its callers; a later success serves the next.
        let err = group.flush(|| Err("disk gone".into())).unwrap_err();
        assert_eq!(err, "disk gone");
        assert_eq!(group.flush(|| Ok(())), Ok(()));
    }
}
