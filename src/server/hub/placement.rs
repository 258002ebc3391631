//! Hardware for sessions: each new session gets a grant of concrete devices
//! from the allocator (`crate::hardware`) or waits in the queue, and the
//! queue is served whenever hardware may have been freed. One placement
//! at a time (`Hub::placing`), so two sessions never get the same device.
//!
//! The grants held are read from the sessions themselves (every session
//! not ended that has one), so a server restarted after `kill -9` holds
//! exactly what its sessions' logs say, and an ended session's devices are
//! free at once.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use crate::hardware::queue::{Waiting, in_line, ordinal};
use crate::hardware::{Decision, DeviceGrant, Inventory, Request, allocate, gpu_use};
use crate::protocol::ErrorCode;
use crate::session::{EventKind, Phase};

use super::Hub;
use crate::server::host::{Host, OpError, OpResult};

/// How often the queue is looked at while sessions wait (GPUs an ended
/// session's stray process held may have come free).
pub const QUEUE_POLL: Duration = Duration::from_secs(5);

/// The machine sessions are placed on: read each time (GPUs may appear or
/// go; reading costs one `nvidia-smi`).
pub async fn inventory(hub: &Hub) -> Inventory {
    let reserve = hub.reserve;
    tokio::task::spawn_blocking(move || Inventory::detect(reserve))
        .await
        .unwrap_or_else(|_| Inventory::detect(reserve))
}

