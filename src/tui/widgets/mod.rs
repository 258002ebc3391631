//! What more than one terminal UI uses: the theme, formats, the shell pane
//! (a vt100 screen per shell, its viewport and key encoding) and the score
//! chart and lines.

pub mod format;
pub mod keys;
pub mod overlay;
pub mod score;
pub mod screen_rows;
pub mod shell_tab;
pub mod theme;
pub mod viewport;
pub mod wrap;
