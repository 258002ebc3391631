//! One shell tab: the server's shell number and our own vt100 screen of it,
//! fed with the shell's output, with scrollback for the expert to read.

use std::cell::RefCell;

use super::keys::InputModes;
use super::screen_rows::ScreenRows;
use crate::protocol::AttachReply;

/// Lines of history kept per tab when the server does not say how many it
/// keeps (an older server); otherwise a tab keeps what the server keeps.
pub const FALLBACK_SCROLLBACK_LINES: usize = 10_000;

/// What the shell's output asks of the terminal beyond the screen itself.
#[derive(Debug, Default)]
pub struct ShellSignals {
    /// BEL characters not yet passed on to the real terminal.
    pub bells: u32,
    /// The window title the program set (OSC 0/2), shown on the tab.
    pub title: Option<String>,
    /// The program set a title since the last `take_retitled`.
    pub retitled: bool,
}

impl vt100::Callbacks for ShellSignals {
    fn audible_bell(&mut self, _: &mut vt100::Screen) {
        self.bells = self.bells.saturating_add(1);
    }

    fn set_window_title(&mut self, _: &mut vt100::Screen, title: &[u8]) {
        let text: String = String::from_utf8_lossy(title)
            .chars()
            .filter(|c| !c.is_control())
            .take(40)
            .collect();
        self.title = (!text.is_empty()).then_some(text);
        self.retitled = true;
    }
}

/// A search match: its line, and where it shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Found {
    /// Its index among all lines kept (0 = the oldest).
    pub line: usize,
    /// The scrollback offset that shows it…
    pub offset: usize,
    /// …on this row of the view.
    pub row: u16,
}

pub struct ShellTab {
    pub shell: u32,
    pub parser: vt100::Parser<ShellSignals>,
    /// Feeds `parser` output, leaving out flood lines that scroll away unseen.
    feed: crate::screen_feed::ScreenFeed,
    /// The server sent the screen (attach reply): output may be applied.
    pub attached: bool,
    pub alive: bool,
    /// Why this tab no longer shows the shell (exited, taken over).
    pub gone: Option<String>,
    /// A name the expert gave the tab (over the program's title).
    pub name: Option<String>,
    /// Output that came before the attach reply: it follows the screen the reply carries.
    early: Vec<u8>,
    /// Lines of history kept: as many as the server keeps of the shell.
    scrollback_lines: usize,
    /// The visible rows as last drawn (drawing brings them up to date).
    pub rows: RefCell<ScreenRows>,
}

/// Most output kept while waiting for an attach reply.
const EARLY_OUTPUT_MAX: usize = 4 * 1024 * 1024;

impl ShellTab {
    pub fn new(shell: u32, rows: u16, cols: u16) -> ShellTab {
        ShellTab {
            shell,
            parser: new_parser(rows, cols, FALLBACK_SCROLLBACK_LINES),
            feed: crate::screen_feed::ScreenFeed::default(),
            attached: false,
            alive: true,
            gone: None,
            name: None,
            early: Vec::new(),
            scrollback_lines: FALLBACK_SCROLLBACK_LINES,
            rows: RefCell::new(ScreenRows::default()),
        }
    }

    /// Starts over from the screen the server sent on attach (drawn at the
    /// server's size), then fits it to the pane. The tab keeps as much
    /// history as the server said it keeps (`reply.scrollback_lines`): the
    /// memory a tab takes is then the operator's setting too, and attaching
    /// again gives back all that was there.
    pub fn load_screen(&mut self, reply: &AttachReply, screen: &[u8]) {
        self.scrollback_lines = reply
            .scrollback_lines
            .unwrap_or(FALLBACK_SCROLLBACK_LINES)
            .min(crate::protocol::MAX_SCROLLBACK_LINES);
        self.parser = new_parser(reply.rows.max(1), reply.cols.max(1), self.scrollback_lines);
        self.feed.reset();
        self.rows.get_mut().changed_all();
        self.feed
            .process(&mut self.parser, self.scrollback_lines, screen);
        // The server pushes output only after taking the screen, so whatever
        // arrived before the reply comes after it.
        let early = std::mem::take(&mut self.early);
        self.feed
            .process(&mut self.parser, self.scrollback_lines, &early);
        self.parser.callbacks_mut().bells = 0;
        self.attached = true;
        self.gone = None;
    }

