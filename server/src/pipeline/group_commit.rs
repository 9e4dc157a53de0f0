//! Group commit, the loop the publish and the recorder share: requests queue
//! while a batch is being written, and the next batch is whatever gathered
//! meanwhile, up to the writer's own limit. A lone request is written at once;
//! under load the batches grow with it, and the database pays once per batch.
//! One batch of a loop is written at a time: a second in flight would only
//! split what gathers meanwhile in two, and the database would pay twice.

use std::future::Future;

use tokio::sync::mpsc;

/// What one batch may hold, decided request by request as they are taken from
/// the queue; made new for every batch.
pub trait BatchLimit<T> {
    /// Takes `request` into the batch if it fits, counting it toward the limit.
    /// The first request of a batch always joins: the limit must count it (and
    /// should answer true for it), or a request too large for any batch would
    /// never be written.
    fn admits(&mut self, request: &T) -> bool;
}

/// Writes the queued requests in batches until the queue closes, each batch
/// once the one before has ended; a request that does not fit opens the next
/// batch. Each batch runs as a task of its own, so that a panic ends only it.
pub async fn run<T, L, F>(
    mut incoming: mpsc::UnboundedReceiver<T>,
    new_limit: impl Fn() -> L,
    mut write: impl FnMut(Vec<T>) -> F,
) where
    L: BatchLimit<T>,
    F: Future<Output = ()> + Send + 'static,
{
    let mut held: Option<T> = None;
    loop {
        let first = match held.take() {
            Some(request) => request,
            None => match incoming.recv().await {
                Some(request) => request,
                None => break,
            },
        };
        let mut limit = new_limit();
        limit.admits(&first);
        let mut batch = vec![first];
        while let Ok(next) = incoming.try_recv() {
            if !limit.admits(&next) {
                held = Some(next);
                break;
            }
            batch.push(next);
        }
        // A batch that panicked answered nobody: its requests' senders are dropped with it.
        let _ = tokio::spawn(write(batch)).await;
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// At most `most` units per batch, but always its first request.
    struct Units {
        most: usize,
        requests: usize,
        taken: usize,
    }

    impl BatchLimit<usize> for Units {
        fn admits(&mut self, request: &usize) -> bool {
            let fits = self.requests == 0 || self.taken + request <= self.most;
            if fits {
                self.requests += 1;
                self.taken += request;
            }
            fits
        }
    }

    #[tokio::test]
    async fn what_queued_meanwhile_is_written_in_batches_within_the_limit() {
        let (queue, incoming) = mpsc::unbounded_channel();
        for units in [3, 4, 2, 9, 1] {
            queue.send(units).unwrap();
        }
        drop(queue);
        let written = Arc::new(Mutex::new(Vec::new()));
        let sink = written.clone();
        run(
            incoming,
            || Units { most: 8, requests: 0, taken: 0 },
            move |batch| {
                sink.lock().unwrap().push(batch);
                async {}
            },
        )
        .await;
        // 3 + 4 fit, 2 would pass 8; 2 opens the next, 9 does not fit beside it; 9 alone
        // exceeds the limit yet is written (a request is never split), 1 does not fit beside it.
        let expected = vec![vec![3, 4], vec![2], vec![9], vec![1]];
        assert_eq!(*written.lock().unwrap(), expected);
    }
}
