//! A small SMTP server for tests (RFC 5321 without extensions beyond 8BITMIME: greeting, EHLO,
//! MAIL, RCPT, DATA, RSET, QUIT), standing in for the mail server Pictor's "Forgot password?"
//! talks to, and a [`TestServer`] configured to use it.

use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use super::{Options, TestServer};

/// One mail as the SMTP server received it.
#[derive(Debug)]
pub struct Mail {
    pub from: String,
    pub to: Vec<String>,
    pub data: String,
}

/// A minimal SMTP server (RFC 5321, no extensions beyond 8BITMIME): every mail it accepts is
/// sent on the channel.
pub async fn smtp_server() -> (u16, mpsc::UnboundedReceiver<Mail>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        loop {
            let Ok((sock, _)) = listener.accept().await else {
                return;
            };
            let tx = tx.clone();
            tokio::spawn(async move {
                let (r, mut w) = sock.into_split();
                let mut lines = BufReader::new(r);
                w.write_all(b"220 mail.test ESMTP ready\r\n").await.unwrap();
                let (mut from, mut to) = (String::new(), Vec::new());
                let mut line = String::new();
                loop {
                    line.clear();
                    if lines.read_line(&mut line).await.unwrap_or(0) == 0 {
                        return;
                    }
                    let cmd = line.trim_end().to_string();
                    let upper = cmd.to_ascii_uppercase();
                    let reply: &[u8] = if upper.starts_with("EHLO") {
                        b"250-mail.test\r\n250 8BITMIME\r\n"
                    } else if upper.starts_with("HELO") || upper.starts_with("NOOP") {
                        b"250 ok\r\n"
                    } else if upper.starts_with("MAIL FROM:") {
                        from = cmd[10..].trim().to_string();
                        b"250 ok\r\n"
                    } else if upper.starts_with("RCPT TO:") {
                        to.push(cmd[8..].trim().to_string());
                        b"250 ok\r\n"
                    } else if upper.starts_with("RSET") {
                        from.clear();
                        to.clear();
                        b"250 ok\r\n"
                    } else if upper == "DATA" {
                        w.write_all(b"354 go on\r\n").await.unwrap();
                        let mut data = String::new();
                        loop {
                            line.clear();
                            if lines.read_line(&mut line).await.unwrap_or(0) == 0 {
                                return;
                            }
                            if line == ".\r\n" {
                                break;
                            }
                            data.push_str(line.strip_prefix('.').unwrap_or(&line));
                        }
                        let mail = Mail {
                            from: std::mem::take(&mut from),
                            to: std::mem::take(&mut to),
                            data,
                        };
                        let _ = tx.send(mail);
                        b"250 queued\r\n"
                    } else if upper.starts_with("QUIT") {
                        let _ = w.write_all(b"221 bye\r\n").await;
                        return;
                    } else {
                        b"502 not implemented\r\n"
                    };
                    w.write_all(reply).await.unwrap();
                }
            });
        }
    });
    (port, rx)
}

/// The SMTP server's port for the server's configuration (`Options::tweak` is a plain fn).
static SMTP_PORT: AtomicU16 = AtomicU16::new(0);

pub async fn server_with_mail() -> (TestServer, mpsc::UnboundedReceiver<Mail>) {
    let (port, mails) = smtp_server().await;
    SMTP_PORT.store(port, Ordering::SeqCst);
    let s = TestServer::start_with(Options {
        tweak: |c| {
            c.smtp = Some(pictor::mail::SmtpOptions {
                host: "127.0.0.1".into(),
                port: Some(SMTP_PORT.load(Ordering::SeqCst)),
                security: pictor::mail::Security::None,
                username: None,
                password: None,
                from: "Pictor <pictor@mail.test>".into(),
            })
        },
        ..Options::default()
    })
    .await;
    (s, mails)
}

pub async fn next_mail(mails: &mut mpsc::UnboundedReceiver<Mail>) -> Mail {
    tokio::time::timeout(Duration::from_secs(30), mails.recv())
        .await
        .expect("a mail within 30 s")
        .expect("the SMTP server runs")
}

/// The mail's body with quoted-printable soft line breaks and `=XX` escapes undone.
pub fn body_text(mail: &Mail) -> String {
    let (headers, body) = mail.data.split_once("\r\n\r\n").unwrap();
    let qp = headers
        .to_ascii_lowercase()
        .contains("content-transfer-encoding: quoted-printable");
    let b64 = headers
        .to_ascii_lowercase()
        .contains("content-transfer-encoding: base64");
    let bytes = if b64 {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD
            .decode(body.split_whitespace().collect::<String>())
            .unwrap()
    } else if qp {
        let joined = body.replace("=\r\n", "");
        let mut out = Vec::new();
        let b = joined.as_bytes();
        let mut i = 0;
        while i < b.len() {
            if b[i] == b'='
                && let Some(Ok(v)) = joined.get(i + 1..i + 3).map(|h| u8::from_str_radix(h, 16))
            {
                out.push(v);
                i += 3;
                continue;
            }
            out.push(b[i]);
            i += 1;
        }
        out
    } else {
        body.as_bytes().to_vec()
    };
    String::from_utf8(bytes).unwrap().replace("\r\n", "\n")
}