    /// Shell output: applied now, or kept until the attach reply.
    pub fn feed(&mut self, bytes: &[u8]) {
        if self.attached {
            let before = self.parser.screen().cursor_position();
            let at_rest = self.feed.at_rest();
            self.feed
                .process(&mut self.parser, self.scrollback_lines, bytes);
            let screen = self.parser.screen();
            let after = screen.cursor_position();
            // Printable ASCII that moved the cursor along its row by as many
            // cells as it has characters wrote that row and nothing else
            // (a wrap, a scroll or an escape would move it otherwise).
            let one_row = at_rest
                && screen.scrollback() == 0
                && after.0 == before.0
                && usize::from(after.1) == usize::from(before.1) + bytes.len()
                && bytes.iter().all(|b| (0x20..0x7f).contains(b));
            let rows = self.rows.get_mut();
            if one_row {
                rows.changed_row(after.0);
            } else {
                rows.changed_all();
            }
        } else if self.early.len() + bytes.len() <= EARLY_OUTPUT_MAX {
            self.early.extend_from_slice(bytes);
        }
    }

    /// Waiting for a (new) attach reply.
    pub fn detach_locally(&mut self) {
        self.attached = false;
        self.early.clear();
    }

    /// Whether the program set a title since the last call.
    pub fn take_retitled(&mut self) -> bool {
        std::mem::take(&mut self.parser.callbacks_mut().retitled)
    }

    /// Bells rung since the last call.
    pub fn take_bells(&mut self) -> u32 {
        std::mem::take(&mut self.parser.callbacks_mut().bells)
    }

    pub fn size(&self) -> (u16, u16) {
        self.parser.screen().size()
    }

    /// Resizes our screen; true when the size changed (the server must be told too).
    pub fn resize(&mut self, rows: u16, cols: u16) -> bool {
        let (rows, cols) = (rows.max(1), cols.max(1));
        if self.size() == (rows, cols) {
            return false;
        }
        self.parser.screen_mut().set_size(rows, cols);
        true
    }

    pub fn modes(&self) -> InputModes {
        InputModes::of(self.parser.screen())
    }

    /// Lines scrolled back from the live screen (0 = live).
    pub fn scrolled(&self) -> usize {
        self.parser.screen().scrollback()
    }

    pub fn scroll_by(&mut self, lines: isize) {
        let now = self.scrolled() as isize;
        let target = (now + lines).max(0) as usize;
        self.parser.screen_mut().set_scrollback(target);
    }

    pub fn scroll_to_top(&mut self) {
        self.parser.screen_mut().set_scrollback(usize::MAX);
    }

    pub fn scroll_to_bottom(&mut self) {
        self.parser.screen_mut().set_scrollback(0);
    }

