//! A shell's vt100 screen on the server, fed off the reading path when
//! output floods: small output (an echo, a prompt) is parsed as it comes;
//! a large read, or anything while a parse is under way, queues, and a
//! parse job takes the whole queue at once. A backlog holds enough lines
//! for `ScreenFeed` to leave out what scrolls away unseen, where one 16 KiB
//! read never does, and the reads go on while it parses.
//!
//! Order: whoever needs the screen (an attach, a resize, a cursor-position
//! query) catches it up under the shell's lock, and the parse job takes
//! the screen's own lock before it lets go of the shell's, so bytes are
//! always parsed in the order they came.

use std::sync::{Arc, Mutex, MutexGuard};

use crate::screen_feed::ScreenFeed;

/// Reads this large or larger are parsed off the reading path (a PTY
/// hands a flood over in reads of about 4 KiB; an echo is a few bytes).
const DEFER_FROM: usize = 1024;
/// A backlog past this is parsed by the reader itself (memory stays bounded
/// when the parse job cannot keep up).
const BACKLOG_MAX: usize = 4 * 1024 * 1024;

/// The parser, and what feeds it.
pub struct ParsedScreen {
    pub parser: vt100::Parser,
    feed: ScreenFeed,
    /// The lines of history `parser` keeps.
    pub scrollback: usize,
}

impl ParsedScreen {
    pub fn new(rows: u16, cols: u16, scrollback: usize) -> Self {
        ParsedScreen {
            parser: vt100::Parser::new(rows, cols, scrollback),
            feed: ScreenFeed::default(),
            scrollback,
        }
    }

    fn feed(&mut self, bytes: &[u8]) {
        self.feed.process(&mut self.parser, self.scrollback, bytes);
    }
}

/// The screen and the output not yet fed to it; lives under the shell's lock.
pub struct ScreenState {
    parsed: Arc<Mutex<ParsedScreen>>,
    backlog: Vec<u8>,
    /// A parse job runs (or is about to).
    parsing: bool,
}

impl ScreenState {
    pub fn new(rows: u16, cols: u16, scrollback: usize) -> Self {
        ScreenState {
            parsed: Arc::new(Mutex::new(ParsedScreen::new(rows, cols, scrollback))),
            backlog: Vec::new(),
            parsing: false,
        }
    }

    /// Takes new output. Returns true when the caller must start a parse
    /// job (`parse_job`) for the backlog.
    #[must_use]
    pub fn take(&mut self, bytes: &[u8]) -> bool {
        if !self.parsing && bytes.len() < DEFER_FROM {
            lock(&self.parsed).feed(bytes);
            return false;
        }
        self.backlog.extend_from_slice(bytes);
        if self.backlog.len() > BACKLOG_MAX {
            drop(self.caught_up());
            return false;
        }
        let start = !self.parsing;
        self.parsing = true;
        start
    }

    /// The screen with every byte so far fed to it.
    pub fn caught_up(&mut self) -> MutexGuard<'_, ParsedScreen> {
        // Waits for the batch a parse job holds: it came before the backlog.
        let mut parsed = lock(&self.parsed);
        if !self.backlog.is_empty() {
            parsed.feed(&self.backlog);
            self.backlog.clear();
        }
        parsed
    }

    /// For the parse job: the next batch and the screen to feed it to, or
    /// None (the job ends) when nothing is left.
    fn next_batch(&mut self) -> Option<(Vec<u8>, Arc<Mutex<ParsedScreen>>)> {
        if self.backlog.is_empty() {
            self.parsing = false;
            return None;
        }
        Some((std::mem::take(&mut self.backlog), self.parsed.clone()))
    }
}

/// A parse job: feeds the backlog to the screen until none is left.
/// `state` locks the shell and gives its screen state.
pub fn parse_job<G>(mut state: impl FnMut() -> G)
where
    G: std::ops::DerefMut<Target = ScreenState>,
{
    loop {
        let batch;
        let parsed;
        let mut screen;
        {
            let mut shell = state();
            let Some((next, target)) = shell.next_batch() else {
                return;
            };
            batch = next;
            parsed = target;
            // Before the shell's lock goes: nobody catches up in between.
            screen = lock(&parsed);
        }
        screen.feed(&batch);
    }
}

