//! The monthly report, in four steps run as one flow: `aggregate` → `render` →
//! `upload` → `notify`, each the parent of the step before it, so that each runs once
//! the previous one is done and reads its result, typed.
//!
//! Every step is idempotent through a stage record (`aggregated`, `rendered`,
//! `uploaded`, `notified`, keyed by the report): a step that runs again (a retry, a
//! worker killed halfway, the whole flow added again after its jobs were removed) skips
//! its effect and returns the result on record. The effects themselves are safe to
//! repeat where a worker can die between the effect and its record: the file is stored
//! once per month (a primary key), the mail once per idempotency key.

use std::time::Duration;

use queue_core::prelude::*;
use queue_core::{processor, FlowJob};

use super::Report;
use crate::db::{Db, Inserted, MonthTotals};
use crate::mailer::{Delivery, Mailer};

/// The report queue.
pub const REPORT_QUEUE: &str = "report";

/// The stage machine of a report, one stage per step.
pub const REPORT_STAGES: &[&str] = &["aggregated", "rendered", "uploaded", "notified"];

/// The steps, in the order they run, with the stage each records.
pub const REPORT_STEPS: [(&str, &str); 4] = [
    ("aggregate", "aggregated"),
    ("render", "rendered"),
    ("upload", "uploaded"),
    ("notify", "notified"),
];

/// Who receives the "your report is ready" mail.
#[derive(Debug, Clone)]
pub struct ReportRecipient(pub String);

/// What every step is about: the month, `YYYY-MM`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReportMonth {
    /// `YYYY-MM`.
    pub month: String,
}

/// Each step's payload: its own type (so that the type names the job), the month as
/// JSON (`{"month": ..}`, as the steps always stored it), read through to `ReportMonth`.
macro_rules! step_payloads {
    ($($step:ident: $doc:literal),* $(,)?) => {$(
        #[doc = $doc]
        #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $step(pub ReportMonth);

        impl std::ops::Deref for $step {
            type Target = ReportMonth;
            fn deref(&self) -> &ReportMonth {
                &self.0
            }
        }
    )*};
}

step_payloads!(
    Aggregate: "Data of `aggregate`.",
    Render: "Data of `render`.",
    Upload: "Data of `upload`.",
    Notify: "Data of `notify`, the flow's root.",
);

/// `render`'s result: the document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rendered {
    /// The document's text.
    pub document: String,
}

/// `upload`'s result: where the file is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Uploaded {
    /// The file's location.
    pub location: String,
    /// Whether this run stored it (`false`: it was there already).
    pub stored_now: bool,
}

/// The report's record key, and its root job's id: `report-YYYY-MM`.
pub fn report_id(month: &str) -> String {
    format!("report-{month}")
}

/// The job id of one step: `report-YYYY-MM-<step>` (`report-YYYY-MM` for `notify`,
/// the root), all under the report's id prefix.
pub fn step_job_id(month: &str, step: &str) -> String {
    if step == "notify" {
        report_id(month)
    } else {
        format!("{}-{step}", report_id(month))
    }
}

/// The report's flow: `notify` waits for `upload`, which waits for `render`, which
/// waits for `aggregate`. A step that fails for good fails every step after it, naming
/// it. Each step has 3 attempts, 1 s apart and doubling.
pub fn flow(queue: &Queue<Report>, month: &str) -> FlowJob {
    let options = |step: &str| {
        JobOptions::new()
            .job_id(step_job_id(month, step))
            .attempts(3)
            .backoff(Backoff::exponential(Duration::from_secs(1)))
    };
    let month = ReportMonth {
        month: month.to_owned(),
    };
    let aggregate = queue
        .flow_job_of(Aggregate(month.clone()))
        .options(options("aggregate"));
    let render = queue
        .flow_job_of(Render(month.clone()))
        .options(options("render"))
        .child(OnChildFailure::FailParent, aggregate);
    let upload = queue
        .flow_job_of(Upload(month.clone()))
        .options(options("upload"))
        .child(OnChildFailure::FailParent, render);
    queue
        .flow_job_of(Notify(month))
        .options(options("notify"))
        .child(OnChildFailure::FailParent, upload)
}

/// The one result of a step's single child.
fn previous<R: Clone>(results: &ChildResults<R>, step: &str) -> Result<R, JobError> {
    results.values().next().cloned().ok_or_else(|| {
        JobError::unrecoverable(std::io::Error::other(format!(
            "{step}: the previous step left no result"
        )))
    })
}

/// The report's steps. Holds nothing itself: built from `Default`.
#[derive(Debug, Default)]
pub struct Reports;

#[processor(Report, concurrency = 2, per_minute_metrics = 1440)]
impl Reports {
    /// Counts the month's birthdays and coupons.
    #[job]
    pub async fn aggregate(
        &self,
        job: Job<Aggregate>,
        db: Dep<Db>,
    ) -> Result<MonthTotals, JobError> {
        let key = report_id(&job.data.month);
        let totals = db
            .step(REPORT_STAGES, &key, "aggregated", || async {
                db.month_totals(&job.data.month).await
            })
            .await?;
        Ok(totals.into_result())
    }

    /// Renders the document from the figures.
    #[job]
    pub async fn render(
        &self,
        job: Job<Render>,
        totals: ChildResults<MonthTotals>,
        db: Dep<Db>,
    ) -> Result<Rendered, JobError> {
        let totals = previous(&totals, "render")?;
        let month = &job.data.month;
        let rendered = db
            .step(REPORT_STAGES, &report_id(month), "rendered", || async {
                Ok::<_, JobError>(Rendered {
                    document: format!(
                        "Monthly report {month}\nbirthdays: {}\ncoupons granted: {}\n",
                        totals.birthdays, totals.coupons
                    ),
                })
            })
            .await?;
        Ok(rendered.into_result())
    }

    /// Stores the document as the month's file (once: a file already there is kept).
    #[job]
    pub async fn upload(
        &self,
        job: Job<Upload>,
        rendered: ChildResults<Rendered>,
        db: Dep<Db>,
    ) -> Result<Uploaded, JobError> {
        let rendered = previous(&rendered, "upload")?;
        let month = &job.data.month;
        let uploaded = db
            .step(REPORT_STAGES, &report_id(month), "uploaded", || async {
                let stored = db.store_report_file(month, &rendered.document).await?;
                Ok::<_, JobError>(Uploaded {
                    location: format!("reports/{month}.txt"),
                    stored_now: matches!(stored, Inserted::New(_)),
                })
            })
            .await?;
        Ok(uploaded.into_result())
    }

    /// Mails the recipient where the report is (once per report: the mail log's key).
    #[job]
    pub async fn notify(
        &self,
        job: Job<Notify>,
        uploaded: ChildResults<Uploaded>,
        db: Dep<Db>,
        mailer: Dep<Mailer>,
        recipient: Dep<ReportRecipient>,
    ) -> Result<Delivery, JobError> {
        let uploaded = previous(&uploaded, "notify")?;
        let key = report_id(&job.data.month);
        let delivery = db
            .step(REPORT_STAGES, &key, "notified", || async {
                let body = format!("The report is ready: {}", uploaded.location);
                mailer
                    .send(&key, &recipient.0, "Monthly report", &body, job.attempt())
                    .await
                    .map_err(JobError::from)
            })
            .await?;
        Ok(delivery.into_result())
    }
}
