//! A queue or job name given as a string is checked at start-up: a typo in the builder's
//! settings, in the registrations to use or in a declared queue's handler is refused by
//! `build`, naming the queues (or jobs) the app knows, instead of an app that starts and
//! runs its jobs with the wrong settings. A queue served by another service is declared
//! as such, and the typed forms take a declared queue's type instead of its name.

use queue_core::prelude::*;
use queue_core::{app::Registrations, Error, JobInfo};
use queue_tests::TestRedis;

#[derive(Serialize, Deserialize)]
struct Welcome {
    to: String,
}

#[job_queue("names-email")]
enum Email {
    #[job("welcome")]
    Welcome(Welcome),
}

async fn send(_job: Job<Welcome>) -> Result<(), JobError> {
    Ok(())
}

/// A builder that uses no attribute registration but the declarations.
fn builder() -> queue_core::QueueAppBuilder {
    QueueApp::builder().registrations(Registrations::None)
}

fn problems(builder: queue_core::QueueAppBuilder) -> Vec<String> {
    match builder.check() {
        Err(Error::Registry(registry)) => registry.problems().to_vec(),
        other => panic!("expected a registry error, got {other:?}"),
    }
}

#[test]
fn a_misspelled_queue_in_the_builder_is_refused_naming_the_known_ones() {
    let retries = JobOptions::new().attempts(5);
    let mut found = problems(
        builder()
            .queue_defaults("names-emial", retries.clone())
            .rename_queue("names-emali", "names-email-eu"),
    );
    found.extend(problems(
        builder().registrations(Registrations::Queues(vec!["names-mail".into()])),
    ));
    assert_eq!(found.len(), 3, "{found:#?}");
    for (setting, typo) in [
        ("queue_defaults", "names-emial"),
        ("rename_queue", "names-emali"),
        ("Registrations::Queues", "names-mail"),
    ] {
        let problem = found
            .iter()
            .find(|p| p.starts_with(&format!("{setting}(`{typo}`)")))
            .unwrap_or_else(|| panic!("no problem for {setting}: {found:#?}"));
        assert!(problem.contains("did you mean `names-email`?"), "{problem}");
        assert!(problem.contains("names-email"), "{problem}");
    }
    // The same settings with the name spelt right, or by the queue's type, start.
    builder()
        .queue_defaults("names-email", retries.clone())
        .check()
        .unwrap();
    builder()
        .queue_defaults_of::<Email>(retries.clone())
        .rename_queue_of::<Email>("names-email-eu")
        .check()
        .unwrap();
    // A renamed queue's defaults may name it as Redis does.
    builder()
        .rename_queue_of::<Email>("names-email-eu")
        .queue_defaults("names-email-eu", retries)
        .check()
        .unwrap();
}

#[test]
fn a_declared_queue_s_handler_must_claim_a_declared_job_name() {
    let found = problems(builder().processor(Processor::new("names-email").job("welcom", send)));
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(
        found[0].contains("claims job `welcom` on queue `names-email`"),
        "{}",
        found[0]
    );
    assert!(found[0].contains("did you mean `welcome`?"), "{}", found[0]);
    // The typed form cannot get it wrong; a catch-all takes every name.
    builder()
        .processor(Processor::of::<Email>().handle(send))
        .check()
        .unwrap();
    builder()
        .processor(Processor::new("names-email").any_job(send))
        .check()
        .unwrap();
}

#[tokio::test]
async fn a_queue_served_elsewhere_is_declared_and_its_settings_apply() {
    let redis = TestRedis::new("names-external");
    // Without the declaration, its defaults name nothing the app knows.
    let refused = problems(
        redis
            .builder()
            .registrations(Registrations::None)
            .queue_defaults("names-reports", JobOptions::new().attempts(4)),
    );
    assert!(
        refused[0].contains("external_queue(\"names-reports\")"),
        "{refused:#?}"
    );

    let app = redis
        .app(|b| {
            b.registrations(Registrations::None)
                .external_queue("names-reports")
                .queue_defaults("names-reports", JobOptions::new().attempts(4))
                .queue_defaults_of::<Email>(JobOptions::new().attempts(5))
        })
        .await;
    assert!(app.knows_queue("names-reports"));
    let report = app
        .queue::<String>("names-reports")
        .unwrap()
        .add("render", "2026-12".into(), JobOptions::new())
        .await
        .unwrap();
    let welcome = app
        .add_job(Welcome { to: "ada".into() }, JobOptions::new())
        .await
        .unwrap();
    let attempts = |info: Option<JobInfo>| info.expect("the job exists").max_attempts;
    let reports = app.queue::<String>("names-reports").unwrap();
    assert_eq!(attempts(reports.get_job(&report.id).await.unwrap()), 4);
    let emails = app.queue_of::<Email>().unwrap();
    assert_eq!(attempts(emails.get_job(&welcome.id).await.unwrap()), 5);
}
