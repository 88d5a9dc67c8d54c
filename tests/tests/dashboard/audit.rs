//! The dashboard's audit log as the tests read it: one recorder, the process's global
//! subscriber (a thread's own, `set_default`, can miss events when other test threads
//! register the same call sites at the same time; and a global one is set once per
//! process), shared by every module that checks what an action logged. Each test looks
//! for its own lines.

use std::sync::{Arc, Mutex, OnceLock};

use queue_dashboard::AUDIT_TARGET;

/// Every audit event of the process so far, as `field=value ...` text.
pub(crate) fn audit_log() -> Arc<Mutex<Vec<String>>> {
    static LOG: OnceLock<Arc<Mutex<Vec<String>>>> = OnceLock::new();
    LOG.get_or_init(|| {
        let log = Arc::new(Mutex::new(Vec::new()));
        let keep = log.clone();
        let recorder = queue_tests::logs::recorder(move |event| {
            if event.target == AUDIT_TARGET {
                keep.lock().unwrap().push(event.fields);
            }
        });
        tracing::subscriber::set_global_default(recorder)
            .expect("no other global subscriber in the dashboard's test binary");
        log
    })
    .clone()
}
