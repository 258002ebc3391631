//! The replay player: a ratatui app over a [`Timeline`]. `state` holds what
//! is shown and changes only through [`Action`]s; `draw` is a pure function
//! of the state; `run` owns the terminal and the clock.

pub mod action;
mod bar;
mod chart;
pub mod draw;
pub mod state;

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use ratatui::crossterm::event::{self, Event};

pub use action::{Action, action_for_key};
pub use draw::draw;
pub use state::{DEFAULT_IDLE_MS, PlayerOptions, PlayerState};

use crate::recording::timeline::Timeline;

/// Frames per second while playing (idle: the loop just waits for keys).
const FRAME: Duration = Duration::from_millis(33);

pub fn run(timeline: Timeline, options: PlayerOptions) -> anyhow::Result<()> {
    if !std::io::stdout().is_terminal() || !std::io::stdin().is_terminal() {
        bail!("rebench replay needs a terminal; to get a recording as a file, use rebench export");
    }
    let mut state = PlayerState::new(timeline, &options);
    let mut terminal = ratatui::try_init().context("cannot set up the terminal")?;
    let result = event_loop(&mut terminal, &mut state);
    ratatui::restore();
    result
}

fn event_loop(
    terminal: &mut ratatui::DefaultTerminal,
    state: &mut PlayerState,
) -> anyhow::Result<()> {
    let mut last = Instant::now();
    while !state.quit {
        terminal.draw(|frame| draw(state, frame))?;
        let wait = if state.playing {
            FRAME
        } else {
            Duration::from_millis(250)
        };
        if event::poll(wait)? {
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
