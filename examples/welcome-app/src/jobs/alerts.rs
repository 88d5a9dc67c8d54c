//! The dead-letter exit: an error-level alert when a job has used its last attempt.

use queue_core::{on_worker_event, WorkerEvent};

fn alert(event: &WorkerEvent) {
    if let WorkerEvent::Failed {
        queue,
        job_id,
        name,
        reason,
        attempt,
        max_attempts,
        is_final: true,
        ..
    } = event
    {
        tracing::error!(
            alert = "job-dead-lettered",
            %queue, %job_id, %name, attempts = attempt, max_attempts, %reason,
            "job exhausted its retries"
        );
    }
}

/// Alerts on welcome emails that gave up.
#[on_worker_event(super::Email, failed)]
pub async fn email_gave_up(event: WorkerEvent) {
    alert(&event);
}

/// Alerts on coupon jobs that gave up.
#[on_worker_event(super::Coupon, failed)]
pub async fn coupon_gave_up(event: WorkerEvent) {
    alert(&event);
}
