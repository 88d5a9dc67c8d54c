//! What the example's end-to-end tests share: a service started in-process on its own
//! Redis prefix and SQLite file, and a few helpers.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::PathBuf;

use queue_core::{app::Registrations, QueueApp, Workers};
use queue_tests::{TestRedis, SOON};
use welcome_app::config::Config;
use welcome_app::db::Db;
use welcome_app::mailer::FailurePolicy;

pub(crate) const ADMIN: &str = "test-admin-token-0123456789";

/// A running service with its own Redis prefix and SQLite file.
pub(crate) struct Running {
    pub(crate) addr: SocketAddr,
    pub(crate) app: QueueApp,
    pub(crate) db: Db,
    pub(crate) workers: Option<Workers>,
    pub(crate) redis: TestRedis,
    pub(crate) dir: ScratchDir,
}

/// A directory of its own (the SQLite file), removed on drop.
pub(crate) struct ScratchDir(PathBuf);

impl ScratchDir {
    pub(crate) fn new(label: &str) -> Self {
        let dir = std::env::temp_dir().join(queue_core::testing::unique_prefix(label));
        std::fs::create_dir_all(&dir).unwrap();
        ScratchDir(dir)
    }

    pub(crate) fn sqlite_url(&self) -> String {
        format!("sqlite://{}", self.0.join("welcome.db").display())
    }

    /// The directory.
    pub(crate) fn path(&self) -> &std::path::Path {
        &self.0
    }

    /// Where the service keeps its keyring (made on first start), beside its database.
    pub(crate) fn keys_file(&self) -> String {
        self.0.join("welcome.keys").display().to_string()
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The tests' keyring: one fixed key (a test that needs a fresh file uses
/// `QUEUE_KEYS_FILE` in its scratch directory).
pub(crate) const TEST_KEYS: &str = "test-1=AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA=";

pub(crate) fn config_with(vars: &[(&str, String)]) -> Config {
    Config::from_lookup(|name| {
        vars.iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.clone())
    })
    .unwrap()
}

/// The tests' configuration: this Redis prefix and database, fast retries, the
/// operator token, and `extra` variables.
pub(crate) fn config_plus(
    redis: &TestRedis,
    database_url: &str,
    extra: &[(&str, String)],
) -> Config {
    let mut vars = vec![
        ("REDIS_URL", queue_tests::redis_url()),
        ("QUEUE_PREFIX", redis.prefix().to_owned()),
        ("DATABASE_URL", database_url.to_owned()),
        ("WELCOME_BACKOFF_MS", "50".to_owned()),
        ("ADMIN_TOKEN", ADMIN.to_owned()),
        ("QUEUE_KEYS", TEST_KEYS.to_owned()),
    ];
    if let Some(nodes) = queue_tests::cluster_nodes() {
        vars.push(("REDIS_CLUSTER_NODES", nodes.join(",")));
    }
    vars.extend(extra.iter().cloned());
    config_with(&vars)
}

pub(crate) fn config(redis: &TestRedis, database_url: &str) -> Config {
    config_plus(redis, database_url, &[])
}

pub(crate) async fn start(label: &str, failures: FailurePolicy) -> Running {
    let redis = TestRedis::new(label);
    let dir = ScratchDir::new(label);
    start_with(redis, dir, failures).await
}

/// Serves `router` as the binary does (`queue_axum`'s server: its limits, and each
/// request knowing its client's address), until the test ends.
pub(crate) use queue_tests::http::serve;

pub(crate) async fn start_with(
    redis: TestRedis,
    dir: ScratchDir,
    failures: FailurePolicy,
) -> Running {
    start_configured(redis, dir, failures, &[]).await
}

/// Starts the service with `extra` variables on top of the tests' configuration.
pub(crate) async fn start_configured(
    redis: TestRedis,
    dir: ScratchDir,
    failures: FailurePolicy,
    extra: &[(&str, String)],
) -> Running {
    let service = welcome_app::build(
        &config_plus(&redis, &dir.sqlite_url(), extra),
        failures,
        Registrations::All,
    )
    .await
    .unwrap();
    let workers = service.app.start_workers().await.unwrap();
    Running {
        addr: serve(service.router).await,
        app: service.app,
        db: service.db,
        workers: Some(workers),
        redis,
        dir,
    }
}

/// Stores a user named Ivy straight in the database, as a committed sign-up would.
pub(crate) async fn add_user(db: &Db, public_id: &str, email: &str, birthday: &str) {
    let mut tx = db.begin().await.unwrap();
    tx.insert_user(&welcome_app::db::NewUser {
        public_id,
        email,
        name: "Ivy",
        birthday,
        token_hash: "x",
    })
    .await
    .unwrap();
    tx.commit().await.unwrap();
}

pub(crate) fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}

impl Running {
    pub(crate) async fn stop(mut self) -> (TestRedis, ScratchDir) {
        if let Some(workers) = self.workers.take() {
            workers.shutdown(SOON).await;
        }
        (self.redis, self.dir)
    }
}
