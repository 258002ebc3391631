//! Per-session timer: budget warnings and exhaustion, to the second.

use std::sync::Arc;
use std::time::Duration;

use crate::session::EndReason;
use crate::session::EventKind;
use crate::session::budget::{BudgetDue, due, ms_until_due};

use super::host::Host;
use super::hub::{Hub, SYSTEM};

/// Longest sleep between checks even when nothing is due (guards against a missed wake).
const MAX_SLEEP: Duration = Duration::from_secs(30);

pub async fn run_timer(hub: Arc<Hub>, host: Arc<Host>) {
    loop {
        let sleep_ms = {
            let mut live = host.live.lock().await;
            if live.state.end_reason.is_some() {
                return;
            }
            if host.clock_runs() {
                let active = host.active_ms();
                match due(live.state.budget_ms, active, &live.state.warned_s) {
                    Some(BudgetDue::Warning {
                        threshold_s,
                        remaining_s,
                    }) => {
                        if let Err(e) = host
                            .append(
                                &mut live,
                                EventKind::Warning {
                                    threshold_s,
                                    remaining_s,
                                },
                            )
                            .await
                        {
                            tracing::error!(session = %host.id(), "warning not saved: {e}");
                        }
                        continue;
                    }
                    Some(BudgetDue::Exhausted) => {
                        drop(live);
                        tracing::info!(session = %host.id(), "budget exhausted");
                        if let Err(e) = hub
                            .finish(&host, EndReason::BudgetExhausted, SYSTEM, true)
                            .await
                        {
                            tracing::error!(session = %host.id(), "ending at budget exhaustion failed: {e}");
                        }
                        continue;
                    }
                    None => Some(ms_until_due(
                        live.state.budget_ms,
                        active,
                        &live.state.warned_s,
                    )),
                }
            } else {
                None
            }
        };
        let nap = sleep_ms.map_or(MAX_SLEEP, |ms| {
            Duration::from_millis(ms.max(1)).min(MAX_SLEEP)
        });
        tokio::select! {
            _ = tokio::time::sleep(nap) => {}
            _ = host.wake.notified() => {}
        }
    }
}