    /// Rows `from..=to` of the view as it is now, as text (trailing blanks
    /// cut), one line each.
    pub fn view_text(&self, from: u16, to: u16) -> String {
        let (from, to) = (from.min(to), from.max(to));
        let cols = self.size().1;
        self.parser
            .screen()
            .rows(0, cols)
            .enumerate()
            .filter(|(i, _)| (from as usize..=to as usize).contains(i))
            .map(|(_, row)| row.trim_end().to_string())
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Every line of history and of the screen, oldest first, and the index
    /// of the line at the top of the view now.
    /// The index of the line at the top of the view (0 = the oldest kept),
    /// without reading any line.
    pub fn top_line(&mut self) -> usize {
        let now = self.scrolled();
        let screen = self.parser.screen_mut();
        screen.set_scrollback(usize::MAX);
        let oldest = screen.scrollback();
        screen.set_scrollback(now);
        oldest - now
    }

    pub fn lines(&mut self) -> (Vec<String>, usize) {
        let now = self.scrolled();
        let (rows, cols) = self.size();
        let rows = rows as usize;
        let screen = self.parser.screen_mut();
        screen.set_scrollback(usize::MAX);
        let oldest = screen.scrollback();
        let mut lines = vec![String::new(); oldest + rows];
        // The view at offset o shows lines oldest - o .. oldest - o + rows.
        let mut offset = oldest;
        loop {
            screen.set_scrollback(offset);
            let top = oldest - offset;
            for (i, row) in screen.rows(0, cols).enumerate().take(rows) {
                lines[top + i] = row;
            }
            if offset == 0 {
                break;
            }
            offset = offset.saturating_sub(rows);
        }
        screen.set_scrollback(now);
        (lines, oldest - now)
    }

    /// The nearest line holding `needle` (case-insensitive) before line
    /// `from` (`older`) or after it, scrolled to the top of the view.
    pub fn find(&mut self, needle: &str, from: usize, older: bool) -> Option<Found> {
        let needle = needle.to_lowercase();
        let (lines, _) = self.lines();
        let hit = |i: &usize| lines[*i].to_lowercase().contains(&needle);
        let line = if older {
            (0..from.min(lines.len())).rev().find(hit)
        } else {
            (from.saturating_add(1)..lines.len()).find(hit)
        }?;
        // To the top of the view, or as near as the history allows.
        let rows = self.size().0 as usize;
        let oldest = lines.len().saturating_sub(rows);
        let offset = oldest.saturating_sub(line);
        self.parser.screen_mut().set_scrollback(offset);
        Some(Found {
            line,
            offset,
            row: (line - (oldest - offset)) as u16,
        })
    }

    /// The tab's name: the expert's, else the program's title, else `shell`.
    pub fn label(&self) -> String {
        match (&self.name, &self.parser.callbacks().title) {
            (Some(name), _) => name.clone(),
            (None, Some(title)) => title.clone(),
            (None, None) => "shell".into(),
        }
    }
}

fn new_parser(rows: u16, cols: u16, scrollback_lines: usize) -> vt100::Parser<ShellSignals> {
    vt100::Parser::new_with_callbacks(rows, cols, scrollback_lines, ShellSignals::default())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An attach reply of a server that keeps `lines` lines of history.
    fn reply(rows: u16, cols: u16, lines: Option<usize>) -> AttachReply {
        AttachReply {
            shell: 1,
            cols,
            rows,
            screen: String::new(),
            alive: true,
            scrollback_lines: lines,
        }
    }

    #[test]
    fn output_bells_titles_and_scrollback() {
        let mut tab = ShellTab::new(1, 5, 20);
        tab.feed(b" world");
        tab.load_screen(&reply(5, 20, Some(100)), b"hello");
        assert!(tab.parser.screen().contents().starts_with("hello world"));
        tab.feed(b"\x07\x1b]2;vim main.py\x07");
        assert_eq!(tab.take_bells(), 1);
        assert_eq!(tab.take_bells(), 0);
        assert_eq!(tab.label(), "vim main.py");
        for i in 0..50 {
            tab.feed(format!("\r\nline {i}").as_bytes());
        }
        tab.scroll_by(10);
        assert_eq!(tab.scrolled(), 10);
        tab.scroll_by(-100);
        assert_eq!(tab.scrolled(), 0);
        tab.scroll_to_top();
        assert!(tab.scrolled() > 40);
        assert!(tab.resize(10, 30));
        assert!(!tab.resize(10, 30));
        assert_eq!(tab.size(), (10, 30));
    }

    /// Lines of history the tab holds now.
    fn history(tab: &mut ShellTab) -> usize {
        tab.parser.screen_mut().set_scrollback(usize::MAX);
        let lines = tab.parser.screen().scrollback();
        tab.parser.screen_mut().set_scrollback(0);
        lines
    }

    #[test]
    fn a_tab_keeps_as_much_history_as_the_server_keeps() {
        let many_lines = |tab: &mut ShellTab| {
            for i in 0..300 {
                tab.feed(format!("line {i}\r\n").as_bytes());
            }
        };
        let mut tab = ShellTab::new(1, 5, 20);
        tab.load_screen(&reply(5, 20, Some(40)), b"");
        many_lines(&mut tab);
        assert_eq!(history(&mut tab), 40);
        // Attached again to a server that keeps more: so does the tab.
        tab.load_screen(&reply(5, 20, Some(200)), b"");
        many_lines(&mut tab);
        assert_eq!(history(&mut tab), 200);
        // An older server says nothing: the tab keeps its own number.
        let mut tab = ShellTab::new(1, 5, 20);
        tab.load_screen(&reply(5, 20, None), b"");
        many_lines(&mut tab);
        // (300 lines is less than it keeps: all but the screen's are history.)
        assert_eq!(history(&mut tab), 300 - 4);
        // A reply asking for more than any server keeps gets the most.
        tab.load_screen(&reply(5, 20, Some(usize::MAX)), b"");
        assert_eq!(tab.scrollback_lines, crate::protocol::MAX_SCROLLBACK_LINES);
    }

    #[test]
    fn an_echo_names_its_row_and_anything_else_every_row() {
        let mut tab = ShellTab::new(1, 5, 20);
        tab.load_screen(&reply(5, 20, Some(100)), b"$ ");
        let full = |tab: &ShellTab| {
            let mut fresh = ScreenRows::default();
            fresh.update(tab.parser.screen());
            let area = ratatui::layout::Rect::new(0, 0, 20, 5);
            let mut a = ratatui::buffer::Buffer::empty(area);
            let mut b = ratatui::buffer::Buffer::empty(area);
            fresh.render(area, &mut a);
            tab.rows.borrow().render(area, &mut b);
            assert_eq!(a, b, "the rows kept differ from the screen");
        };
        tab.rows.borrow_mut().update(tab.parser.screen());
        tab.feed(b"l");
        tab.feed(b"s");
        assert_eq!(tab.rows.borrow_mut().update(tab.parser.screen()), vec![0]);
        full(&tab);
        // A line feed, an escape, a key cut in two, a wrap: every row looked at.
        for bytes in [
            &b"\r\nout\r\n$ "[..],
            b"\x1b[2;1H",
            b"\x1b",
            b"[31mx",
            b"\x1b[2J",
            &[b'w'; 40],
        ] {
            tab.feed(bytes);
            let changed = tab.rows.borrow_mut().update(tab.parser.screen());
            full(&tab);
            tab.feed(b"k");
            assert!(tab.rows.borrow_mut().update(tab.parser.screen()).len() <= 1);
            full(&tab);
            assert!(!changed.is_empty() || bytes == b"\x1b");
        }
    }

    #[test]
    fn search_finds_lines_in_history_and_brings_them_into_view() {
        let mut tab = ShellTab::new(1, 5, 30);
        tab.load_screen(&reply(5, 30, Some(100)), b"");
        for i in 0..40 {
            tab.feed(format!("line {i}{}\r\n", if i == 7 { " ERROR here" } else { "" }).as_bytes());
        }
        let (lines, top) = tab.lines();
        assert_eq!(lines[0], "line 0");
        assert_eq!(lines[39], "line 39");
        assert_eq!(top, lines.len() - 5, "live: the last five lines");
        assert_eq!(tab.top_line(), top);
        let found = tab.find("error", top, true).expect("a match");
        assert_eq!((found.line, found.row), (7, 0));
        assert_eq!(found.offset, tab.scrolled());
        assert_eq!(tab.lines().1, 7, "the match is the view's top line");
        assert!(
            tab.parser
                .screen()
                .contents()
                .starts_with("line 7 ERROR here")
        );
        // Nothing older; newer from the match finds nothing else either.
        assert_eq!(tab.find("error", 7, true), None);
        assert_eq!(tab.find("error", 7, false), None);
        assert_eq!(tab.find("line 30", 7, false).map(|f| f.line), Some(30));
        // Near the live end it cannot be the top line: the row says where it is.
        let last = tab.find("line 39", 30, false).expect("a match");
        assert_eq!((last.offset, last.row), (0, 3));
        assert_eq!(tab.find("no such text", 40, true), None);
    }
}
