//! The workspace connects as the session's participant (so hidden scores
//! stay hidden and actions are recorded as theirs): the admin socket only
//! hands out the session's participant credentials.

use std::path::Path;

use crate::client::Client;
use crate::paths::DataPaths;
use crate::protocol::{Credentials, Request};

/// Connects as the participant, starting a server when none runs.
pub async fn open(paths: &DataPaths, session: &str) -> anyhow::Result<Client> {
    let admin = Client::connect_admin(paths, "workspace (setup)").await?;
    as_participant(admin, session).await
}

/// As `open`, on a server that is already running (never starts one:
/// after a shutdown the operator decides when it comes back).
pub async fn reopen(paths: &DataPaths, session: &str) -> anyhow::Result<Client> {
    let admin = Client::connect(&paths.socket(), None, "workspace (setup)").await?;
    as_participant(admin, session).await
}

async fn as_participant(mut admin: Client, session: &str) -> anyhow::Result<Client> {
    let creds: Credentials = admin
        .call(Request::Credentials {
            session: session.to_string(),
        })
        .await?;
    drop(admin);
    Ok(Client::connect(Path::new(&creds.socket), Some(&creds.token), "workspace").await?)
}