fn lock(parsed: &Mutex<ParsedScreen>) -> MutexGuard<'_, ParsedScreen> {
    // A panic mid-parse leaves a screen that is at worst wrong to look at.
    parsed.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::screen_feed::everything;

    fn flood(from: usize, to: usize) -> Vec<u8> {
        (from..to)
            .flat_map(|i| format!("line {i}\r\n").into_bytes())
            .collect()
    }

    #[test]
    fn small_output_is_parsed_at_once_and_floods_wait_for_a_job() {
        let mut state = ScreenState::new(5, 20, 10);
        assert!(!state.take(b"$ ls\r\n"));
        assert!(!state.take(&[b'x'; DEFER_FROM - 1]));
        assert!(state.backlog.is_empty(), "parsed as it came");
        let big = flood(0, 2000);
        assert!(state.take(&big), "a flood asks for a job");
        assert!(
            !state.take(b"x"),
            "one job at a time; this queues behind it"
        );
        assert_eq!(state.backlog.len(), big.len() + 1);
    }

    #[test]
    fn a_backlog_past_its_bound_is_parsed_by_the_reader() {
        let mut state = ScreenState::new(5, 20, 10);
        let mut reference = vt100::Parser::new(5, 20, 10);
        let mut lines = 0;
        assert!(
            state.take(&flood(0, 1000)),
            "the first flood asks for a job"
        );
        reference.process(&flood(0, 1000));
        // The job never comes (it cannot keep up): the reader takes over.
        while state.backlog.len() <= BACKLOG_MAX - 20_000 {
            let chunk = flood(1000 + lines, 1000 + lines + 1000);
            reference.process(&chunk);
            assert!(!state.take(&chunk), "one job at a time");
            lines += 1000;
        }
        let last = flood(1000 + lines, 1000 + lines + 2000);
        reference.process(&last);
        assert!(!state.take(&last));
        assert!(state.backlog.is_empty(), "parsed, not held past the bound");
        assert_eq!(
            everything(&mut lock(&state.parsed).parser),
            everything(&mut reference)
        );
    }

    #[test]
    fn a_job_and_a_catch_up_give_the_screen_of_every_byte_in_order() {
        let shell = Mutex::new(ScreenState::new(5, 20, 10));
        let mut reference = vt100::Parser::new(5, 20, 10);
        let chunks = [
            flood(0, 3000),
            b"\x1b[1mbold\x1b[m\r\n".to_vec(),
            flood(3000, 5000),
            b"$ ".to_vec(),
        ];
        let mut start = false;
        for chunk in &chunks {
            reference.process(chunk);
            start |= lock_state(&shell).take(chunk);
        }
        assert!(start);
        // The job runs on another thread while more output comes and an
        // attach catches up.
        let job = std::thread::scope(|scope| {
            let job = scope.spawn(|| parse_job(|| lock_state(&shell)));
            let tail = flood(5000, 5600);
            reference.process(&tail);
            // A job that has already ended asks for another, as on_output would start.
            let again = lock_state(&shell).take(&tail);
            let mut state = lock_state(&shell);
            let mut seen = state.caught_up();
            let attached = everything(&mut seen.parser);
            drop(seen);
            drop(state);
            job.join().unwrap();
            if again {
                parse_job(|| lock_state(&shell));
            }
            attached
        });
        assert_eq!(job, everything(&mut reference));
        let mut state = lock_state(&shell);
        assert!(state.backlog.is_empty());
        assert!(!state.parsing, "the job ended");
        assert_eq!(everything(&mut state.caught_up().parser), job);
    }

    fn lock_state(shell: &Mutex<ScreenState>) -> MutexGuard<'_, ScreenState> {
        shell.lock().unwrap()
    }
}