/// GPUs some process holds now (none known without nvidia-smi).
async fn busy_gpus() -> BTreeSet<String> {
    tokio::task::spawn_blocking(gpu_use::busy_gpus)
        .await
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// The machine as placement sees it at one moment.
struct MachineNow {
    inventory: Inventory,
    held: Vec<DeviceGrant>,
    busy: BTreeSet<String>,
}

impl MachineNow {
    fn decide(&self, request: &Request) -> Decision {
        let held: Vec<&DeviceGrant> = self.held.iter().collect();
        allocate(&self.inventory, &held, &self.busy, request)
    }
}

impl Hub {
    /// The grants of every session that is not over.
    pub async fn held_grants(&self) -> Vec<(String, DeviceGrant)> {
        let mut held = Vec::new();
        for host in self.hosts_unordered() {
            let live = host.live.lock().await;
            if live.state.phase() == Phase::Ended {
                continue;
            }
            if let Some(grant) = &live.state.grant {
                held.push((host.id().to_string(), grant.clone()));
            }
        }
        held
    }

    /// What the allocator decides for `request` now. Call with `placing` held.
    pub async fn decide(&self, request: &Request) -> Decision {
        let machine = self.machine_now().await;
        machine.decide(request)
    }

    /// The machine as placement sees it now: its inventory, the grants
    /// held, and the GPUs some process uses.
    async fn machine_now(&self) -> MachineNow {
        let inventory = inventory(self).await;
        let held = self
            .held_grants()
            .await
            .into_iter()
            .map(|(_, g)| g)
            .collect();
        // A GPU a live session holds is busy by its own right; the others
        // must have no process left on them.
        let busy = if inventory.gpus.is_empty() {
            BTreeSet::new()
        } else {
            busy_gpus().await
        };
        MachineNow {
            inventory,
            held,
            busy,
        }
    }

    /// Grants what it can to the sessions in line, first in line first,
    /// and tells the others where they stand. Call after anything that may
    /// free hardware (an end), and now and then while sessions wait.
    pub async fn serve_queue(self: &Arc<Self>) {
        let granted = {
            let _placing = self.placing.lock().await;
            let line = self.line().await;
            if line.is_empty() {
                return;
            }
            // Read once: each grant made here is added to what is held.
            let mut machine = self.machine_now().await;
            let mut granted = Vec::new();
            let mut position = 0;
            for (waiting, host, needs) in line {
                match machine.decide(&needs) {
                    Decision::Grant(grant) => match self.grant(&host, grant.clone()).await {
                        Ok(()) => {
                            machine.held.push(grant);
                            granted.push(host);
                        }
                        Err(e) => {
                            tracing::error!(session = %waiting.session, "could not grant its hardware: {e}")
                        }
                    },
                    Decision::Wait(why) => {
                        position += 1;
                        host.set_queue_note(position, why);
                    }
                    Decision::Never(missing) => {
                        position += 1;
                        host.set_queue_note(
                            position,
                            format!("hardware this machine lacks now: {}", missing.join("; ")),
                        );
                    }
                }
            }
            granted
        };
        for host in granted {
            let hub = self.clone();
            tokio::spawn(async move {
                if host.meta.scoring.score_at_start
                    && let Err(e) = hub.score_starting(&host).await
                {
                    tracing::error!(session = %host.id(), "starting score after its grant: {e}");
                }
            });
        }
    }

    /// The queued sessions in the order they are served, with their needs.
    async fn line(&self) -> Vec<(Waiting, Arc<Host>, Request)> {
        let mut waiting = Vec::new();
        for host in self.hosts_unordered() {
            let live = host.live.lock().await;
            if live.state.phase() != Phase::Queued {
                continue;
            }
            if let Some(queued) = &live.state.queued {
                waiting.push((
                    Waiting {
                        session: host.id().to_string(),
                        priority: queued.priority,
                        since: queued.since,
                    },
                    host.clone(),
                    queued.needs.clone(),
                ));
            }
        }
        let order = in_line(waiting.iter().map(|(w, _, _)| w.clone()).collect());
        order
            .into_iter()
            .filter_map(|w| {
                let i = waiting
                    .iter()
                    .position(|(x, _, _)| x.session == w.session)?;
                Some(waiting.swap_remove(i))
            })
            .collect()
    }

    /// Records `grant` on a queued session and opens its sandbox with it.
    /// Call with `placing` held.
    async fn grant(&self, host: &Arc<Host>, grant: DeviceGrant) -> OpResult<()> {
        let mut live = host.live.lock().await;
        if live.state.phase() != Phase::Queued {
            return Ok(());
        }
        host.append(
            &mut live,
            EventKind::Granted {
                grant: grant.clone(),
            },
        )
        .await?;
        let sandbox = self.open_sandbox(&host.meta, &live.state, Some(&grant));
        host.open_sandbox(sandbox, Some(grant));
        tracing::info!(session = %host.id(), grant = %live.state.grant.as_ref().map(DeviceGrant::describe).unwrap_or_default(), "hardware granted from the queue");
        Ok(())
    }

    /// Why `begin` must wait: the session is still in line.
    pub fn still_queued(host: &Host) -> OpError {
        let note = host
            .queue_note
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let place = note
            .map(|(n, why)| format!("waiting for {why}: {} in line", ordinal(n)))
            .unwrap_or_else(|| "waiting for its hardware".to_string());
        OpError::new(
            ErrorCode::InvalidState,
            format!(
                "session {} cannot start yet: {place}. It starts by itself when the hardware is free",
                host.id()
            ),
        )
    }

    /// Serves the queue when an end frees hardware (`queue_wake`), and
    /// every `QUEUE_POLL` while sessions wait.
    pub async fn watch_queue(self: Arc<Self>) {
        let mut closing = self.subscribe_closing();
        loop {
            tokio::select! {
                _ = tokio::time::sleep(QUEUE_POLL) => {}
                _ = self.queue_wake.notified() => {}
                _ = closing.changed() => return,
            }
            if *closing.borrow() {
                return;
            }
            let any_waiting = {
                let mut any = false;
                for host in self.hosts_unordered() {
                    if host.live.lock().await.state.phase() == Phase::Queued {
                        any = true;
                        break;
                    }
                }
                any
            };
            if any_waiting {
                self.serve_queue().await;
            }
            self.report_memory_kills().await;
            self.sample_gpu_use().await;
        }
    }

    /// Each GPU-holding session's GPUs' use now, and when they were last
    /// busy (the proctor's idle-GPU alert reads it).
    async fn sample_gpu_use(&self) {
        let holders: Vec<Arc<Host>> = self
            .hosts_unordered()
            .into_iter()
            .filter(|h| h.grant().is_some_and(|g| !g.gpus.is_empty()))
            .collect();
        let mut live_holders = Vec::new();
        for host in holders {
            if host.live.lock().await.state.phase() != Phase::Ended {
                live_holders.push(host);
            }
        }
        if live_holders.is_empty() {
            return;
        }
        let sample = tokio::task::spawn_blocking(gpu_use::sample)
            .await
            .unwrap_or_default();
        let now = chrono::Utc::now();
        for host in live_holders {
            let Some(grant) = host.grant() else { continue };
            let uses: Vec<gpu_use::GpuUse> = grant
                .gpus
                .iter()
                .filter_map(|g| sample.get(&g.uuid).cloned())
                .collect();
            let busy = uses.iter().any(|u| u.utilization_pct > 0);
            let mut slot = host.gpu_use.lock().unwrap_or_else(|e| e.into_inner());
            let used_at = match slot.1 {
                Some(_) if busy => Some(now),
                Some(at) => Some(at),
                None => Some(now),
            };
            *slot = (uses, used_at);
        }
    }

    /// A process the kernel killed at a session's memory limit is noted in
    /// its log (the participant sees it; the clock runs on).
    async fn report_memory_kills(&self) {
        for host in self.hosts_unordered() {
            let kills = crate::server::host::memory_kills(host.sandbox());
            let seen = host
                .memory_kills_seen
                .swap(kills, std::sync::atomic::Ordering::SeqCst);
            if kills <= seen {
                continue;
            }
            let limit = host
                .grant()
                .map(|g| crate::hardware::grant::trim_gb(g.memory_gb))
                .unwrap_or_default();
            let mut live = host.live.lock().await;
            if live.state.phase() == Phase::Ended {
                continue;
            }
            let text = format!(
                "out of memory: {} process(es) of this session were killed at its memory limit of {limit} GB (the clock runs on)",
                kills - seen
            );
            tracing::warn!(session = %host.id(), "{text}");
            if let Err(e) = host
                .append(
                    &mut live,
                    EventKind::Note {
                        text,
                        by: crate::session::SYSTEM.into(),
                    },
                )
                .await
            {
                tracing::error!(session = %host.id(), "noting a memory kill: {e}");
            }
        }
    }
}

impl Hub {
    /// A queued session's new priority (recorded as it queued again, its
    /// arrival kept); the queue is served at once in its new order.
    pub async fn prioritize(
        self: &Arc<Self>,
        id: &str,
        priority: i32,
        by: &super::Actor,
    ) -> OpResult<crate::protocol::SessionView> {
        let host = self.host(id)?;
        {
            let _placing = self.placing.lock().await;
            let mut live = host.live.lock().await;
            let queued = live
                .state
                .queued
                .clone()
                .filter(|_| live.state.phase() == Phase::Queued)
                .ok_or_else(|| {
                    OpError::state(format!(
                        "session {id} is not waiting for hardware (it is {})",
                        live.state.phase()
                    ))
                })?;
            host.append(
                &mut live,
                EventKind::Queued {
                    waiting_for: queued.waiting_for,
                    priority,
                    needs: queued.needs,
                },
            )
            .await?;
        }
        self.serve_queue().await;
        Ok(host.view(by.audience, false).await)
    }
}

impl Host {
    /// Its place in line and what it waits for, for its views.
    pub fn set_queue_note(&self, position: usize, why: String) {
        *self.queue_note.lock().unwrap_or_else(|e| e.into_inner()) = Some((position, why));
    }
}

impl Hub {
    /// `hosts`: this machine, its devices and who holds each.
    pub async fn hosts_view(&self) -> Vec<crate::protocol::HostView> {
        let inventory = inventory(self).await;
        let held = self.held_grants().await;
        let uses = if inventory.gpus.is_empty() {
            Default::default()
        } else {
            tokio::task::spawn_blocking(gpu_use::sample)
                .await
                .unwrap_or_default()
        };
        let mut queued = Vec::new();
        for host in self.all_hosts() {
            if host.live.lock().await.state.phase() == Phase::Queued {
                queued.push(host.id().to_string());
            }
        }
        let holder = |uuid: &str| {
            held.iter()
                .find(|(_, g)| g.gpus.iter().any(|gpu| gpu.uuid == uuid))
                .map(|(id, _)| id.clone())
        };
        let gpus = inventory
            .gpus
            .iter()
            .map(|gpu| crate::protocol::HostGpuView {
                index: gpu.index,
                uuid: gpu.uuid.clone(),
                model: gpu.model.clone(),
                memory_mib: gpu.memory_mib,
                session: holder(&gpu.uuid),
                utilization_pct: uses.get(&gpu.uuid).map(|u| u.utilization_pct),
                memory_used_mib: uses.get(&gpu.uuid).map(|u| u.memory_used_mib),
            })
            .collect();
        let taken: BTreeSet<u32> = held.iter().flat_map(|(_, g)| g.cpus.clone()).collect();
        let committed: f64 = held.iter().map(|(_, g)| g.memory_gb).sum();
        vec![crate::protocol::HostView {
            name: inventory.host.clone(),
            gpus,
            reserved_cpus: inventory
                .all_cpus
                .iter()
                .filter(|c| !inventory.cpus.contains(c))
                .copied()
                .collect(),
            cpus_free: inventory
                .cpus
                .iter()
                .filter(|c| !taken.contains(c))
                .copied()
                .collect(),
            cpus: inventory.cpus.clone(),
            memory_gb: inventory.memory_gb,
            memory_free_gb: inventory.memory_gb.map(|m| (m - committed).max(0.0)),
            sessions: held.into_iter().map(|(id, _)| id).collect(),
            queued,
        }]
    }
}
