//! The service's probes: `/readyz` and `/livez` answer their verdict to anyone and
//! their checks to the operator, ready once Redis answers and the workers run.

mod support;

use queue_tests::http::{get, get_with};
use welcome_app::mailer::FailurePolicy;

#[tokio::test]
async fn the_service_is_ready_and_alive_with_each_check_named() {
    let running = support::start("wa-probes", FailurePolicy::Never).await;
    // A stranger learns pass or fail, not how the service runs.
    let anonymous = get(running.addr, "/readyz").await;
    assert_eq!(anonymous.status, 200);
    assert_eq!(anonymous.json(), serde_json::json!({ "status": "pass" }));
    let anonymous = get(running.addr, "/livez").await;
    assert_eq!(anonymous.json(), serde_json::json!({ "status": "pass" }));

    let operator = format!("Bearer {}", support::ADMIN);
    let as_operator = [("authorization", operator.as_str())];
    let ready = get_with(running.addr, "/readyz", &as_operator).await;
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
    let live = get_with(running.addr, "/livez", &as_operator).await;
    assert_eq!(live.status, 200);
    assert!(live.json()["checks"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["name"] == "worker:email"));
}
