//! Test plumbing (feature `__private`): a future to await before a wait subscribes, so
//! that a test can finish a job between its `add` and the subscription.

/// A future to await before a wait for job `queue`/`id` subscribes.
type BeforeWatch = futures::future::BoxFuture<'static, ()>;

static BEFORE_WATCH: std::sync::Mutex<Vec<(String, String, BeforeWatch)>> =
    std::sync::Mutex::new(Vec::new());

pub(crate) fn set_before_watch(queue: &str, id: &str, hook: BeforeWatch) {
    BEFORE_WATCH
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push((queue.to_owned(), id.to_owned(), hook));
}

pub(crate) async fn before_watch(queue: &str, id: &str) {
    let hook = {
        let mut hooks = BEFORE_WATCH
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let at = hooks.iter().position(|(q, i, _)| q == queue && i == id);
        at.map(|at| hooks.swap_remove(at).2)
    };
    if let Some(hook) = hook {
        hook.await;
    }
}
