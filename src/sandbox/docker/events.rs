//! Which session containers died, as the engine says: one event stream
//! per engine, shared by every session on it (a stream each would be 200
//! subscribers on the engine for 200 sessions), handed out by container
//! name. A session's timer waits on `died` and checks its container at once
//! when it resolves; its own inspection every 30 s finds what the events
//! missed.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use bollard::query_parameters::EventsOptions;
use futures_util::StreamExt;
use tokio::sync::broadcast;
use tokio::task::JoinHandle;

use super::Engine;
use crate::sandbox::backend::SESSION_LABEL;

/// What the watcher of an engine tells the sessions on it.
#[derive(Debug, Clone)]
enum News {
    /// A session's container died (or was removed, or ran out of memory).
    Died { container: String },
    /// The stream broke and came back: anything may have happened since.
    Missed,
}

/// How long a broken stream waits before it is asked again.
const RETRY: Duration = Duration::from_secs(5);

type Watchers = Mutex<HashMap<String, (broadcast::Sender<News>, JoinHandle<()>)>>;

fn watchers() -> &'static Watchers {
    static WATCHERS: OnceLock<Watchers> = OnceLock::new();
    WATCHERS.get_or_init(Default::default)
}

/// A future that resolves when `container` on `engine` may have died: the
/// engine said so, or its events could not be followed for a while. None
/// outside a runtime (nothing could follow the events).
pub fn died(
    engine: &Engine,
    container: String,
) -> Option<impl std::future::Future<Output = ()> + Send + 'static> {
    let runtime = tokio::runtime::Handle::try_current().ok()?;
    let mut news = {
        let mut watchers = watchers().lock().unwrap_or_else(|e| e.into_inner());
        match watchers.get(&engine.endpoint) {
            // A watcher whose runtime went away is started again.
            Some((sender, watcher)) if !watcher.is_finished() => sender.subscribe(),
            _ => {
                let (sender, receiver) = broadcast::channel(1024);
                let watcher = runtime.spawn(watch(engine.clone(), sender.clone()));
                watchers.insert(engine.endpoint.clone(), (sender, watcher));
                receiver
            }
        }
    };
    Some(async move {
        loop {
            match news.recv().await {
                Ok(News::Died { container: died }) if died == container => return,
                Ok(News::Died { .. }) => {}
                // Missed or fell behind: check now.
                Ok(News::Missed) | Err(broadcast::error::RecvError::Lagged(_)) => return,
                Err(broadcast::error::RecvError::Closed) => {
                    tokio::time::sleep(RETRY).await;
                    return;
                }
            }
        }
    })
}

/// Follows the engine's events for session containers, for as long as the
/// runtime runs.
async fn watch(engine: Engine, news: broadcast::Sender<News>) {
    let filters = HashMap::from([
        ("type".to_string(), vec!["container".to_string()]),
        ("label".to_string(), vec![SESSION_LABEL.to_string()]),
        (
            "event".to_string(),
            ["die", "oom", "destroy"].map(String::from).to_vec(),
        ),
    ]);
    let mut told = false;
    loop {
        let options = EventsOptions {
            filters: Some(filters.clone()),
            ..Default::default()
        };
        let mut events = engine.client.events(Some(options));
        loop {
            match events.next().await {
                Some(Ok(event)) => {
                    told = false;
                    let name = event
                        .actor
                        .and_then(|actor| actor.attributes)
                        .and_then(|mut attributes| attributes.remove("name"));
                    if let Some(container) = name {
                        let _ = news.send(News::Died { container });
                    }
                }
                Some(Err(e)) => {
                    lost(&engine, &mut told, &e.to_string());
                    break;
                }
                None => {
                    lost(&engine, &mut told, "the engine closed the stream");
                    break;
                }
            }
        }
        tokio::time::sleep(RETRY).await;
        // An engine that answers again is followed again: the next loss is
        // news, even before any container has died in between.
        if told && engine.client.ping().await.is_ok() {
            tracing::info!(host = %engine.name, "following the Docker engine's events again");
            told = false;
        }
        let _ = news.send(News::Missed);
    }
}

/// Logs a lost event stream, once per loss rather than at every retry of an
/// engine that is down.
fn lost(engine: &Engine, told: &mut bool, why: &str) {
    if !*told {
        tracing::warn!(host = %engine.name, "cannot follow the Docker engine's events ({why}); trying again every {}s", RETRY.as_secs());
        *told = true;
    }
}
