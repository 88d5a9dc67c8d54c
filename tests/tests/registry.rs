//! Start-up checks of attribute registrations: every problem in one error, with a
//! message that names the types, handlers and queues involved.

use queue_core::prelude::*;
use queue_core::{
    app::Registrations, inject_queue, on_queue_event, on_worker_event, processor, Error, QueueEvent,
};

#[derive(Serialize, Deserialize)]
struct Order {
    id: u32,
}

#[derive(Serialize, Deserialize)]
struct Refund {
    id: u32,
}

struct PaymentGateway;

#[processor("reg-orders", job = "charge")]
async fn charge(_job: Job<Order>, _gateway: Dep<PaymentGateway>) -> Result<(), JobError> {
    Ok(())
}

#[processor("reg-orders", job = "ship")]
async fn ship(_job: Job<Order>) -> Result<(), JobError> {
    Ok(())
}

#[processor("reg-orders", job = "ship")]
async fn ship_again(_job: Job<Order>) -> Result<(), JobError> {
    Ok(())
}

#[inject_queue]
struct RefundService {
    #[queue("reg-orders")]
    orders: Queue<Refund>,
    #[queue("reg-producer-only")]
    audit: Queue<String>,
}

/// No `Default` and not provided.
struct Ledger {
    _entries: u32,
}

#[processor("reg-ledger")]
impl Ledger {
    #[job("post")]
    async fn post(&self, _job: Job<u32>) -> Result<(), JobError> {
        Ok(())
    }
}

#[on_queue_event("reg-nowhere", completed)]
async fn on_nowhere(_event: QueueEvent) {}

#[on_worker_event("reg-producer-only", failed)]
async fn on_producer_only(_event: WorkerEvent) {}

#[test]
fn every_registration_problem_is_reported_at_once() {
    let err = QueueApp::builder().check().unwrap_err();
    let Error::Registry(registry) = &err else {
        panic!("expected a registry error, got {err:?}");
    };
    let problems = registry.problems();
    let expect = [
        "handler registry::Ledger::post needs Dep<registry::Ledger>, which nobody provided; add `.provide(..)` to the app builder",
        "handler registry::charge needs Dep<registry::PaymentGateway>, which nobody provided",
        "job `ship` on queue `reg-orders` is claimed twice: by registry::ship and by registry::ship_again",
        "producer RefundService.orders sends `registry::Refund` to queue `reg-orders`, but no handler of that queue takes it (they take charge: `registry::Order`, ship: `registry::Order`)",
        "#[on_queue_event] registry::on_nowhere listens to queue `reg-nowhere`, which nothing in this binary produces to or processes (known queues: reg-ledger, reg-orders, reg-producer-only)",
        "#[on_worker_event] registry::on_producer_only listens to worker events of queue `reg-producer-only`, but this binary has no processor for it",
    ];
    for expected in expect {
        assert!(
            problems.iter().any(|p| p.starts_with(expected)),
            "missing: {expected}\nall problems:\n{}",
            problems.join("\n")
        );
    }
    assert_eq!(problems.len(), expect.len(), "{}", problems.join("\n"));
    assert!(
        err.to_string()
            .starts_with("the queue app cannot start (6 problem(s)):\n  - "),
        "{err}"
    );
}

#[test]
fn providing_what_is_missing_and_picking_queues_fixes_the_rest() {
    let fixed = QueueApp::builder()
        .registrations(Registrations::Queues(vec![
            "reg-ledger".into(),
            "reg-producer-only".into(),
        ]))
        .provide(Ledger { _entries: 0 });
    // Still refused: the worker listener on a producer-only queue.
    assert!(fixed
        .check()
        .unwrap_err()
        .to_string()
        .contains("on_producer_only"));

    let fine = QueueApp::builder()
        .registrations(Registrations::Queues(vec!["reg-ledger".into()]))
        .provide(Ledger { _entries: 0 });
    fine.check().unwrap();
}

/// The producer struct is an ordinary struct of queue handles.
#[allow(dead_code)]
fn producers_are_plain_fields(service: &RefundService) -> (&str, &str) {
    (service.orders.name(), service.audit.name())
}
