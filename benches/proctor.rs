//! The dashboard's cost per session event with 200 sessions: apply a pushed
//! event, recompute every row and alert, draw into a TestBackend. Run with
//! `cargo bench --bench proctor`. Prints timings; no assertions.
//!
//! Agents in exec loops push an `exec` event per command; a score every
//! tenth event. One event then one frame is the worst case; the runtime
//! batches a burst of events into one recompute and one frame.

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

use std::time::{Duration, Instant};

use ratatui::Terminal;
use ratatui::backend::TestBackend;

use rebench::protocol::Push;
use rebench::session::Event;
use rebench::tui::proctor::app::{Action, App, Pending};
use rebench::tui::proctor::sample;
use rebench::tui::proctor::settings::Thresholds;
use rebench::tui::proctor::ui;
use rebench::tui::widgets::theme::Theme;

const SESSIONS: usize = 200;
const EVENTS: usize = 4000;
const COLS: u16 = 200;
const ROWS: u16 = 60;

fn event(i: usize) -> Event {
    let seq = 1000 + i as u64;
    let secs = 7200 + (i / SESSIONS) as i64;
    if i.is_multiple_of(10) {
        sample::scored_event(seq, secs, 0.3 + (i % 7) as f64 * 0.05)
    } else {
        sample::exec_event(
            seq,
            secs,
            "python3 train.py --steps 100",
            "step 100: loss 0.412\n",
        )
    }
}

fn push(ids: &[String], i: usize) -> Action {
    Action::Push(Box::new(Push::SessionEvent {
        session: ids[i % ids.len()].clone(),
        event: event(i),
    }))
}

fn app() -> App {
    let mut app = App::new(
        "bench (proctor)",
        Thresholds::default(),
        Theme { color: true },
        sample::now(),
    );
    app.fleet = sample::fleet_of(SESSIONS);
    app.loaded = true;
    app.update(Action::Resize(COLS, ROWS));
    app.recompute();
    app
}

struct Samples(Vec<Duration>);

impl Samples {
    fn report(&mut self, what: &str) {
        self.0.sort();
        let n = self.0.len().max(1);
        let total: Duration = self.0.iter().sum();
        let at = |q: f64| self.0[((n as f64 * q) as usize).min(n - 1)];
        println!(
            "{what:<34} mean {:>8.1} µs   p50 {:>8.1} µs   p99 {:>8.1} µs",
            total.as_secs_f64() * 1e6 / n as f64,
            at(0.5).as_secs_f64() * 1e6,
            at(0.99).as_secs_f64() * 1e6,
        );
    }
}

fn main() {
    let mut app = app();
    let ids: Vec<String> = app.fleet.sessions.keys().cloned().collect();
    let mut terminal = match Terminal::new(TestBackend::new(COLS, ROWS)) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("no test terminal: {e}");
            return;
        }
    };
    println!("{SESSIONS} sessions, {EVENTS} events, a {COLS}×{ROWS} frame");

    let (mut apply, mut recompute, mut draw, mut total) = (
        Samples(Vec::new()),
        Samples(Vec::new()),
        Samples(Vec::new()),
        Samples(Vec::new()),
    );
    for i in 0..EVENTS {
        let action = push(&ids, i);
        let t0 = Instant::now();
        app.handle(action);
        let t1 = Instant::now();
        app.settle();
        let t2 = Instant::now();
        let _ = terminal.draw(|frame| ui::draw(&app, frame));
        let t3 = Instant::now();
        apply.0.push(t1 - t0);
        recompute.0.push(t2 - t1);
        draw.0.push(t3 - t2);
        total.0.push(t3 - t0);
    }
    apply.report("apply one event");
    recompute.report("recompute rows + alerts");
    draw.report("draw the table");
    total.report("per event, one frame each");

    // A burst, as the runtime takes it: every queued event, then one frame.
    let mut burst = Samples(Vec::new());
    for round in 0..20 {
        let t0 = Instant::now();
        for i in 0..SESSIONS {
            app.handle(push(&ids, EVENTS + round * SESSIONS + i));
        }
        app.settle();
        let _ = terminal.draw(|frame| ui::draw(&app, frame));
        burst.0.push((t0.elapsed()) / SESSIONS as u32);
    }
    burst.report("per event, bursts of 200");

    // The detail view of an agent with a long exec history.
    let agent = ids[0].clone();
    app.open_detail(&agent);
    let history: Vec<Event> = (0..500).map(event).collect();
    let value = serde_json::to_value(&history).unwrap_or_default();
    app.update(Action::Reply {
        pending: Pending::Events(agent.clone()),
        result: Ok(value),
    });
    let mut detail = Samples(Vec::new());
    for i in 0..1000 {
        let action = Action::Push(Box::new(Push::SessionEvent {
            session: agent.clone(),
            event: event(EVENTS * 2 + i * SESSIONS + 1),
        }));
        let t0 = Instant::now();
        app.update(action);
        let _ = terminal.draw(|frame| ui::draw(&app, frame));
        detail.0.push(t0.elapsed());
    }
    detail.report("detail view, per exec event");
}
