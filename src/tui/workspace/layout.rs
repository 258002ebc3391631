//! Where things go on screen. Shared by drawing and by shell sizing, so the
//! PTY is always exactly the size of the pane that shows it.

use ratatui::layout::{Constraint, Layout, Rect};

/// Below this the workspace cannot be used; we say so instead of drawing it.
pub const MIN_COLS: u16 = 60;
pub const MIN_ROWS: u16 = 16;
/// The side panel's width when there is room, and the least it shrinks to
/// before it goes (the header then carries the scores).
pub const SIDE_PANEL_COLS: u16 = 46;
pub const SIDE_PANEL_MIN_COLS: u16 = 30;
/// What the shell keeps beside the panel: a usable 80-column-ish terminal.
pub const PANE_MIN_COLS: u16 = 64;
pub const SIDE_PANEL_MIN_TERMINAL_COLS: u16 = PANE_MIN_COLS + SIDE_PANEL_MIN_COLS;
pub const HEADER_ROWS: u16 = 4;

pub fn too_small(area: Rect) -> bool {
    area.width < MIN_COLS || area.height < MIN_ROWS
}

/// The workspace screen's regions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Areas {
    pub header: Rect,
    pub tabs: Rect,
    pub pane: Rect,
    pub side: Option<Rect>,
    pub footer: Rect,
}

/// The side panel shows when wanted and when the terminal is wide enough.
pub fn side_panel_fits(area: Rect) -> bool {
    area.width >= SIDE_PANEL_MIN_TERMINAL_COLS
}

/// The panel's width: full when it fits beside a 64-column shell, narrower
/// (down to 30) when it does not.
pub fn side_panel_cols(area: Rect) -> u16 {
    area.width
        .saturating_sub(PANE_MIN_COLS)
        .clamp(SIDE_PANEL_MIN_COLS, SIDE_PANEL_COLS)
}

pub fn workspace(area: Rect, side_panel: bool) -> Areas {
    let [header, tabs, body, footer] = Layout::vertical([
        Constraint::Length(HEADER_ROWS),
        Constraint::Length(1),
        Constraint::Min(1),
        Constraint::Length(1),
    ])
    .areas(area);
    let (pane, side) = if side_panel && side_panel_fits(area) {
        let [pane, side] = Layout::horizontal([
            Constraint::Min(1),
            Constraint::Length(side_panel_cols(area)),
        ])
        .areas(body);
        (pane, Some(side))
    } else {
        (body, None)
    };
    Areas {
        header,
        tabs,
        pane,
        side,
        footer,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pane_takes_what_the_chrome_leaves() {
        let a = workspace(Rect::new(0, 0, 140, 45), true);
        assert_eq!(a.pane, Rect::new(0, 5, 94, 39));
        assert_eq!(a.side, Some(Rect::new(94, 5, 46, 39)));
        assert_eq!(a.footer, Rect::new(0, 44, 140, 1));
        // Narrower: the panel shrinks first, the shell keeps 64 columns...
        let a = workspace(Rect::new(0, 0, 100, 30), true);
        assert_eq!(a.side.map(|s| s.width), Some(36));
        assert_eq!(a.pane.width, 64);
        // ...then goes: the shell gets the full width.
        let a = workspace(Rect::new(0, 0, 93, 30), true);
        assert_eq!(a.side, None);
        assert_eq!(a.pane.width, 93);
        assert!(too_small(Rect::new(0, 0, 59, 40)));
        assert!(!too_small(Rect::new(0, 0, 60, 16)));
    }
}
