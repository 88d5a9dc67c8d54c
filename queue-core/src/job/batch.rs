//! Where a batch's jobs meet (#46). A batch's jobs are attempts like any other, each
//! with its own span, lock, timeout-free supervision, sealing and record; what is
//! shared is the one call of the batch handler. Each job of a batch carries a
//! [`Ticket`] of the batch's [`Assembly`]: its attempt hands the typed job in (or its
//! ticket is dropped, when the attempt ends before the handler: a payload that does
//! not fit, a skipped run), and the last one in launches the handler over every job
//! handed in. Untyped here; the typed side is `handler::batch`.

use std::any::Any;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::oneshot;

use super::JobError;

/// One job's outcome in a batch: its return value, or its failure.
pub(crate) type BatchOutcome = Result<serde_json::Value, JobError>;

/// A job handed in: the typed job (`Job<T>`, boxed), its attempt's span (so that the
/// batch handler can log and trace in each job's own) and where its outcome goes.
pub(crate) type Arrival = (
    Box<dyn Any + Send>,
    tracing::Span,
    oneshot::Sender<BatchOutcome>,
);

/// What runs the batch once every job is in or absent: given by the first arrival,
/// which knows the handler and the payload type.
pub(crate) type Launcher = Box<dyn FnOnce(Vec<Arrival>) + Send>;

/// One batch's meeting point.
pub(crate) struct Assembly {
    state: Mutex<State>,
    /// The batch handler's timeout (the processor's): the batch's, not a job's.
    timeout: Option<Duration>,
}

struct State {
    /// Tickets neither handed in nor dropped yet.
    outstanding: usize,
    /// With each arrival its ticket's place: the batch keeps the order of its take,
    /// whatever order the jobs' attempts come in.
    arrived: Vec<(usize, Arrival)>,
    launcher: Option<Launcher>,
}

impl Assembly {
    /// The tickets of a batch of `jobs` jobs, whose handler runs under `timeout`.
    pub(crate) fn tickets(jobs: usize, timeout: Option<Duration>) -> Vec<Ticket> {
        let assembly = Arc::new(Assembly {
            state: Mutex::new(State {
                outstanding: jobs,
                arrived: Vec::with_capacity(jobs),
                launcher: None,
            }),
            timeout,
        });
        (0..jobs)
            .map(|place| Ticket {
                assembly: Some(assembly.clone()),
                place,
            })
            .collect()
    }

    /// One ticket fewer outstanding, with its arrival if it brought one; launches the
    /// batch when it was the last. The launch runs outside the lock.
    fn settle(&self, arrival: Option<(usize, Arrival, Launcher)>) {
        let launch = {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            state.outstanding -= 1;
            if let Some((place, arrival, launcher)) = arrival {
                state.arrived.push((place, arrival));
                state.launcher.get_or_insert(launcher);
            }
            if state.outstanding > 0 {
                return;
            }
            let mut arrived = std::mem::take(&mut state.arrived);
            arrived.sort_by_key(|(place, _)| *place);
            state.launcher.take().map(|launcher| {
                let arrived: Vec<Arrival> = arrived.into_iter().map(|(_, a)| a).collect();
                (launcher, arrived)
            })
        };
        if let Some((launcher, arrived)) = launch {
            launcher(arrived);
        }
    }
}

/// A job's place in its batch. Handed in once ([`Ticket::arrive`]); dropped without
/// that, it tells the batch not to wait for the job.
pub(crate) struct Ticket {
    /// `None` once handed in.
    assembly: Option<Arc<Assembly>>,
    /// Its job's place in the batch's take.
    place: usize,
}

impl Ticket {
    /// A batch of one: how a runner without batches (an inline app, the testing kit)
    /// runs a batch handler's job.
    pub(crate) fn alone(timeout: Option<Duration>) -> Ticket {
        let mut tickets = Assembly::tickets(1, timeout);
        tickets.remove(0)
    }

