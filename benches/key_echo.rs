//! Keystroke echo through the server: the time from sending one key to a
//! shell (a `cat` reading the terminal) to its echo arriving back, with the
//! old request-and-reply input and the one-way input (id 0), interleaved in
//! one run so that the machine's drift hits both alike. Run with
//! `cargo bench --bench key_echo`; it prints p50/p99 (no assertion).

#![allow(clippy::unwrap_used)] // tests may unwrap: a panic is a failure with its message

mod common;

use std::time::{Duration, Instant};

use rebench::client::{Client, ClientReader, ClientWriter};
use rebench::protocol::{
    AttachMode, AttachReply, Credentials, Push, Request, ServerLine, ShellInfo, b64_decode,
    b64_encode,
};
use rebench::session::Kind;

const KEYS: usize = 300;

/// Waits for output holding `byte`; replies met on the way are counted.
async fn echo_of(reader: &mut ClientReader, byte: u8, replies: &mut usize) {
    loop {
        match reader.next_line().await.unwrap() {
            ServerLine::Event {
                event: Push::ShellOutput { data, .. },
            } if b64_decode(&data).unwrap().contains(&byte) => return,
            ServerLine::Response { .. } | ServerLine::Error { .. } => *replies += 1,
            _ => {}
        }
    }
}

async fn key(writer: &mut ClientWriter, session: &str, shell: u32, byte: u8, one_way: bool) {
    let request = Request::ShellInput {
        session: session.into(),
        shell,
        data: b64_encode(&[byte]),
    };
    if one_way {
        writer.post(request).await.unwrap();
    } else {
        writer.send(request).await.unwrap();
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut bench = common::BenchServer::start("echo", &[("REBENCH_BACKEND", "local")]).await?;
    let id = bench.running_session(Kind::Human).await?.id;
    let admin = &mut bench.admin;
    let creds: Credentials = admin
        .call(Request::Credentials {
            session: id.clone(),
        })
        .await?;
    let mut driver = Client::connect(
        std::path::Path::new(&creds.socket),
        Some(&creds.token),
        "bench",
    )
    .await?;
    let shell: ShellInfo = driver
        .call(Request::ShellOpen {
            session: id.clone(),
            cols: 80,
            rows: 24,
        })
        .await?;
    let _: AttachReply = driver
        .call(Request::ShellAttach {
            session: id.clone(),
            shell: shell.shell,
            mode: AttachMode::Driver,
        })
        .await?;
    let (mut reader, mut writer) = driver.into_parts();
    // A `cat` in raw mode echoes each key by itself.
    for b in b"stty raw -echo; cat\r" {
        key(&mut writer, &id, shell.shell, *b, true).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Let what the shell printed so far go by.
    while tokio::time::timeout(Duration::from_millis(200), reader.next_line())
        .await
        .is_ok()
    {}

    let (mut with_reply, mut one_way) = (Vec::new(), Vec::new());
    let mut replies = 0;
    for i in 0..KEYS * 2 {
        let byte = b'a' + (i % 26) as u8;
        let post = i % 2 == 1;
        let start = Instant::now();
        key(&mut writer, &id, shell.shell, byte, post).await;
        echo_of(&mut reader, byte, &mut replies).await;
        let took = start.elapsed();
        if post {
            one_way.push(took);
        } else {
            with_reply.push(took);
        }
    }
    // The last replies may still be on their way.
    while let Ok(Ok(line)) =
        tokio::time::timeout(Duration::from_millis(300), reader.next_line()).await
    {
        if matches!(line, ServerLine::Response { .. }) {
            replies += 1;
        }
    }
    let show = |name: &str, xs: &[Duration]| {
        println!(
            "{name:>14}: p50 {:.3} ms, p99 {:.3} ms over {} keys",
            common::ms(common::quantile(xs, 0.5)),
            common::ms(common::quantile(xs, 0.99)),
            xs.len()
        );
    };
    show("with a reply", &with_reply);
    show("one-way", &one_way);
    println!("replies received: {replies} (for {KEYS} keys sent with an id)");

    bench.stop().await;
    Ok(())
}
