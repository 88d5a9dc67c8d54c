//! Birthday coupons: a daily scan (from a job scheduler) fans out one grant job per
//! user whose birthday it is; a grant is recorded once per user, campaign and day.

use chrono::{NaiveDate, Utc};
use queue_core::prelude::*;
use queue_core::{processor, store::OnceOutcome};
use serde::{Deserialize, Serialize};

use crate::db::Db;
use crate::mailer::Mailer;

/// The stages of a birthday grant.
pub const GRANT_STAGES: &[&str] = &["granted", "notified"];

/// The campaign a birthday grant belongs to.
pub const CAMPAIGN: &str = "birthday";
/// The scheduler that adds the daily scan.
pub const SCHEDULER_ID: &str = "birthday-daily";
/// When the daily scan runs: 00:05, in the configured time zone.
pub const DAILY_CRON: &str = "5 0 * * *";

/// Data of a `birthday-scan` job: the day to scan, or today in the service's time zone.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BirthdayScan {
    /// `YYYY-MM-DD`; absent for the scheduled scan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub date: Option<String>,
}

/// Data of a `birthday-grant` job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BirthdayGrant {
    /// Who gets the coupon (the public id).
    pub user_id: String,
    /// The birthday, `YYYY-MM-DD` of this year.
    pub date: String,
}

/// The job id of a grant: `birthday-` and a digest of the user's public id and the day,
/// so that a second scan of the same day adds no second grant job. A digest, not the two
/// in clear: a job id stays readable in Redis (the queue seals payloads, not ids), and
/// `<user>-<day>` would tell every reader of Redis whose birthday it is. (A reader who
/// already holds a user's public id can still test it against the days of the year; an
/// opaque id kept in the database would hide even that.)
pub fn grant_job_id(user_id: &str, date: &str) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(format!("birthday-grant\n{user_id}\n{date}"));
    let hex: String = digest[..12].iter().map(|b| format!("{b:02x}")).collect();
    format!("birthday-{hex}")
}

/// The most days one scan makes up: a month. A scan that finds the last covered day
/// further back (a service stopped for longer, a restored old database) covers the
/// month before today and says what it left out.
pub const MAX_CATCH_UP_DAYS: u64 = 31;

/// The days a scan on `today` covers, oldest first: the days after `since` (the last
/// one covered), at most [`MAX_CATCH_UP_DAYS`] of them; today alone when it is the
/// first scan or `since` is today (a second scan of a day adds no second grant).
pub fn days_to_scan(since: Option<NaiveDate>, today: NaiveDate) -> Vec<NaiveDate> {
    let first = match since {
        Some(since) if since < today => since + chrono::Days::new(1),
        _ => today,
    };
    let earliest = today - chrono::Days::new(MAX_CATCH_UP_DAYS - 1);
    if first < earliest {
        tracing::warn!(%first, %earliest, "the birthday scan covers the last {MAX_CATCH_UP_DAYS} days only; days before were not scanned");
    }
    first
        .max(earliest)
        .iter_days()
        .take_while(|day| *day <= today)
        .collect()
}

/// Adds one grant job per user born on `date` (ids from the user and the day: a second
/// scan of the day adds none); returns how many were born on it.
async fn grant_day(
    db: &Db,
    coupons: &Queue<super::Coupon>,
    date: NaiveDate,
) -> Result<usize, JobError> {
    let users = db.users_born_on(date).await?;
    let date = date.format("%Y-%m-%d").to_string();
    let grants = users.iter().map(|user| {
        let grant = BirthdayGrant {
            user_id: user.public_id.clone(),
            date: date.clone(),
        };
        let options = JobOptions::new()
            .job_id(grant_job_id(&user.public_id, &date))
            .attempts(5);
        (grant, options)
    });
    let added = coupons.add_jobs(grants).await?;
    let new = added.iter().filter(|a| !a.duplicate).count();
    tracing::info!(%date, birthdays = users.len(), new_grant_jobs = new, "birthday scan done");
    Ok(users.len())
}

/// The time zone the scheduled scan reads "today" in.
#[derive(Debug, Clone, Copy)]
pub struct ScanZone(pub chrono_tz::Tz);

