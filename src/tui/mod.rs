//! The terminal UIs and what they share. Where things go:
//!
//! - `workspace/`: the expert's workspace (`rebench new`/`attach`).
//! - `proctor/`: the proctor's dashboard (`rebench proctor`).
//! - `replay/`: the recording player (`rebench replay`); it reads
//!   timelines from `crate::recording`, which never imports from here.
//! - `widgets/`: what more than one app draws or uses: theme, number and
//!   time formats, the shell pane (`shell_tab`, `screen_rows`, `viewport`, `keys`), the
//!   score chart and score lines.
//! - `runtime` and `connection`: the one event loop and server connection
//!   under the workspace and the proctor (the replay player has no server
//!   and keeps its own small loop).
//! - `frames`: frames on the real terminal: full ones through ratatui,
//!   partial ones (a shell's echo: its changed rows only) straight out.
//! - `pacing`: when the next frame may be drawn (a burst after a quiet
//!   spell, then one per frame gap).
//! - `reconnect`: waiting for a lost server, with backoff.
//! - `terminal`: taking the terminal over and giving it back.
//!
//! Each app is the same shape: `app` holds the state and the `Action`s
//! that change it and the `Effect`s it asks for (no I/O, so every screen is
//! built and tested without a server or terminal); `update`/`replies` are
//! its pure transitions; `ui` draws it, a pure function of the state.
//!
//! Adding a screen: a variant of the app's `Screen`/`Overlay` and a draw
//! function in its `ui/`. Adding a widget two apps use: `widgets/`. A new
//! server request: `crate::protocol`, then a `Pending` variant in the app
//! that sends it. See docs/architecture.md.

pub mod connection;
pub mod frames;
pub mod pacing;
pub mod proctor;
pub mod reconnect;
pub mod replay;
pub mod runtime;
pub mod terminal;
pub mod widgets;
pub mod workspace;
