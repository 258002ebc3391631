//! An attach reply for tests that load a tab's screen without a server
//! (included by path: these tests need nothing else of `common`).

use rebench::protocol::AttachReply;

/// The attach reply of a shell of the pane's size, from a server keeping
/// its default history.
pub fn attach_reply(rows: u16, cols: u16) -> AttachReply {
    AttachReply {
        shell: 0,
        cols,
        rows,
        screen: String::new(),
        alive: true,
        scrollback_lines: Some(2000),
    }
}
