//! A vt100 screen as ratatui cells, kept row by row: each row remembers the
//! bytes vt100 writes for it, so a frame converts only the rows whose bytes
//! changed (a typed key changes one row of fifty), and a frame that changed
//! nothing else can redraw just those rows.

use ratatui::buffer::{Buffer, Cell};
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};

/// The cells of a screen's visible rows, as last brought up to date.
#[derive(Default)]
pub struct ScreenRows {
    rows: Vec<Row>,
    cols: u16,
    /// The only rows that can have changed since the last update, where
    /// that is known (a typed key's echo: one row); None: look at all.
    /// Used only once the owner reports every change (`changed_row`,
    /// `changed_all`).
    only: Option<Vec<u16>>,
    reported: bool,
    /// The view (scrollback offset, rows, cols) of the last update.
    view: Option<(usize, u16, u16)>,
}

/// A key vt100 never writes (0xff is in no UTF-8 text).
const STALE_KEY: &[u8] = &[0xff];

struct Row {
    /// vt100's own rendering of the row (text and attributes): equal bytes,
    /// equal row.
    key: Vec<u8>,
    cells: Vec<Cell>,
}

impl ScreenRows {
    /// Brings every visible row up to date with `screen` (its scrollback
    /// offset included); returns the indices of the rows that changed.
    pub fn update(&mut self, screen: &vt100::Screen) -> Vec<u16> {
        let (rows, cols) = screen.size();
        let view = Some((screen.scrollback(), rows, cols));
        let only = if self.reported {
            self.only.replace(Vec::new())
        } else {
            None
        };
        if let Some(only) = only
            && view == self.view
        {
            return self.update_rows(screen, only);
        }
        self.view = view;
        if cols != self.cols {
            self.rows.clear();
            self.cols = cols;
        }
        self.rows.truncate(usize::from(rows));
        let mut changed = Vec::new();
        for (i, key) in screen.rows_formatted(0, cols).enumerate() {
            let Ok(index) = u16::try_from(i) else { break };
            match self.rows.get_mut(i) {
                Some(row) if row.key == key => {}
                Some(row) => {
                    row.cells = convert_row(screen, index, cols);
                    row.key = key;
                    changed.push(index);
                }
                None => {
                    self.rows.push(Row {
                        cells: convert_row(screen, index, cols),
                        key,
                    });
                    changed.push(index);
                }
            }
        }
        changed
    }

    /// Row `row` of the live screen changed, and nothing else did (as far
    /// as the caller knows for sure; else `changed_all`).
    pub fn changed_row(&mut self, row: u16) {
        match &mut self.only {
            Some(only) if self.reported => only.push(row),
            // Changes before the first report were not told.
            _ => self.changed_all(),
        }
    }

    /// Anything may have changed: the next update looks at every row.
    pub fn changed_all(&mut self) {
        self.reported = true;
        self.only = None;
    }

    /// Brings just `only` up to date (their cells compared, not vt100's
    /// rendering: the key is marked stale, so a full update converts them
    /// again).
    fn update_rows(&mut self, screen: &vt100::Screen, mut only: Vec<u16>) -> Vec<u16> {
        only.sort_unstable();
        only.dedup();
        let cols = self.cols;
        only.retain(|&index| match self.rows.get_mut(usize::from(index)) {
            Some(row) => {
                let cells = convert_row(screen, index, cols);
                let changed = cells != row.cells;
                if changed {
                    row.cells = cells;
                    // No rendering of vt100's is this (not even a blank
                    // row's, which is empty).
                    row.key = STALE_KEY.to_vec();
                }
                changed
            }
            None => false,
        });
        only
    }

    /// Copies the rows into `area` of `buf`, row 0 at its top (clipped to it).
    pub fn render(&self, area: Rect, buf: &mut Buffer) {
        for y in 0..area.height {
            self.render_row(y, area, buf);
        }
    }

