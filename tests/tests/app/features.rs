//! What a library user's build gets: `queue-core` and `queue-axum` ask tokio for the
//! features they use, so an application chooses its own (no `full`, no multi-thread
//! runtime, no file system or process drivers forced on it).

use std::process::Command;

/// The tokio features `package` builds tokio with, alone (no dev-dependencies).
fn tokio_features(package: &str) -> Vec<String> {
    let output = Command::new(env!("CARGO"))
        .args([
            "tree",
            "--offline",
            "-p",
            package,
            "-e",
            "normal",
            "-i",
            "tokio",
        ])
        .args(["--depth", "0", "-f", "{f}"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .trim()
        .split(',')
        .map(str::to_owned)
        .collect()
}

const NOT_ASKED: [&str; 6] = [
    "full",
    "rt-multi-thread",
    "fs",
    "process",
    "signal",
    "parking_lot",
];

#[test]
fn queue_core_does_not_ask_tokio_for_more_than_it_uses() {
    let features = tokio_features("queue-core");
    assert!(features.iter().any(|f| f == "rt"), "{features:?}");
    for unwanted in NOT_ASKED {
        assert!(
            !features.iter().any(|f| f == unwanted),
            "queue-core builds tokio with `{unwanted}`: {features:?}"
        );
    }
}

#[test]
fn queue_axum_adds_only_what_serving_needs() {
    let features = tokio_features("queue-axum");
    // `serve` listens on sockets and stops on SIGTERM / Ctrl-C.
    for needed in ["net", "signal"] {
        assert!(features.iter().any(|f| f == needed), "{features:?}");
    }
    for unwanted in ["full", "rt-multi-thread", "fs", "process"] {
        assert!(
            !features.iter().any(|f| f == unwanted),
            "queue-axum builds tokio with `{unwanted}`: {features:?}"
        );
    }
}
