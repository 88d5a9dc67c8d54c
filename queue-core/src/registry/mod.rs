//! What the app runs: the registrations (macro records and explicit processors),
//! checked at start-up and merged per queue.

mod declared;
mod names;
mod records;
mod validate;

use std::time::Duration;

pub(crate) use declared::{check_declarations, declared_jobs};
pub(crate) use names::unknown_queues;
pub(crate) use records::Registered;
pub use records::{
    Instance, JobTypeRecord, MakeInstance, ProcessorRecord, ProducerRecord, QueueListenerRecord,
    TypeInfo, WorkerListenerRecord,
};
pub(crate) use validate::{check_registrations, merge_processors};

/// A `#[processor]` record as an explicit `Processor`, so both kinds go through the
/// same checks.
pub(crate) fn processor_from_record(record: &ProcessorRecord) -> crate::worker::Processor {
    let mut processor =
        crate::worker::Processor::new(record.queue).concurrency(record.concurrency.unwrap_or(1));
    if let Some(ms) = record.timeout_ms {
        processor = processor.timeout(Duration::from_millis(ms));
    }
    if let Some(ms) = record.lock_duration_ms {
        processor = processor.lock_duration(Duration::from_millis(ms));
    }
    if let Some((max, per_ms)) = record.limiter {
        processor = processor.limiter(max, Duration::from_millis(per_ms));
    }
    if let Some(points) = record.per_minute_metrics {
        processor = processor.per_minute_metrics(points);
    }
    if let Some(limits) = record.groups {
        processor = processor.groups(limits());
    }
    if let Some((size, wait_ms)) = record.batch {
        processor = processor.batches(size, Duration::from_millis(wait_ms));
    }
    for queue in record.also_serve {
        processor = processor.also_serve(*queue);
    }
    processor.erased(record.job, (record.handler)(), record.label)
}