/// Coupon processing. Holds nothing itself: built from `Default`.
#[derive(Debug, Default)]
pub struct Coupons;

#[processor(super::Coupon, concurrency = 5, per_minute_metrics = 1440)]
impl Coupons {
    /// Adds one grant job per user born on the day.
    #[job]
    pub async fn scan(
        &self,
        job: Job<BirthdayScan>,
        db: Dep<Db>,
        zone: Dep<ScanZone>,
        app: Dep<QueueApp>,
    ) -> Result<usize, JobError> {
        let coupons = app.queue_of::<super::Coupon>()?;
        let Some(date) = &job.data.date else {
            // Today's scan, and every day since the last one that covered its day: a
            // run missed while no worker ran is made up once (the scheduler's
            // default), and covers the days it missed.
            let today = Utc::now().with_timezone(&zone.0).date_naive();
            let since = db.scanned_through(CAMPAIGN).await?;
            let mut birthdays = 0;
            for day in days_to_scan(since, today) {
                birthdays += grant_day(&db, &coupons, day).await?;
            }
            db.scan_through(CAMPAIGN, today).await?;
            return Ok(birthdays);
        };
        let date = NaiveDate::parse_from_str(date, "%Y-%m-%d").map_err(|e| {
            JobError::unrecoverable(std::io::Error::other(format!("bad date {date:?}: {e}")))
        })?;
        grant_day(&db, &coupons, date).await
    }

    /// A grant in two stages, kept in the database: `granted` records the coupon once
    /// per user, campaign and day (an operation record), then `notified` mails the user
    /// about it (once per grant: the mail log's key). A re-run (a retry, a second grant
    /// job, a worker killed between the two) skips the stages that are done.
    #[job]
    pub async fn grant(
        &self,
        job: Job<BirthdayGrant>,
        db: Dep<Db>,
        mailer: Dep<Mailer>,
    ) -> Result<String, JobError> {
        let BirthdayGrant { user_id, date } = &job.data;
        let Some(user) = db.user(user_id).await? else {
            return Err(JobError::unrecoverable(std::io::Error::other(format!(
                "no user {user_id}"
            ))));
        };
        let key = format!("grant-{user_id}-{CAMPAIGN}-{date}");
        let granted = db
            .step(GRANT_STAGES, &key, "granted", || async {
                // `true` when this grant is new (not one recorded before).
                Ok::<_, JobError>(match db.grant_once(user.id, CAMPAIGN, date).await? {
                    OnceOutcome::Ran(Some(_)) => true,
                    OnceOutcome::Ran(None) | OnceOutcome::AlreadyDone(_) => false,
                })
            })
            .await?;
        // New only if the stage ran now and found no earlier grant.
        let new = matches!(granted, OnceOutcome::Ran(true));
        db.step(GRANT_STAGES, &key, "notified", || async {
            let body = format!(
                "Happy birthday, {}! A coupon is waiting for you.",
                user.name
            );
            mailer
                .send(
                    &key,
                    &user.email,
                    "Your birthday coupon",
                    &body,
                    job.attempt(),
                )
                .await
                .map_err(JobError::from)
        })
        .await?;
        Ok(if new { "granted" } else { "already granted" }.to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::{days_to_scan, MAX_CATCH_UP_DAYS};
    use chrono::NaiveDate;

    fn day(s: &str) -> NaiveDate {
        NaiveDate::parse_from_str(s, "%Y-%m-%d").expect("a date")
    }

    #[test]
    fn a_scan_covers_the_days_since_the_last_and_today_at_most_a_month() {
        let today = day("2026-03-02");
        assert_eq!(days_to_scan(None, today), [today], "the first scan");
        assert_eq!(days_to_scan(Some(today), today), [today], "again today");
        assert_eq!(
            days_to_scan(Some(day("2026-02-27")), today),
            [day("2026-02-28"), day("2026-03-01"), today],
            "the days missed, across a month's end"
        );
        let long_ago = days_to_scan(Some(day("2025-01-01")), today);
        assert_eq!(long_ago.len() as u64, MAX_CATCH_UP_DAYS);
        assert_eq!(long_ago.last(), Some(&today));
    }
}
