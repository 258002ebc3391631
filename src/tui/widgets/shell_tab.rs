//! One shell tab: the server's shell number and our own vt100 screen of it,
//! fed with the shell's output, with scrollback for the expert to read.

use super::keys::InputModes;

/// Lines of history kept per tab.
pub const SCROLLBACK_LINES: usize = 10_000;

/// What the shell's output asks of the terminal beyond the screen itself.
#[derive(Debug, Default)]
pub struct ShellSignals {
    /// BEL characters not yet passed on to the real terminal.
    pub bells: u32,
    /// The window title the program set (OSC 0/2), shown on the tab.
    pub title: Option<String>,
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
    }
}

pub struct ShellTab {
    pub shell: u32,
    pub parser: vt100::Parser<ShellSignals>,
    /// The server sent the screen (attach reply): output may be applied.
    pub attached: bool,
    pub alive: bool,
    /// Why this tab no longer shows the shell (exited, taken over).
    pub gone: Option<String>,
    /// Output that came before the attach reply: it follows the screen the reply carries.
    early: Vec<u8>,
}

/// Most output kept while waiting for an attach reply.
const EARLY_OUTPUT_MAX: usize = 4 * 1024 * 1024;

impl ShellTab {
    pub fn new(shell: u32, rows: u16, cols: u16) -> ShellTab {
        ShellTab {
            shell,
            parser: new_parser(rows, cols),
            attached: false,
            alive: true,
            gone: None,
            early: Vec::new(),
        }
    }

    /// Starts over from the screen the server sent on attach (drawn at the
    /// server's size), then fits it to the pane.
    pub fn load_screen(&mut self, rows: u16, cols: u16, screen: &[u8]) {
        self.parser = new_parser(rows.max(1), cols.max(1));
        self.parser.process(screen);
        // The server pushes output only after taking the screen, so whatever
        // arrived before the reply comes after it.
        let early = std::mem::take(&mut self.early);
        self.parser.process(&early);
        self.parser.callbacks_mut().bells = 0;
        self.attached = true;
        self.gone = None;
    }

    /// Shell output: applied now, or kept until the attach reply.
    pub fn feed(&mut self, bytes: &[u8]) {
        if self.attached {
            self.parser.process(bytes);
        } else if self.early.len() + bytes.len() <= EARLY_OUTPUT_MAX {
            self.early.extend_from_slice(bytes);
        }
    }

    /// Waiting for a (new) attach reply.
    pub fn detach_locally(&mut self) {
        self.attached = false;
        self.early.clear();
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

    /// The tab's name: the program's title, else `shell`.
    pub fn label(&self) -> String {
        match &self.parser.callbacks().title {
            Some(t) => t.clone(),
            None => "shell".into(),
        }
    }
}

fn new_parser(rows: u16, cols: u16) -> vt100::Parser<ShellSignals> {
    vt100::Parser::new_with_callbacks(rows, cols, SCROLLBACK_LINES, ShellSignals::default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_bells_titles_and_scrollback() {
        let mut tab = ShellTab::new(1, 5, 20);
        tab.feed(b" world");
        tab.load_screen(5, 20, b"hello");
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
}
