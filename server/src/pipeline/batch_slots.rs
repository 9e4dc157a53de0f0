//! Batch slots: the group commits in flight at once. SQLite has one writer, so one batch is
//! written at a time; PostgreSQL flushes concurrent commits together and
//! overlaps one transaction's round trips with another's, so a few run at once
//! while the next requests gather into the next batch. A batch written in a
//! single round trip gains nothing from a second one in flight (see [`BatchSlots::one`]).

use std::future::Future;

use sea_orm::DatabaseConnection;
use tokio::task::{self, JoinSet};

/// Concurrent group commits on PostgreSQL for a writer of several round trips
/// (the recorder); well inside the pool of 16, which the lanes and the API share.
pub const POSTGRES_WRITERS: usize = 4;

pub struct BatchSlots {
    writing: JoinSet<()>,
    /// The slot of each batch in flight, given back when it ends (a panic included).
    held: Vec<(task::Id, usize)>,
    free: Vec<usize>,
}

impl BatchSlots {
    pub fn for_database(db: &DatabaseConnection) -> BatchSlots {
        BatchSlots::with_slots(if crate::store::is_postgres(db) { POSTGRES_WRITERS } else { 1 })
    }

    fn with_slots(most: usize) -> BatchSlots {
        BatchSlots { writing: JoinSet::new(), held: Vec::new(), free: (0..most).rev().collect() }
    }

    /// One batch at a time, on any database: for batches written in one round
    /// trip (the publish), where a second batch in flight only splits the one
    /// that gathers meanwhile in two, and the database pays twice for the same
    /// events. A lone batch grows with the load instead.
    pub fn one() -> BatchSlots {
        BatchSlots::with_slots(1)
    }

    /// Waits until another batch may be written.
    pub async fn wait_for_slot(&mut self) {
        while self.free.is_empty() {
            let Some(ended) = self.writing.join_next_with_id().await else { return };
            let id = ended.map_or_else(|e| e.id(), |(id, ())| id);
            if let Some(i) = self.held.iter().position(|(held, _)| *held == id) {
                self.free.push(self.held.swap_remove(i).1);
            }
        }
    }

    /// Writes a batch alongside the others, given a slot (from 0) that no other
    /// batch in flight holds, for rows of its own that the others never wait for.
    /// Call [`BatchSlots::wait_for_slot`] first.
    pub fn spawn<F>(&mut self, batch: impl FnOnce(usize) -> F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        let slot = self.free.pop().expect("wait_for_slot() first");
        let id = self.writing.spawn(batch(slot)).id();
        self.held.push((id, slot));
    }

    /// Waits for every batch in flight.
    pub async fn finish(mut self) {
        while self.writing.join_next().await.is_some() {}
    }
}
