use super::*;

fn failures(received: &mut broadcast::Receiver<WorkerEvent>) -> Vec<(u32, u32, bool)> {
    let mut failures = Vec::new();
    while let Ok(event) = received.try_recv() {
        if let WorkerEvent::Failed {
            attempt,
            max_attempts,
            is_final,
            ..
        } = event
        {
            failures.push((attempt, max_attempts, is_final));
        }
    }
    failures
}

/// A job's facts as the worker shares them with the tracker.
fn meta(id: &str, name: &str, attempt: u32, max_attempts: u32) -> Arc<JobMeta> {
    let options = crate::options::JobOptions {
        attempts: Some(max_attempts),
        ..Default::default()
    };
    Arc::new(JobMeta {
        id: id.to_owned(),
        name: name.to_owned(),
        queue: Arc::from("q"),
        attempts_made: attempt - 1,
        attempts_started: attempt,
        timestamp_ms: 0,
        options,
    })
}

fn failed(job_id: &str, reason: &str) -> EngineEvent {
    EngineEvent::Failed {
        job_id: job_id.into(),
        reason: reason.into(),
    }
}

fn nothing_kept(tracker: &AttemptTracker) -> bool {
    let book = tracker.book();
    book.running.is_empty() && book.awaiting.is_empty()
}

