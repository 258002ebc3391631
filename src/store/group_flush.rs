//! Group commit: callers that ask for a flush while one runs share the next
//! one, instead of each waiting for a flush of its own (fifty agents each
//! appending an event made fifty flushes one after another).
//!
//! A caller's write is durable once a flush that *started* after it has
//! succeeded; every flush covers every caller queued before it began.
//!
//! Callers queue a reply channel and wait on it; one runner at a time
//! flushes batch after batch until no one waits. Fifty agents' appends so
//! cost one blocking thread per batch, not a parked thread each (whose
//! wake-ups were a good part of the server's time per command).

use std::sync::Mutex;

use tokio::sync::oneshot;

type Reply = oneshot::Sender<Result<(), String>>;

#[derive(Default)]
struct Queue {
    waiting: Vec<Reply>,
    /// A runner is flushing, or has been asked to start.
    running: bool,
}

#[derive(Default)]
pub struct GroupFlush {
    queue: Mutex<Queue>,
}

/// A caller's place in the queue: its answer comes on `done`; where `lead`
/// is set, no runner was going and the caller must start one (`run`).
pub struct Ticket {
    pub done: oneshot::Receiver<Result<(), String>>,
    pub lead: bool,
}

impl GroupFlush {
    /// Queues a caller whose writes are made.
    pub fn join(&self) -> Ticket {
        let (reply, done) = oneshot::channel();
        let mut queue = self.lock();
        queue.waiting.push(reply);
        let lead = !std::mem::replace(&mut queue.running, true);
        Ticket { done, lead }
    }

    /// The runner: flushes until no one waits, answering each batch with
    /// its flush's outcome. Call it once for a ticket with `lead` set. If
    /// it never runs to the end (a panic in `flush`, or dropped unrun by a
    /// runtime shutting down), its guard fails the waiting callers and the
    /// next caller starts a new runner.
    pub fn run(&self, flush: impl Fn() -> Result<(), String>) {
        let mut guard = RunnerGuard {
            group: self,
            finished: false,
        };
        loop {
            let batch = {
                let mut queue = self.lock();
                if queue.waiting.is_empty() {
                    queue.running = false;
                    guard.finished = true;
                    return;
                }
                std::mem::take(&mut queue.waiting)
            };
            let result = flush();
            for reply in batch {
                // A caller that stopped waiting needs no answer.
                let _ = reply.send(result.clone());
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Whoever holds the lead must run or let go: a runner that ends early
/// fails its callers (dropping their reply channels) and frees the lead.
struct RunnerGuard<'a> {
    group: &'a GroupFlush,
    finished: bool,
}

impl Drop for RunnerGuard<'_> {
    fn drop(&mut self) {
        if !self.finished {
            let mut queue = self.group.lock();
            queue.waiting.clear();
            queue.running = false;
        }
    }
}

/// The lead of a ticket, carried to where the runner will run: dropped
/// unrun, it lets go as a runner that ended early would.
pub struct Lead<G: AsRef<GroupFlush>> {
    group: Option<G>,
}

impl<G: AsRef<GroupFlush>> Lead<G> {
    pub fn new(group: G) -> Self {
        Lead { group: Some(group) }
    }

    pub fn run(mut self, flush: impl Fn() -> Result<(), String>) {
        if let Some(group) = self.group.take() {
            group.as_ref().run(flush);
        }
    }
}

impl<G: AsRef<GroupFlush>> Drop for Lead<G> {
    fn drop(&mut self) {
        if let Some(group) = self.group.take() {
            drop(RunnerGuard {
                group: group.as_ref(),
                finished: false,
            });
        }
    }
}

/// The answer a ticket got: a runner that ended early is a failed flush.
pub fn outcome(
    answer: Result<Result<(), String>, oneshot::error::RecvError>,
) -> Result<(), String> {
    answer.unwrap_or_else(|_| Err("the flush did not run to its end".into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A caller as the store's blocking callers are: join, lead if asked, wait.
    fn flush_blocking(
        group: &GroupFlush,
        flush: impl Fn() -> Result<(), String>,
    ) -> Result<(), String> {
        let ticket = group.join();
        if ticket.lead {
            group.run(flush);
        }
        outcome(ticket.done.blocking_recv())
    }

    #[test]
    fn callers_waiting_together_share_flushes_and_see_failures() {
        let group = Arc::new(GroupFlush::default());
        let flushes = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..16)
            .map(|_| {
                let group = group.clone();
                let flushes = flushes.clone();
                std::thread::spawn(move || {
                    flush_blocking(&group, || {
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
        let err = flush_blocking(&group, || Err("disk gone".into())).unwrap_err();
        assert_eq!(err, "disk gone");
        assert_eq!(flush_blocking(&group, || Ok(())), Ok(()));
    }

    #[test]
    fn a_caller_queued_during_a_flush_waits_for_the_next_one() {
        let group = Arc::new(GroupFlush::default());
        let first = group.join();
        assert!(first.lead);
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let flushes = Arc::new(AtomicUsize::new(0));
        let runner = {
            let (group, flushes) = (group.clone(), flushes.clone());
            std::thread::spawn(move || {
                group.run(|| {
                    let n = flushes.fetch_add(1, Ordering::SeqCst) + 1;
                    if n == 1 {
                        started_tx.send(()).unwrap();
                        go_rx.recv().unwrap();
                    }
                    Ok(())
                })
            })
        };
        started_rx.recv().unwrap();
        // Joined while the first flush runs: it did not start after this
        // caller's writes, so it must not answer this caller.
        let second = group.join();
        assert!(!second.lead, "one runner at a time");
        go_tx.send(()).unwrap();
        assert_eq!(outcome(first.done.blocking_recv()), Ok(()));
        assert_eq!(outcome(second.done.blocking_recv()), Ok(()));
        runner.join().unwrap();
        assert_eq!(flushes.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn a_runner_that_panics_or_never_runs_fails_its_callers_and_frees_the_lead() {
        let group = Arc::new(GroupFlush::default());
        let ticket = group.join();
        let panicking = group.clone();
        let panicked = std::thread::spawn(move || panicking.run(|| panic!("sled gave up")));
        assert!(panicked.join().is_err());
        assert!(outcome(ticket.done.blocking_recv()).is_err());

        // A lead dropped before it ran (a runtime shutting down).
        let ticket = group.join();
        assert!(ticket.lead, "the panicked runner let go of the lead");
        drop(Lead::new(group.clone()));
        assert!(outcome(ticket.done.blocking_recv()).is_err());

        let ticket = group.join();
        assert!(ticket.lead);
        Lead::new(group.clone()).run(|| Ok(()));
        assert_eq!(outcome(ticket.done.blocking_recv()), Ok(()));
    }
}
