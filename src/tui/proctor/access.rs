//! Getting onto the admin socket, with a clear word when we cannot: the
//! dashboard's operations are admin-only, and a participant's token does
//! not reach them.

use std::io::ErrorKind;
use std::path::Path;

use crate::client::{Client, ClientError};
use crate::paths::DataPaths;
use crate::protocol::ErrorCode;

/// Connects to the admin socket as `name` (starting a server when none
/// runs), and checks the server gave us the admin role.
pub async fn connect_admin(paths: &DataPaths, name: &str) -> anyhow::Result<Client> {
    let socket = paths.socket();
    // Probe first: connect_admin would take "permission denied" for "no
    // server" and try to start one.
    let client = match tokio::net::UnixStream::connect(&socket).await {
        Ok(probe) => {
            drop(probe);
            Client::connect(&socket, None, name).await
        }
        Err(e) if e.kind() == ErrorKind::PermissionDenied => {
            anyhow::bail!("{}", permission_denied(&socket))
        }
        Err(_) => Client::connect_admin(paths, name).await,
    };
    let client = client.map_err(|e| anyhow::anyhow!("{}", describe(&socket, &e)))?;
    if client.hello.role != "admin" {
        anyhow::bail!(
            "the server gave this connection the {:?} role on {}; the proctor dashboard needs an admin connection",
            client.hello.role,
            socket.display()
        );
    }
    Ok(client)
}

/// As `connect_admin` on a server that is already running: never starts
/// one (after a shutdown the operator decides when it comes back).
pub async fn reconnect_admin(paths: &DataPaths, name: &str) -> anyhow::Result<Client> {
    let socket = paths.socket();
    let client = Client::connect(&socket, None, name)
        .await
        .map_err(|e| anyhow::anyhow!("{}", describe(&socket, &e)))?;
    if client.hello.role != "admin" {
        anyhow::bail!("the server did not give this connection the admin role");
    }
    Ok(client)
}

pub fn permission_denied(socket: &Path) -> String {
    format!(
        "cannot open the admin socket {}: permission denied.\n\
         The proctor dashboard needs admin rights on the rebench server: run it as the \
         user who runs the server (the socket is private to that user, mode 0600), or \
         give --data-dir a data dir of your own. A participant's token (REBENCH_TOKEN) \
         does not give access to proctor operations.",
        socket.display()
    )
}

/// A connection error in words a proctor can act on.
pub fn describe(socket: &Path, e: &ClientError) -> String {
    match e {
        ClientError::NoServer { why, .. } if why.contains("ermission denied") => {
            permission_denied(socket)
        }
        ClientError::Server {
            code: ErrorCode::Forbidden | ErrorCode::NotAuthenticated,
            message,
        } => format!(
            "the server refused the proctor ({message}); proctor operations need the admin socket {}",
            socket.display()
        ),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permission_errors_name_the_socket_and_what_is_needed() {
        let socket = Path::new("/srv/rebench/rebench.sock");
        let e = ClientError::NoServer {
            socket: socket.into(),
            why: "Permission denied (os error 13)".into(),
        };
        let text = describe(socket, &e);
        assert!(text.contains("/srv/rebench/rebench.sock"), "{text}");
        assert!(text.contains("admin rights"), "{text}");
        let e = ClientError::Server {
            code: ErrorCode::Forbidden,
            message: "participants may not list sessions".into(),
        };
        assert!(describe(socket, &e).contains("admin socket /srv/rebench/rebench.sock"));
    }
}
