//! Outgoing mail, optional: with `smtp.host` set, people who forgot their password get a reset
//! link by e-mail ("Forgot password?" on the sign-in page). Without it (the usual offline
//! install) an administrator hands out reset links (`pictor user reset-link`, the admin page).
//!
//! SMTP through lettre: STARTTLS on 587 by default, implicit TLS on 465, or plain (only for a
//! relay on this machine or a trusted network). The password is read from the config file or
//! `PICTOR_SMTP_PASSWORD`, is never shown by `config show` and never logged.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use lettre::message::Mailbox;
use lettre::message::header::ContentType;
use lettre::transport::smtp::authentication::Credentials;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};

use crate::clock::Millis;

/// How the connection to the mail server is protected.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Security {
    /// Plain connection upgraded with STARTTLS (required, not opportunistic); port 587.
    StartTls,
    /// TLS from the first byte ("SMTPS"); port 465.
    Tls,
    /// No encryption: a local relay only (port 25).
    None,
}

impl Security {
    pub fn parse(s: &str) -> Result<Security, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "starttls" => Ok(Security::StartTls),
            "tls" | "smtps" => Ok(Security::Tls),
            "none" | "plain" => Ok(Security::None),
            _ => Err("one of starttls, tls, none".into()),
        }
    }

    fn default_port(self) -> u16 {
        match self {
            Security::StartTls => 587,
            Security::Tls => 465,
            Security::None => 25,
        }
    }
}

/// The `smtp.*` configuration.
#[derive(Clone)]
pub struct SmtpOptions {
    pub host: String,
    pub port: Option<u16>,
    pub security: Security,
    pub username: Option<String>,
    pub password: Option<String>,
    /// `Pictor <pictor@example.org>` or a bare address.
    pub from: String,
}

impl std::fmt::Debug for SmtpOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SmtpOptions")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("security", &self.security)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "(hidden)"))
            .field("from", &self.from)
            .finish()
    }
}

/// Checks a sender address (`smtp.from`).
pub fn parse_mailbox(s: &str) -> Result<(), String> {
    s.trim()
        .parse::<Mailbox>()
        .map(|_| ())
        .map_err(|e| format!("not a mail address: {e}"))
}

#[derive(Debug, thiserror::Error)]
pub enum MailError {
    /// (The address is not in the message: errors are logged.)
    #[error("the recipient's address cannot receive mail")]
    Address,
    #[error("the mail server refused or could not be reached: {0}")]
    Send(String),
}

/// How soon a second reset mail may go to the same address (one person's inbox is not a target).
pub const RESEND_AFTER_MS: Millis = 5 * 60 * 1000;

pub struct Mailer {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
    /// When each address (lower case) was last sent a reset link.
    last_sent: Mutex<HashMap<String, Millis>>,
}

impl Mailer {
    pub fn new(o: &SmtpOptions) -> Result<Mailer, String> {
        let from: Mailbox = o
            .from
            .trim()
            .parse()
            .map_err(|e| format!("smtp.from: not a mail address: {e}"))?;
        let builder = match o.security {
            Security::StartTls => AsyncSmtpTransport::<Tokio1Executor>::starttls_relay(&o.host)
                .map_err(|e| format!("smtp.host: {e}"))?,
            Security::Tls => AsyncSmtpTransport::<Tokio1Executor>::relay(&o.host)
                .map_err(|e| format!("smtp.host: {e}"))?,
            Security::None => AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(&o.host),
        };
        let mut builder = builder
            .port(o.port.unwrap_or(o.security.default_port()))
            .timeout(Some(Duration::from_secs(20)));
        if let Some(user) = &o.username {
            builder = builder.credentials(Credentials::new(
                user.clone(),
                o.password.clone().unwrap_or_default(),
            ));
        }
        Ok(Mailer {
            transport: builder.build(),
            from,
            last_sent: Mutex::new(HashMap::new()),
        })
    }

    /// Whether a reset mail may go to `email` now (at most one per [`RESEND_AFTER_MS`]); if so,
    /// the time is taken.
    pub fn may_send_reset(&self, email: &str, now: Millis) -> bool {
        let mut last = self.last_sent.lock().unwrap_or_else(|p| p.into_inner());
        last.retain(|_, t| now.saturating_sub(*t) < RESEND_AFTER_MS);
        if last.contains_key(email) {
            return false;
        }
        last.insert(email.to_owned(), now);
        true
    }

    /// Sends a plain-text mail.
    pub async fn send(&self, to: &str, subject: &str, body: String) -> Result<(), MailError> {
        let to: Mailbox = to.parse().map_err(|_| MailError::Address)?;
        let message = Message::builder()
            .from(self.from.clone())
            .to(to)
            .subject(subject)
            .header(ContentType::TEXT_PLAIN)
            .body(body)
            .map_err(|e| MailError::Send(e.to_string()))?;
        self.transport
            .send(message)
            .await
            .map(|_| ())
            .map_err(|e| MailError::Send(e.to_string()))
    }
}
