//! The service's probes: `/readyz` and `/livez` answer JSON checks, ready once Redis
//! answers and the workers run.

mod support;

use queue_tests::http::get;
use welcome_app::mailer::FailurePolicy;

#[tokio::test]
async fn the_service_is_ready_and_alive_with_each_check_named() {
    let running = support::start("wa-probes", FailurePolicy::Never).await;
    let ready = get(running.addr, "/readyz").await;
    assert_eq!(
        ready.status,
        200,
        "{:?}",
        String::from_utf8_lossy(&ready.body)
    );
    let report = ready.json();
    assert_eq!(report["status"], "pass", "{report}");
    let names: Vec<&str> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert!(
        names.contains(&"redis") && names.contains(&"workers"),
        "{names:?}"
    );
    let live = get(running.addr, "/livez").await;
    assert_eq!(live.status, 200);
    assert!(live.json()["checks"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["name"] == "worker:email"));
}
