//! Frames on the real terminal, two kinds. A full frame goes through
//! ratatui: everything is rendered and diffed against the last frame. A
//! partial frame redraws only the rows an app names (a key's echo changes
//! one): they are diffed against the copy of the screen kept here and only
//! their difference is written, skipping the rest of the screen's
//! rendering, clearing and diffing. The copy keeps the two kinds honest:
//! before a full frame that follows partial ones, ratatui's idea of the last
//! frame is set to it, so nothing a partial frame wrote is left stale.

use ratatui::backend::Backend;
use ratatui::buffer::{Buffer, Cell};
use ratatui::layout::{Position, Rect};
use ratatui::{Frame, Terminal};

/// What a partial frame redraws: rows of the screen (absolute), and where
/// the cursor goes after (None hides it).
#[derive(Debug, Clone, PartialEq)]
pub struct PartialFrame {
    pub rows: Vec<u16>,
    pub cursor: Option<Position>,
}

/// The screen as the terminal shows it, and whether partial frames changed
/// it since ratatui's last frame.
#[derive(Default)]
pub struct Frames {
    shown: Option<Buffer>,
    patched: bool,
}

impl Frames {
    /// Renders and draws everything.
    pub fn full<B: Backend>(
        &mut self,
        terminal: &mut Terminal<B>,
        render: impl FnOnce(&mut Frame),
    ) -> Result<(), B::Error> {
        if self.patched
            && let Some(shown) = &self.shown
        {
            // ratatui diffs against its previous buffer, which the partial
            // frames never touched: make the screen's copy that buffer.
            let current = terminal.current_buffer_mut();
            if current.area == shown.area {
                current.content.clone_from_slice(&shown.content);
                terminal.swap_buffers();
            }
        }
        let done = terminal.draw(render)?;
        match &mut self.shown {
            Some(shown) => shown.clone_from(done.buffer),
            None => self.shown = Some(done.buffer.clone()),
        }
        self.patched = false;
        Ok(())
    }

    /// Redraws the rows `frame` names: `render` draws them into the copy of
    /// the screen. Returns false, drawing nothing, when there is no full
    /// frame yet to start from.
    pub fn partial<B: Backend>(
        &mut self,
        terminal: &mut Terminal<B>,
        frame: &PartialFrame,
        render: impl FnOnce(&mut Buffer),
    ) -> Result<bool, B::Error> {
        let Some(shown) = &mut self.shown else {
            return Ok(false);
        };
        let area = shown.area;
        let rows: Vec<u16> = frame
            .rows
            .iter()
            .copied()
            .filter(|y| (area.top()..area.bottom()).contains(y))
            .collect();
        let before: Vec<Buffer> = rows.iter().map(|&y| row_of(shown, y)).collect();
        render(shown);
        let mut updates: Vec<(u16, u16, Cell)> = Vec::new();
        for (old, &y) in before.iter().zip(&rows) {
            let new = row_of(shown, y);
            updates.extend(
                old.diff(&new)
                    .into_iter()
                    .map(|(x, y, cell)| (x, y, cell.clone())),
            );
        }
        if !updates.is_empty() {
            terminal
                .backend_mut()
                .draw(updates.iter().map(|(x, y, cell)| (*x, *y, cell)))?;
        }
        match frame.cursor {
            Some(at) => {
                terminal.show_cursor()?;
                terminal.set_cursor_position(at)?;
            }
            None => terminal.hide_cursor()?,
        }
        Backend::flush(terminal.backend_mut())?;
        self.patched = true;
        Ok(true)
    }
}

