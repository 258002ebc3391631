//! Campaigns on the server: registering one and its runner, the one
//! session per run, stopping, and pausing a campaign's sessions when its
//! runner goes away (so an unattended agent never spends its budget).

use std::sync::Arc;

use chrono::Utc;

use super::{Actor, Hub};
use crate::protocol::{Audience, CampaignView, CreateSession, ErrorCode, SessionView};
use crate::server::host::{Host, OpError, OpResult};
use crate::session::campaign::{CampaignPlan, CampaignRecord, RunPlan, valid_name};
use crate::session::{CampaignRunRef, EndReason, Kind, PauseReason, Phase};

/// The process running a campaign: the connection that opened it (the
/// claim lasts as long as it does) and its process, whose other
/// connections may make the campaign's sessions too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Runner {
    pub connection: u64,
    pub pid: Option<i32>,
}

impl Runner {
    fn is(&self, by: &Actor) -> bool {
        by.connection != 0
            && (self.connection == by.connection
                || (self.pid.is_some() && by.origin.as_ref().map(|o| o.pid) == self.pid))
    }
}

/// Holds a campaign run while its session is being made, so that two
/// requests cannot both make one.
pub struct RunReservation {
    hub: Arc<Hub>,
    run: CampaignRunRef,
    pub plan: RunPlan,
}

impl Drop for RunReservation {
    fn drop(&mut self) {
        self.hub
            .campaign_runs_starting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.run);
    }
}

fn check_plan(plan: &CampaignPlan) -> OpResult<()> {
    let bad = |m: String| Err(OpError::new(ErrorCode::BadRequest, m));
    if !valid_name(&plan.name) {
        return bad(format!(
            "campaign name {:?}: use lowercase letters, digits and dashes (at most 64)",
            plan.name
        ));
    }
    if plan.concurrency == 0 {
        return bad("concurrency must be at least 1".into());
    }
    if plan.runs.is_empty() {
        return bad("the campaign plans no runs".into());
    }
    let mut ids = std::collections::HashSet::new();
    for run in &plan.runs {
        if !ids.insert(run.id.as_str()) {
            return bad(format!("run {} is planned twice", run.id));
        }
        if run.length_s == 0 {
            return bad(format!("run {} has no length", run.id));
        }
    }
    Ok(())
}

impl Hub {
    /// The sessions made for campaign `name`, as `audience` sees them.
    async fn campaign_sessions(&self, name: &str, audience: Audience) -> Vec<SessionView> {
        let mut views = Vec::new();
        for host in self.campaign_hosts(name) {
            views.push(host.view(audience, false).await);
        }
        views
    }

    fn campaign_hosts(&self, name: &str) -> Vec<Arc<Host>> {
        self.all_hosts()
            .into_iter()
            .filter(|h| h.meta.campaign.as_ref().is_some_and(|c| c.campaign == name))
            .collect()
    }

    fn runner_of(&self, name: &str) -> Option<Runner> {
        self.campaign_runners
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(name)
            .copied()
    }

    fn stored_campaign(&self, name: &str) -> OpResult<CampaignRecord> {
        self.store
            .campaign(name)
            .map_err(OpError::internal)?
            .ok_or_else(|| OpError::new(ErrorCode::NotFound, format!("no campaign {name:?}")))
    }

    async fn campaign_view(&self, record: &CampaignRecord) -> CampaignView {
        let name = &record.plan.name;
        let sessions = self.campaign_sessions(name, Audience::Admin).await;
        CampaignView::new(record, &sessions, self.runner_of(name).is_some())
    }

    /// Registers `plan` (or finds it again) and makes `by`'s connection its runner.
    pub async fn campaign_open(&self, plan: CampaignPlan, by: &Actor) -> OpResult<CampaignView> {
        check_plan(&plan)?;
        let name = plan.name.clone();
        let record = match self.store.campaign(&name).map_err(OpError::internal)? {
            Some(old) if old.plan.spec_hash != plan.spec_hash => {
                return Err(OpError::new(
                    ErrorCode::Refused,
                    format!(
                        "campaign {name} was started on {} from a different plan ({}): \
                         its runs would not be comparable; give the changed campaign another name",
                        old.created_at.format("%Y-%m-%d %H:%M UTC"),
                        old.plan.file
                    ),
                ));
            }
            Some(mut old) => {
                // Running it again after `campaign stop` continues it.
                old.stopped_at = None;
                old.plan.file = plan.file;
                old
            }
            None => CampaignRecord {
                plan,
                created_at: Utc::now(),
                stopped_at: None,
            },
        };
        {
            let mut runners = self
                .campaign_runners
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            match runners.get(&name) {
                Some(runner) if runner.connection != by.connection => {
                    return Err(OpError::new(
                        ErrorCode::Busy,
                        format!(
                            "campaign {name} is being run by another `rebench campaign run`; \
                             stop that one first (its sessions pause when it goes)"
                        ),
                    ));
                }
                _ => {
                    runners.insert(
                        name.clone(),
                        Runner {
                            connection: by.connection,
                            pid: by.origin.as_ref().map(|o| o.pid),
                        },
                    );
                }
            }
        }
        if let Err(e) = self.store.put_campaign(&record).await {
            self.release_runner(&name, by.connection);
            return Err(OpError::internal(e));
        }
        Ok(self.campaign_view(&record).await)
    }

