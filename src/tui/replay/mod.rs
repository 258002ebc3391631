//! The replay player (`rebench replay`): a ratatui app over a [`Timeline`]
//! that `recording` reads. `state` holds what is shown and changes only
//! through [`Action`]s; `draw` is a pure function of the state; `play` owns
//! the clock (a small loop of its own: it has no server, so not
//! `tui::runtime`), and takes the terminal as every UI does (`tui::terminal`).

pub mod action;
mod bar;
mod chart;
pub mod draw;
pub mod state;

use std::io::IsTerminal;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use ratatui::crossterm::event::{self, Event};

pub use action::{Action, action_for_key};
pub use draw::draw;
pub use state::{DEFAULT_IDLE_MS, PlayerOptions, PlayerState};

use crate::paths::DataPaths;
use crate::recording::timeline::Timeline;

#[derive(clap::Args, Debug, Clone)]
pub struct ReplayArgs {
    /// A session id or a file (asciicast v2/v3, rebench jsonl, or a `script` typescript).
    pub source: String,
    /// The timing file of a `script` typescript (classic or `-m advanced`).
    #[arg(long)]
    pub timing: Option<PathBuf>,
    /// The shell tab to open first.
    #[arg(long)]
    pub shell: Option<u32>,
    /// Playback speed (0.25 to 64).
    #[arg(long, default_value_t = 1.0)]
    pub speed: f64,
    /// Cut idle stretches to this many seconds (0: no limit). Default: the file's, else 2.
    #[arg(long)]
    pub idle_limit: Option<f64>,
}

/// `rebench replay`: reads the source, then plays it; returns the exit code.
pub async fn run(args: ReplayArgs, paths: &DataPaths) -> anyhow::Result<i32> {
    let timeline = crate::recording::load(&args.source, args.timing.as_deref(), paths).await?;
    let options = PlayerOptions {
        speed: args.speed,
        idle_limit_ms: match args.idle_limit {
            Some(s) if s <= 0.0 => None,
            Some(s) => Some((s * 1000.0) as u64),
            None => Some(timeline.idle_limit_ms.unwrap_or(DEFAULT_IDLE_MS)),
        },
        shell: args.shell,
    };
    play(timeline, options)?;
    Ok(0)
}

/// Frames per second while playing (idle: the loop just waits for keys).
const FRAME: Duration = Duration::from_millis(33);

pub fn play(timeline: Timeline, options: PlayerOptions) -> anyhow::Result<()> {
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        bail!("rebench replay needs a terminal; to get a recording as a file, use rebench export");
    }
    let mut state = PlayerState::new(timeline, &options);
    // The terminal every UI takes over the same way, and gives back on
    // exit, error or panic (the guard's drop).
    let (_guard, mut terminal) =
        crate::tui::terminal::TerminalGuard::enter(false).context("cannot set up the terminal")?;
    event_loop(&mut terminal, &mut state)
}

fn event_loop(
    terminal: &mut crate::tui::terminal::Screen,
    state: &mut PlayerState,
) -> anyhow::Result<()> {
    let mut last = Instant::now();
    let input = crate::tui::terminal::input_fd().context("cannot read the terminal")?;
    while !state.quit {
        terminal.draw(|frame| draw(state, frame))?;
        crate::tui::terminal::show(terminal)?;
        let wait = if state.playing {
            FRAME
        } else {
            Duration::from_millis(250)
        };
        if crate::tui::terminal::poll_input(input.as_raw_fd(), wait)? {
            match event::read()? {
                Event::Key(key) => {
                    if let Some(action) = action_for_key(key, state.prompt.is_some(), state.help) {
                        state.update(action);
                    }
                }
                Event::Resize(..) => {}
                _ => {}
            }
        }
        let now = Instant::now();
        state.update(Action::Tick(now - last));
        last = now;
    }
    Ok(())
}