    /// Copies row `row` to its place in `area` of `buf`.
    pub fn render_row(&self, row: u16, area: Rect, buf: &mut Buffer) {
        let area = area.intersection(buf.area);
        let Some(cells) = self.rows.get(usize::from(row)) else {
            return;
        };
        if row >= area.height {
            return;
        }
        let width = usize::from(area.width).min(cells.cells.len());
        let start = buf.index_of(area.x, area.y + row);
        buf.content[start..start + width].clone_from_slice(&cells.cells[..width]);
    }
}

/// One visible row, cell by cell (what tui-term's widget draws: contents,
/// colours and attributes; an empty cell stays a blank).
fn convert_row(screen: &vt100::Screen, row: u16, cols: u16) -> Vec<Cell> {
    (0..cols)
        .map(|col| {
            let mut cell = Cell::default();
            if let Some(source) = screen.cell(row, col) {
                convert_cell(source, &mut cell);
            }
            cell
        })
        .collect()
}

fn convert_cell(source: &vt100::Cell, cell: &mut Cell) {
    if source.has_contents() {
        cell.set_symbol(source.contents());
    }
    let mut modifier = Modifier::empty();
    for (on, bit) in [
        (source.bold(), Modifier::BOLD),
        (source.italic(), Modifier::ITALIC),
        (source.underline(), Modifier::UNDERLINED),
        (source.inverse(), Modifier::REVERSED),
        (source.dim(), Modifier::DIM),
    ] {
        if on {
            modifier |= bit;
        }
    }
    cell.set_style(
        Style::reset()
            .fg(color(source.fgcolor()))
            .bg(color(source.bgcolor()))
            .add_modifier(modifier),
    );
}