    fn release_runner(&self, name: &str, connection: u64) {
        let mut runners = self
            .campaign_runners
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if runners
            .get(name)
            .is_some_and(|r| r.connection == connection)
        {
            runners.remove(name);
        }
    }

    pub async fn campaign_show(&self, name: &str) -> OpResult<CampaignView> {
        let record = self.stored_campaign(name)?;
        Ok(self.campaign_view(&record).await)
    }

    pub async fn campaign_list(&self) -> OpResult<Vec<CampaignView>> {
        let mut views = Vec::new();
        for record in self.store.campaigns().map_err(OpError::internal)? {
            views.push(self.campaign_view(&record).await);
        }
        Ok(views)
    }

    /// No run starts after this; the campaign's unfinished sessions end as abandoned.
    pub async fn campaign_stop(&self, name: &str, by: &Actor) -> OpResult<CampaignView> {
        let mut record = self.stored_campaign(name)?;
        if record.stopped_at.is_none() {
            record.stopped_at = Some(Utc::now());
            self.store
                .put_campaign(&record)
                .await
                .map_err(OpError::internal)?;
        }
        for host in self.campaign_hosts(name) {
            if host.live.lock().await.state.phase() == Phase::Ended {
                continue;
            }
            let ended = self
                .finish(
                    &host,
                    EndReason::Abandoned,
                    &by.name,
                    false,
                    Some("campaign stopped".into()),
                )
                .await;
            if let Err(e) = ended {
                tracing::warn!(session = %host.id(), "campaign stop could not end it: {e}");
            }
        }
        Ok(self.campaign_view(&record).await)
    }

    /// A campaign session just made (and visible to `campaign_stop`'s
    /// scan) whose campaign was stopped meanwhile ends at once: the stop
    /// writes `stopped_at` before it scans, so one of the two sees the other.
    pub async fn end_if_campaign_stopped(&self, host: &Arc<Host>) -> OpResult<()> {
        let Some(run) = &host.meta.campaign else {
            return Ok(());
        };
        let stopped = self
            .store
            .campaign(&run.campaign)
            .map_err(OpError::internal)?
            .is_some_and(|c| c.stopped_at.is_some());
        if !stopped {
            return Ok(());
        }
        // The stop's own scan may have ended it already.
        let _ = self
            .finish(
                host,
                EndReason::Abandoned,
                crate::session::SYSTEM,
                false,
                Some("campaign stopped".into()),
            )
            .await;
        Err(OpError::new(
            ErrorCode::Refused,
            format!(
                "campaign {} was stopped while this session was made",
                run.campaign
            ),
        ))
    }

    /// A connection closed: the campaigns it ran lose their runner, and
    /// their running sessions pause until a runner takes them up again.
    pub async fn campaign_runner_gone(&self, connection: u64) {
        let names: Vec<String> = {
            let mut runners = self
                .campaign_runners
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            let names = runners
                .iter()
                .filter(|(_, r)| r.connection == connection)
                .map(|(n, _)| n.clone())
                .collect::<Vec<_>>();
            for name in &names {
                runners.remove(name);
            }
            names
        };
        for name in names {
            for host in self.campaign_hosts(&name) {
                if host.live.lock().await.state.phase() != Phase::Running {
                    continue;
                }
                let note = format!(
                    "the runner of campaign {name} went away; `rebench campaign run` resumes this run"
                );
                if let Err(e) = self
                    .pause(
                        host.id(),
                        PauseReason::TechnicalIssue,
                        Some(note),
                        &super::budget::system(),
                    )
                    .await
                {
                    tracing::warn!(session = %host.id(), "could not pause a runnerless campaign session: {e}");
                }
            }
        }
    }

    /// For a session asked for a campaign run: checks that the asker runs
    /// the campaign and that the run has no session yet, and holds the run
    /// until the returned reservation is dropped.
    pub fn reserve_campaign_run(
        self: &Arc<Self>,
        req: &CreateSession,
        by: &Actor,
    ) -> OpResult<Option<RunReservation>> {
        let Some(run) = &req.campaign else {
            return Ok(None);
        };
        let refused = |m: String| Err(OpError::new(ErrorCode::Refused, m));
        if req.kind != Kind::Agent {
            return refused("campaign sessions are agent sessions (kind agent)".into());
        }
        if !self.runner_of(&run.campaign).is_some_and(|r| r.is(by)) {
            return refused(format!(
                "only the runner of campaign {} makes its sessions (`rebench campaign run`)",
                run.campaign
            ));
        }
        let record = self.stored_campaign(&run.campaign)?;
        if record.stopped_at.is_some() {
            return refused(format!("campaign {} is stopped", run.campaign));
        }
        let Some(plan) = record.plan.runs.iter().find(|r| r.id == run.run).cloned() else {
            return Err(OpError::new(
                ErrorCode::NotFound,
                format!("campaign {} plans no run {}", run.campaign, run.run),
            ));
        };
        if let Some(host) = self
            .all_hosts()
            .into_iter()
            .find(|h| h.meta.campaign.as_ref() == Some(run))
        {
            return Err(OpError::state(format!(
                "run {} of campaign {} already has session {}",
                run.run,
                run.campaign,
                host.id()
            )));
        }
        if !self
            .campaign_runs_starting
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(run.clone())
        {
            return Err(OpError::new(
                ErrorCode::Busy,
                format!("run {} of campaign {} is being made", run.run, run.campaign),
            ));
        }
        Ok(Some(RunReservation {
            hub: self.clone(),
            run: run.clone(),
            plan,
        }))
    }
}
