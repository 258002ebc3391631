//! The part of a terminal screen that fits a pane: the whole screen when it
//! fits, else a window onto it that follows the cursor. Shared by the
//! proctor's shell mirrors and the replay player.

use tui_term::widget::Screen;

/// The part of a screen that fits `width` × `height`, following the cursor.
pub struct Viewport<'a> {
    pub screen: &'a vt100::Screen,
    pub row: u16,
    pub col: u16,
}

impl<'a> Viewport<'a> {
    pub fn follow_cursor(screen: &'a vt100::Screen, width: u16, height: u16) -> Viewport<'a> {
        let (rows, cols) = screen.size();
        let (cursor_row, cursor_col) = screen.cursor_position();
        let offset = |cursor: u16, size: u16, room: u16| {
            if size <= room {
                0
            } else {
                cursor
                    .saturating_add(1)
                    .saturating_sub(room)
                    .min(size - room)
            }
        };
        Viewport {
            screen,
            row: offset(cursor_row, rows, height),
            col: offset(cursor_col, cols, width),
        }
    }

    pub fn cropped(&self, width: u16, height: u16) -> bool {
        let (rows, cols) = self.screen.size();
        rows > height || cols > width
    }
}

impl Screen for Viewport<'_> {
    type C = vt100::Cell;

    fn cell(&self, row: u16, col: u16) -> Option<&vt100::Cell> {
        self.screen
            .cell(row.checked_add(self.row)?, col.checked_add(self.col)?)
    }

    fn hide_cursor(&self) -> bool {
        self.screen.hide_cursor()
    }

    fn cursor_position(&self) -> (u16, u16) {
        let (row, col) = self.screen.cursor_position();
        // Off the view: past its edge, which the widget does not draw.
        (
            row.checked_sub(self.row).unwrap_or(u16::MAX),
            col.checked_sub(self.col).unwrap_or(u16::MAX),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_pane_follows_the_cursor() {
        let mut parser = vt100::Parser::new(24, 80, 0);
        parser.process(b"\x1b[20;70Hx");
        let view = Viewport::follow_cursor(parser.screen(), 40, 10);
        assert_eq!((view.row, view.col), (10, 31));
        assert!(view.cropped(40, 10));
        let whole = Viewport::follow_cursor(parser.screen(), 80, 24);
        assert_eq!((whole.row, whole.col), (0, 0));
        assert!(!whole.cropped(80, 24));
    }
}
