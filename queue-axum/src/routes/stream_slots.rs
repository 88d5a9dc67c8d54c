//! Who holds the live streams: a cap on all of them, and caps per job and per client,
//! so that one client cannot take every stream (256 streams on its own job id would
//! leave every other client a 503 for the streams' whole lifetime).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Why a stream was not opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Full {
    /// Every stream of the route is taken.
    All,
    /// This client (or, where it is not known, everyone) has its most streams on this
    /// job.
    Job,
    /// This client has its most streams.
    Client,
}

/// The streams' caps, shared by the clones of one [`JobRoutes`](super::JobRoutes).
#[derive(Debug)]
pub(crate) struct StreamSlots {
    all: Arc<Semaphore>,
    per_job: usize,
    per_client: usize,
    held: Mutex<Held>,
}

/// How many streams each job and each client holds now; an entry goes at zero.
#[derive(Debug, Default)]
struct Held {
    jobs: HashMap<String, usize>,
    clients: HashMap<String, usize>,
}

impl StreamSlots {
    pub(crate) fn new(all: usize, per_job: usize, per_client: usize) -> Self {
        StreamSlots {
            // A semaphore holds at most `MAX_PERMITS`; more would panic.
            all: Arc::new(Semaphore::new(all.min(Semaphore::MAX_PERMITS))),
            per_job: per_job.max(1),
            per_client: per_client.max(1),
            held: Mutex::default(),
        }
    }

    /// A slot for a stream of `job` (queue and id) opened by `client` (`None`: a client
    /// not known, capped by the job's and the route's caps only). The per-job cap counts
    /// each client's streams on the job apart, so that a stranger who knows the id
    /// cannot take its owner's.
    pub(crate) fn take(
        self: &Arc<Self>,
        job: String,
        client: Option<String>,
    ) -> Result<StreamSlot, Full> {
        let job = match &client {
            Some(client) => format!("{job}\n{client}"),
            None => job,
        };
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        if held.jobs.get(&job).copied().unwrap_or(0) >= self.per_job {
            return Err(Full::Job);
        }
        if let Some(client) = &client {
            if held.clients.get(client).copied().unwrap_or(0) >= self.per_client {
                return Err(Full::Client);
            }
        }
        let permit = self
            .all
            .clone()
            .try_acquire_owned()
            .map_err(|_| Full::All)?;
        *held.jobs.entry(job.clone()).or_default() += 1;
        if let Some(client) = &client {
            *held.clients.entry(client.clone()).or_default() += 1;
        }
        Ok(StreamSlot {
            slots: self.clone(),
            job,
            client,
            _permit: permit,
        })
    }
}

/// One open stream's place under the caps, given back when the stream ends.
#[derive(Debug)]
pub(crate) struct StreamSlot {
    slots: Arc<StreamSlots>,
    job: String,
    client: Option<String>,
    _permit: OwnedSemaphorePermit,
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut held = self
            .slots
            .held
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let Held { jobs, clients } = &mut *held;
        give_back(jobs, &self.job);
        if let Some(client) = &self.client {
            give_back(clients, client);
        }
    }
}

fn give_back(counts: &mut HashMap<String, usize>, key: &str) {
    if let Some(count) = counts.get_mut(key) {
        *count = count.saturating_sub(1);
        if *count == 0 {
            counts.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_and_a_client_hold_at_most_their_share_of_the_streams() {
        let slots = Arc::new(StreamSlots::new(5, 2, 3));
        let a = || Some("10.0.0.1".to_owned());
        let s1 = slots.take("q/1".into(), a()).unwrap();
        let _s2 = slots.take("q/1".into(), a()).unwrap();
        assert_eq!(slots.take("q/1".into(), a()).unwrap_err(), Full::Job);
        // Another client's streams on the same job are its own.
        let _other = slots.take("q/1".into(), Some("10.0.0.9".into())).unwrap();
        drop(_other);
        let _s3 = slots.take("q/2".into(), a()).unwrap();
        assert_eq!(slots.take("q/3".into(), a()).unwrap_err(), Full::Client);
        // Others still get theirs, up to the route's cap.
        let _s4 = slots.take("q/3".into(), Some("10.0.0.2".into())).unwrap();
        let _s5 = slots.take("q/4".into(), None).unwrap();
        assert_eq!(slots.take("q/5".into(), None).unwrap_err(), Full::All);
        // A stream that ends gives its places back.
        drop(s1);
        let _again = slots.take("q/1".into(), a()).unwrap();
        assert!(slots.held.lock().unwrap().jobs.get("q/1\n10.0.0.1") == Some(&2));
    }

    #[test]
    fn a_cap_past_what_a_semaphore_holds_is_taken_as_its_most() {
        let slots = StreamSlots::new(usize::MAX, 1, 1);
        assert_eq!(slots.all.available_permits(), Semaphore::MAX_PERMITS);
    }
}