/// Row `y` of `buf`, as a buffer of its own (at its place).
fn row_of(buf: &Buffer, y: u16) -> Buffer {
    let row = Rect::new(buf.area.x, y, buf.area.width, 1);
    let start = buf.index_of(row.x, y);
    let mut out = Buffer::empty(row);
    out.content
        .clone_from_slice(&buf.content[start..start + usize::from(row.width)]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::backend::TestBackend;
    use ratatui::widgets::{Paragraph, Widget};

    /// A screen of text lines, drawn fully.
    fn lines(text: &[&str]) -> impl Fn(&mut Buffer) {
        let text: Vec<String> = text.iter().map(|s| s.to_string()).collect();
        move |buf: &mut Buffer| {
            for (y, line) in text.iter().enumerate() {
                let area = Rect::new(0, y as u16, buf.area.width, 1);
                // Clear the row, then draw it: as a pane's row is drawn.
                for x in 0..area.width {
                    buf[(x, y as u16)] = Cell::default();
                }
                Paragraph::new(line.as_str()).render(area, buf);
            }
        }
    }

    fn screen_text(terminal: &Terminal<TestBackend>) -> Vec<String> {
        let buf = terminal.backend().buffer();
        (0..buf.area.height)
            .map(|y| {
                (0..buf.area.width)
                    .map(|x| buf[(x, y)].symbol().to_string())
                    .collect::<String>()
                    .trim_end()
                    .to_string()
            })
            .collect()
    }

    #[test]
    fn a_partial_frame_writes_only_the_rows_it_names() {
        let mut terminal = Terminal::new(TestBackend::new(10, 3)).unwrap();
        let mut frames = Frames::default();
        let frame = PartialFrame {
            rows: vec![1],
            cursor: Some(Position::new(3, 1)),
        };
        // Nothing to patch before the first full frame.
        assert!(!frames.partial(&mut terminal, &frame, |_| {}).unwrap());
        frames
            .full(&mut terminal, |f| {
                lines(&["head", "$ ", "foot"])(f.buffer_mut())
            })
            .unwrap();
        assert!(
            frames
                .partial(
                    &mut terminal,
                    &frame,
                    |buf| lines(&["HEAD", "$ x", "FOOT"])(buf)
                )
                .unwrap()
        );
        // Row 1 changed; rows 0 and 2 were not named, so not written.
        assert_eq!(screen_text(&terminal), ["head", "$ x", "foot"]);
        terminal
            .backend_mut()
            .assert_cursor_position(Position::new(3, 1));
    }

    #[test]
    fn a_full_frame_after_partial_ones_leaves_nothing_stale() {
        let mut terminal = Terminal::new(TestBackend::new(10, 3)).unwrap();
        let mut frames = Frames::default();
        frames
            .full(&mut terminal, |f| {
                lines(&["head", "$ ", "foot"])(f.buffer_mut())
            })
            .unwrap();
        let echo = PartialFrame {
            rows: vec![1],
            cursor: None,
        };
        frames
            .partial(&mut terminal, &echo, |buf| {
                lines(&["head", "$ xyz", "foot"])(buf)
            })
            .unwrap();
        // The full frame's row 1 is what ratatui last drew there ("$ "):
        // without the copy, its diff would find nothing to write and the
        // partial frame's "xyz" would stay on the screen.
        frames
            .full(&mut terminal, |f| {
                lines(&["head 2", "$ ", "foot"])(f.buffer_mut())
            })
            .unwrap();
        assert_eq!(screen_text(&terminal), ["head 2", "$", "foot"]);
        // And ratatui's own diffs go on from the right place.
        frames
            .full(&mut terminal, |f| {
                lines(&["head 3", "$ a", "foot"])(f.buffer_mut())
            })
            .unwrap();
        assert_eq!(screen_text(&terminal), ["head 3", "$ a", "foot"]);
    }

    #[test]
    fn wide_letters_in_a_partial_frame_are_written_once() {
        let mut terminal = Terminal::new(TestBackend::new(10, 2)).unwrap();
        let mut frames = Frames::default();
        frames
            .full(&mut terminal, |f| lines(&["ab", "cd"])(f.buffer_mut()))
            .unwrap();
        let frame = PartialFrame {
            rows: vec![0],
            cursor: None,
        };
        frames
            .partial(&mut terminal, &frame, |buf| lines(&["你好x", "cd"])(buf))
            .unwrap();
        // What ratatui writes going from the one screen to the other (a
        // cell a wide letter covers is not written: the terminal's own).
        let mut expected = Terminal::new(TestBackend::new(10, 2)).unwrap();
        expected
            .draw(|f| lines(&["ab", "cd"])(f.buffer_mut()))
            .unwrap();
        expected
            .draw(|f| lines(&["你好x", "cd"])(f.buffer_mut()))
            .unwrap();
        assert_eq!(terminal.backend().buffer(), expected.backend().buffer());
    }
}
