//! The service's jobs: payloads, processors and the dead-letter alert; the monthly
//! report (a flow of stages) and the users export (long, with timeout and cancel).
//!
//! The four queues' contracts are declared here, in one place: each job's name, payload
//! type and output. Producers add payloads and processors take them by type, so a job
//! sent to the wrong queue, or a handler that returns something else, does not compile.

pub mod alerts;
pub mod coupons;
pub mod email;
pub mod exports;
pub mod reports;

use queue_core::job_queue;

use crate::db::MonthTotals;
use crate::mailer::Delivery;
use coupons::{BirthdayGrant, BirthdayScan};
use email::WelcomeEmail;
use exports::{DeliverExport, ExportRows, RowsWritten};
use reports::{Aggregate, Notify, Render, Rendered, Upload, Uploaded};

/// The email queue.
pub const EMAIL_QUEUE: &str = "email";
/// The coupon queue.
pub const COUPON_QUEUE: &str = "coupon";

/// The `email` queue: its payloads (addresses, names) are sealed in Redis.
#[job_queue("email", encrypted)]
#[derive(Debug)]
pub enum Email {
    /// A new user's welcome mail; what the mailer did.
    #[job("welcome", output = Delivery)]
    Welcome(WelcomeEmail),
}

/// The `coupon` queue: its payloads (who, which birthday) are sealed in Redis.
#[job_queue("coupon", encrypted)]
#[derive(Debug)]
pub enum Coupon {
    /// The day's scan; how many users were born on the day.
    #[job("birthday-scan", output = usize)]
    Scan(BirthdayScan),
    /// One user's grant; what happened (`granted`, `already granted`).
    #[job("birthday-grant", output = String)]
    Grant(BirthdayGrant),
}

/// The `report` queue: the monthly report's four steps.
#[job_queue("report")]
#[derive(Debug)]
pub enum Report {
    /// The month's figures.
    #[job("aggregate", output = MonthTotals)]
    Aggregate(Aggregate),
    /// The document.
    #[job("render", output = Rendered)]
    Render(Render),
    /// The stored file.
    #[job("upload", output = Uploaded)]
    Upload(Upload),
    /// The mail saying where it is.
    #[job("notify", output = Delivery)]
    Notify(Notify),
}

/// The `export` queue: the users export's two jobs.
#[job_queue("export")]
#[derive(Debug)]
pub enum Export {
    /// The batches of rows.
    #[job("rows", output = RowsWritten)]
    Rows(ExportRows),
    /// The joined file.
    #[job("deliver", output = RowsWritten)]
    Deliver(DeliverExport),
}