    /// The batch handler's timeout.
    pub(crate) fn timeout(&self) -> Option<Duration> {
        self.assembly.as_ref().and_then(|a| a.timeout)
    }

    /// Hands `job` in; `launcher` runs the batch if no arrival gave one before. The
    /// receiver gets the job's outcome once the batch handler has run.
    pub(crate) fn arrive(
        mut self,
        job: Box<dyn Any + Send>,
        span: tracing::Span,
        launcher: Launcher,
    ) -> oneshot::Receiver<BatchOutcome> {
        let (sender, receiver) = oneshot::channel();
        if let Some(assembly) = self.assembly.take() {
            assembly.settle(Some((self.place, (job, span, sender), launcher)));
        }
        receiver
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if let Some(assembly) = self.assembly.take() {
            assembly.settle(None);
        }
    }
}

impl std::fmt::Debug for Ticket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ticket")
            .field("handed_in", &self.assembly.is_none())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launcher(seen: Arc<Mutex<Vec<usize>>>) -> Launcher {
        Box::new(move |arrived: Vec<Arrival>| {
            let mut ids = Vec::new();
            for (job, _span, sender) in arrived {
                let id = *job.downcast::<usize>().unwrap();
                ids.push(id);
                let _ = sender.send(Ok(serde_json::json!(id)));
            }
            seen.lock().unwrap().push(ids.len());
        })
    }

    #[tokio::test]
    async fn the_last_job_in_launches_the_batch_over_every_job_handed_in() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let mut tickets = Assembly::tickets(3, None).into_iter();
        let first = tickets.next().unwrap().arrive(
            Box::new(1usize),
            tracing::Span::none(),
            launcher(seen.clone()),
        );
        assert!(seen.lock().unwrap().is_empty(), "not before the others");
        // A job whose attempt ended before the handler (its payload did not fit).
        drop(tickets.next());
        let third = tickets.next().unwrap().arrive(
            Box::new(3usize),
            tracing::Span::none(),
            launcher(seen.clone()),
        );
        assert_eq!(*seen.lock().unwrap(), vec![2], "one launch, two jobs");
        assert_eq!(first.await.unwrap().unwrap(), serde_json::json!(1));
        assert_eq!(third.await.unwrap().unwrap(), serde_json::json!(3));
    }

    #[tokio::test]
    async fn the_batch_keeps_the_order_of_its_take_whatever_order_its_jobs_come_in() {
        let order = Arc::new(Mutex::new(Vec::new()));
        let seen = order.clone();
        let launcher = move || -> Launcher {
            let seen = seen.clone();
            Box::new(move |arrived: Vec<Arrival>| {
                for (job, _, _) in arrived {
                    seen.lock().unwrap().push(*job.downcast::<usize>().unwrap());
                }
            })
        };
        let mut tickets = Assembly::tickets(3, None);
        let third = tickets.pop().unwrap();
        let second = tickets.pop().unwrap();
        let first = tickets.pop().unwrap();
        let _c = third.arrive(Box::new(2usize), tracing::Span::none(), launcher());
        let _a = first.arrive(Box::new(0usize), tracing::Span::none(), launcher());
        let _b = second.arrive(Box::new(1usize), tracing::Span::none(), launcher());
        assert_eq!(*order.lock().unwrap(), vec![0, 1, 2]);
    }

    #[tokio::test]
    async fn the_last_ticket_dropped_launches_the_jobs_handed_in_before() {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let mut tickets = Assembly::tickets(2, None).into_iter();
        let first = tickets.next().unwrap().arrive(
            Box::new(7usize),
            tracing::Span::none(),
            launcher(seen.clone()),
        );
        assert!(seen.lock().unwrap().is_empty());
        // The other job's attempt ended before its handler: the batch runs without it.
        drop(tickets.next());
        assert_eq!(*seen.lock().unwrap(), vec![1]);
        assert_eq!(first.await.unwrap().unwrap(), serde_json::json!(7));
    }
}
