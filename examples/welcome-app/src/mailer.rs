//! The mailer: "sends" by writing to the `sent_mail` table, once per idempotency key.

use crate::db::{Db, DbError, Inserted};

/// When a send fails on purpose (to show retries).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FailurePolicy {
    /// Never.
    Never,
    /// This share of sends, at random (`MAIL_FAIL_RATE`).
    Rate(f64),
    /// The first `n` attempts of every job (deterministic, for tests).
    FirstAttempts(u32),
}

/// Why a send did not happen.
#[derive(Debug, thiserror::Error)]
pub enum MailError {
    /// The (simulated) mail server is unavailable; a later attempt may work.
    #[error("smtp temporarily unavailable (simulated by MAIL_FAIL_RATE)")]
    Unavailable,
    /// The database failed.
    #[error("mail log: {0}")]
    Db(#[from] DbError),
}

/// What happened to a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Delivery {
    /// Sent now.
    Sent,
    /// Sent before under the same idempotency key: not sent again.
    AlreadySent,
}

/// One message of a [`Mailer::send_many`] call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outgoing {
    /// Its idempotency key: sent once per key.
    pub key: String,
    /// Where to.
    pub to: String,
    /// The subject.
    pub subject: String,
    /// The body.
    pub body: String,
    /// The job attempt that sends it (the failure policy reads it).
    pub attempt: u32,
}

/// Writes messages to the mail log.
#[derive(Debug, Clone)]
pub struct Mailer {
    db: Db,
    failures: FailurePolicy,
}

impl Mailer {
    /// A mailer writing to `db`.
    pub fn new(db: Db, failures: FailurePolicy) -> Self {
        Mailer { db, failures }
    }

    /// Sends once per `key`: a second send with the same key is a no-op that reports
    /// [`Delivery::AlreadySent`].
    pub async fn send(
        &self,
        key: &str,
        to: &str,
        subject: &str,
        body: &str,
        attempt: u32,
    ) -> Result<Delivery, MailError> {
        let fail = match self.failures {
            FailurePolicy::Never => false,
            FailurePolicy::Rate(rate) => random_unit() < rate,
            FailurePolicy::FirstAttempts(n) => attempt <= n,
        };
        if fail {
            return Err(MailError::Unavailable);
        }
        Ok(match self.db.insert_sent(key, to, subject, body).await? {
            Inserted::New(_) => Delivery::Sent,
            Inserted::AlreadyThere => Delivery::AlreadySent,
        })
    }

    /// Sends many messages in one call, as a provider's batch endpoint takes them: one
    /// outcome per message, in order; a message that fails does not fail the others.
    pub async fn send_many(&self, messages: &[Outgoing]) -> Vec<Result<Delivery, MailError>> {
        let mut outcomes = Vec::with_capacity(messages.len());
        for m in messages {
            outcomes.push(
                self.send(&m.key, &m.to, &m.subject, &m.body, m.attempt)
                    .await,
            );
        }
        outcomes
    }
}

/// A number in `[0, 1)` from the OS's randomness (through a v4 UUID).
fn random_unit() -> f64 {
    let bytes = uuid::Uuid::new_v4().into_bytes();
    let n = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
    f64::from(n) / (f64::from(u32::MAX) + 1.0)
}
