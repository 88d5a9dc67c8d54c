//! The welcome-email / birthday-coupon example service.
//!
//! Run with: `cargo run --release -p welcome-app` (Redis on 127.0.0.1:6379; the SQLite
//! database `welcome.db` is created in the working directory). The README walks through
//! signing up, watching the welcome job, and a birthday grant with curl.

use welcome_app::telemetry::Telemetry;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let telemetry = match Telemetry::init() {
        Ok(telemetry) => telemetry,
        Err(e) => {
            eprintln!("welcome-app: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let result = match welcome_app::config::Config::from_env() {
        Ok(config) => welcome_app::run(config).await,
        Err(e) => Err(e.into()),
    };
    let code = match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "welcome-app cannot run");
            eprintln!("welcome-app: {e}");
            std::process::ExitCode::FAILURE
        }
    };
    telemetry.shutdown();
    code
}