#[test]
fn failures_carry_attempt_facts_and_finality() {
    let (tx, mut rx) = broadcast::channel(8);
    let tracker = AttemptTracker::new("email".into(), tx);
    let run = tracker.started(&meta("j1", "welcome", 2, 3));
    tracker.ended(
        &run,
        AttemptOutcome::Failed {
            reason: "smtp down",
            is_final: false,
        },
    );
    tracker.on_engine_event(failed("j1", "smtp down"));
    assert!(matches!(
        rx.try_recv().unwrap(),
        WorkerEvent::Active { attempt: 2, .. }
    ));
    match rx.try_recv().unwrap() {
        WorkerEvent::Failed {
            name,
            attempt,
            max_attempts,
            is_final,
            ..
        } => {
            assert_eq!(
                (name.as_str(), attempt, max_attempts, is_final),
                ("welcome", 2, 3, false)
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(nothing_kept(&tracker), "facts are dropped once reported");
}

/// The next attempt starts before the engine's report of the last one arrives (a
/// fast retry): the report still carries the attempt it is about.
#[tokio::test]
async fn a_failure_report_overtaken_by_the_retry_keeps_its_own_attempt() {
    let (events, mut received) = broadcast::channel(16);
    let tracker = AttemptTracker::new("q".into(), events);
    let not_final = AttemptOutcome::Failed {
        reason: "nope",
        is_final: false,
    };
    let first = tracker.started(&meta("j1", "send", 1, 3));
    tracker.ended(&first, not_final);
    let second = tracker.started(&meta("j1", "send", 2, 3));
    tracker.on_engine_event(failed("j1", "nope"));
    assert_eq!(failures(&mut received), [(1, 3, false)]);
    // The second attempt's facts are still there for its own report.
    tracker.ended(&second, not_final);
    tracker.on_engine_event(failed("j1", "nope"));
    assert_eq!(failures(&mut received), [(2, 3, false)]);
    assert!(nothing_kept(&tracker));
}

/// A completion whose report the engine dropped: the attempt's own end closed its
/// bookkeeping, and what waited for the report is let go once the drop is known.
#[test]
fn a_dropped_completion_report_leaves_nothing_behind() {
    let (events, _received) = broadcast::channel(16);
    let tracker = AttemptTracker::new("q".into(), events);
    let run = tracker.started(&meta("j1", "send", 1, 1));
    tracker.ended(&run, AttemptOutcome::Completed);
    assert!(
        tracker.book().running.is_empty(),
        "ended by its own outcome"
    );
    // Its report was among those the engine's full channel dropped.
    tracker.on_engine_event(EngineEvent::Dropped { count: 1 });
    tracker
        .book()
        .sweep(Instant::now() + AFTER_A_DROP + Duration::from_secs(1));
    assert!(nothing_kept(&tracker));
    // Without a drop, facts wait at most `REPORT_WITHIN`.
    let run = tracker.started(&meta("j2", "send", 1, 1));
    tracker.ended(&run, AttemptOutcome::Completed);
    tracker
        .book()
        .sweep(Instant::now() + REPORT_WITHIN + Duration::from_secs(1));
    assert!(nothing_kept(&tracker));
}

/// A failure whose report was dropped must not lend its facts to the next report: the
/// last attempt's failure is still reported as final (the dead-letter exit).
#[test]
fn a_report_after_a_dropped_one_keeps_its_own_facts() {
    let (events, mut received) = broadcast::channel(16);
    let tracker = AttemptTracker::new("q".into(), events);
    let first = tracker.started(&meta("j1", "send", 1, 2));
    tracker.ended(
        &first,
        AttemptOutcome::Failed {
            reason: "smtp down",
            is_final: false,
        },
    );
    tracker.on_engine_event(EngineEvent::Dropped { count: 1 });
    // The retry comes after its backoff.
    tracker
        .book()
        .sweep(Instant::now() + AFTER_A_DROP + Duration::from_secs(1));
    let last = tracker.started(&meta("j1", "send", 2, 2));
    tracker.ended(
        &last,
        AttemptOutcome::Failed {
            reason: "smtp down",
            is_final: true,
        },
    );
    tracker.on_engine_event(failed("j1", "smtp down"));
    assert_eq!(failures(&mut received), [(2, 2, true)]);
    assert!(nothing_kept(&tracker));
}

/// A lost lock ends the attempt without a report to wait for.
#[test]
fn a_lost_lock_leaves_nothing_waiting() {
    let (events, _received) = broadcast::channel(16);
    let tracker = AttemptTracker::new("q".into(), events);
    let run = tracker.started(&meta("j1", "send", 1, 5));
    tracker.ended(&run, AttemptOutcome::LockLost);
    assert!(nothing_kept(&tracker));
}

/// A run that lost its lock and a run that took the job over overlap in one process:
/// the first one's end does not take the second one's facts.
#[test]
fn overlapping_runs_of_one_job_keep_their_own_facts() {
    let (events, mut received) = broadcast::channel(16);
    let tracker = AttemptTracker::new("q".into(), events);
    let stale = tracker.started(&meta("j1", "send", 1, 1));
    let fresh = tracker.started(&meta("j1", "send", 1, 1));
    tracker.ended(&stale, AttemptOutcome::LockLost);
    tracker.ended(
        &fresh,
        AttemptOutcome::Failed {
            reason: "smtp down",
            is_final: true,
        },
    );
    tracker.on_engine_event(failed("j1", "smtp down"));
    assert_eq!(failures(&mut received), [(1, 1, true)]);
    assert!(nothing_kept(&tracker));
}

/// Reports that never come cannot grow the bookkeeping past its bound.
#[test]
fn facts_waiting_for_reports_are_bounded() {
    let (events, _received) = broadcast::channel(16);
    let tracker = AttemptTracker::new("q".into(), events);
    for n in 0..(MAX_AWAITING + 10) {
        let id = format!("j{n}");
        let run = tracker.started(&meta(&id, "send", 1, 1));
        tracker.ended(&run, AttemptOutcome::Completed);
    }
    let book = tracker.book();
    assert!(
        book.awaiting.len() <= MAX_AWAITING,
        "{}",
        book.awaiting.len()
    );
    // The newest are the ones kept.
    let waits = |id: &str| book.awaiting.iter().any(|a| a.facts.job.id == id);
    assert!(waits(&format!("j{}", MAX_AWAITING + 9)));
    assert!(!waits("j0"));
}

#[test]
fn completions_failures_and_progress_carry_the_jobs_data_while_someone_listens() {
    let (tx, mut rx) = broadcast::channel(16);
    let tracker = AttemptTracker::new("email".into(), tx);
    let data = serde_json::json!({"to": "ada"});
    let progress = |job_id: &str| EngineEvent::Progress {
        job_id: job_id.into(),
        progress: serde_json::json!(50),
    };
    let run = tracker.started(&meta("j1", "welcome", 1, 1));
    tracker.data(&run, &data);
    tracker.on_engine_event(progress("j1"));
    tracker.ended(&run, AttemptOutcome::Completed);
    tracker.on_engine_event(EngineEvent::Completed {
        job_id: "j1".into(),
        result: serde_json::Value::Null,
    });
    let _active = rx.try_recv().unwrap();
    match rx.try_recv().unwrap() {
        WorkerEvent::Progress { name, .. } => assert_eq!(name, "welcome"),
        other => panic!("{other:?}"),
    }
    assert_eq!(rx.try_recv().unwrap().job_data(), Some(&data));

    // A progress report that arrives after the worker saw its attempt fail still
    // names the job and carries its data.
    let run = tracker.started(&meta("j2", "welcome", 1, 1));
    tracker.data(&run, &data);
    tracker.ended(
        &run,
        AttemptOutcome::Failed {
            reason: "no",
            is_final: true,
        },
    );
    tracker.on_engine_event(progress("j2"));
    tracker.on_engine_event(failed("j2", "no"));
    let _active = rx.try_recv().unwrap();
    assert_eq!(rx.try_recv().unwrap().job_data(), Some(&data));
    assert_eq!(rx.try_recv().unwrap().job_data(), Some(&data));
    assert!(nothing_kept(&tracker));

    // Nobody listening: nothing copied.
    drop(rx);
    let run = tracker.started(&meta("j3", "welcome", 1, 1));
    tracker.data(&run, &data);
    assert!(tracker
        .book()
        .running
        .get_mut(&run)
        .is_some_and(|facts| facts.data.is_none()));
}

/// An ended attempt's slot goes to the next attempt; the old attempt's handle no longer
/// names it.
#[test]
fn a_reused_slot_belongs_to_its_new_attempt_only() {
    let (events, _received) = broadcast::channel(16);
    let tracker = AttemptTracker::new("q".into(), events);
    let first = tracker.started(&meta("j1", "send", 1, 2));
    tracker.ended(&first, AttemptOutcome::LockLost);
    let second = tracker.started(&meta("j1", "send", 2, 2));
    assert_eq!(first.0.index, second.0.index);
    tracker.ended(&first, AttemptOutcome::LockLost);
    assert!(
        !tracker.book().running.is_empty(),
        "the second attempt still runs"
    );
    tracker.ended(&second, AttemptOutcome::LockLost);
    assert!(nothing_kept(&tracker));
}