fn color(color: vt100::Color) -> Color {
    match color {
        vt100::Color::Default => Color::Reset,
        vt100::Color::Idx(i) => Color::Indexed(i),
        vt100::Color::Rgb(r, g, b) => Color::Rgb(r, g, b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tui_term::widget::{Cursor, PseudoTerminal};

    /// What tui-term's widget draws for the same screen, into `area` of a
    /// buffer covering `whole`.
    fn reference_in(parser: &vt100::Parser, area: Rect, whole: Rect) -> Buffer {
        let mut buf = Buffer::empty(whole);
        let mut cursor = Cursor::default();
        cursor.hide();
        ratatui::widgets::Widget::render(
            PseudoTerminal::new(parser.screen()).cursor(cursor),
            area,
            &mut buf,
        );
        buf
    }

    fn reference(parser: &vt100::Parser, area: Rect) -> Buffer {
        reference_in(parser, area, area)
    }

    fn ours(rows: &mut ScreenRows, parser: &vt100::Parser, area: Rect) -> Buffer {
        rows.update(parser.screen());
        let mut buf = Buffer::empty(area);
        rows.render(area, &mut buf);
        buf
    }

    const STYLED: &[u8] = b"plain \x1b[1mbold\x1b[0m \x1b[3;4mital-under\x1b[0m \x1b[7mrev\x1b[0m \x1b[2mdim\x1b[0m\r\n\
        \x1b[31mred\x1b[42mon green\x1b[0m \x1b[38;5;200midx\x1b[0m \x1b[38;2;1;2;3;48;2;4;5;6mrgb\x1b[0m\r\n\
        wide: \xe4\xbd\xa0\xe5\xa5\xbd, combining: e\xcc\x81, emoji: \xf0\x9f\x98\x80\r\n\
        \x1b[44m\x1b[Kblue to the end\x1b[0m\r\n\
        \x1b[5;70Hfar right, wrapping onto the next line";

    #[test]
    fn rows_draw_what_tui_term_draws() {
        let mut parser = vt100::Parser::new(8, 80, 100);
        parser.process(STYLED);
        let area = Rect::new(3, 2, 80, 8);
        let mut rows = ScreenRows::default();
        assert_eq!(ours(&mut rows, &parser, area), reference(&parser, area));
        // Scrolled back into history, too.
        for i in 0..30 {
            parser.process(format!("\r\nline {i}").as_bytes());
        }
        parser.screen_mut().set_scrollback(12);
        assert_eq!(ours(&mut rows, &parser, area), reference(&parser, area));
    }

    #[test]
    fn only_rows_that_changed_are_named() {
        let mut parser = vt100::Parser::new(5, 40, 100);
        parser.process(b"one\r\ntwo\r\nthree");
        let mut rows = ScreenRows::default();
        assert_eq!(rows.update(parser.screen()), vec![0, 1, 2, 3, 4]);
        assert_eq!(rows.update(parser.screen()), Vec::<u16>::new());
        // A typed key.
        parser.process(b"x");
        assert_eq!(rows.update(parser.screen()), vec![2]);
        // Only the colour of a letter.
        parser.process(b"\x1b[1;1H\x1b[31mo");
        assert_eq!(rows.update(parser.screen()), vec![0]);
        // A scroll moves every row with text (the blank ones stay blank).
        parser.process(b"\x1b[5;1H\r\n");
        assert_eq!(rows.update(parser.screen()), vec![0, 1, 2]);
        // A new width starts over.
        parser.screen_mut().set_size(5, 30);
        assert_eq!(rows.update(parser.screen()), vec![0, 1, 2, 3, 4]);
    }

    #[test]
    fn reported_rows_are_the_only_ones_looked_at() {
        let mut parser = vt100::Parser::new(6, 50, 10);
        parser.process(STYLED);
        let area = Rect::new(0, 0, 50, 6);
        let mut rows = ScreenRows::default();
        rows.changed_all();
        assert_eq!(rows.update(parser.screen()).len(), 6);
        // A key's echo, reported: only its row is converted, and it draws right.
        parser.process(b"\x1b[3;1Hx");
        rows.changed_row(2);
        assert_eq!(rows.update(parser.screen()), vec![2]);
        assert_eq!(ours(&mut rows, &parser, area), reference(&parser, area));
        // A change reported for one row is all that is looked at (which is
        // why every change must be reported)...
        parser.process(b"\x1b[1;1Hzz\x1b[4;1Hq");
        rows.changed_row(3);
        assert_eq!(rows.update(parser.screen()), vec![3]);
        // ...and a change of the view looks at every row whatever was said.
        parser.screen_mut().set_size(6, 40);
        rows.changed_row(3);
        assert_eq!(rows.update(parser.screen()).len(), 6);
        rows.changed_all();
        parser.process(b"\x1b[1;1Hyy");
        rows.changed_all();
        assert_eq!(rows.update(parser.screen()), vec![0]);
    }

    #[test]
    fn a_row_drawn_alone_matches_the_full_drawing() {
        let mut parser = vt100::Parser::new(6, 50, 10);
        parser.process(STYLED);
        let area = Rect::new(0, 1, 50, 6);
        let mut rows = ScreenRows::default();
        let mut buf = ours(&mut rows, &parser, area);
        parser.process(b"\x1b[2;5H\x1b[1;35mCHANGED\x1b[0m");
        let changed = rows.update(parser.screen());
        assert_eq!(changed, vec![1]);
        for row in changed {
            rows.render_row(row, area, &mut buf);
        }
        assert_eq!(buf, reference(&parser, area));
    }

    #[test]
    fn an_area_smaller_than_the_screen_clips_it() {
        let mut parser = vt100::Parser::new(6, 50, 10);
        parser.process(STYLED);
        let mut rows = ScreenRows::default();
        rows.update(parser.screen());
        let area = Rect::new(2, 1, 20, 3);
        let mut buf = Buffer::empty(Rect::new(0, 0, 30, 5));
        rows.render(area, &mut buf);
        let expected = reference_in(&parser, area, Rect::new(0, 0, 30, 5));
        assert_eq!(buf, expected);
    }
}
