//! Group commits in flight at once. SQLite has one writer, so one batch is
//! written at a time; PostgreSQL flushes concurrent commits together and
//! overlaps one transaction's round trips with another's, so a few run at once
//! while the next requests gather into the next batch. A batch written in a
//! single round trip gains nothing from a second one in flight (see [`Writers::one`]).

use std::future::Future;

use sea_orm::DatabaseConnection;
use tokio::task::JoinSet;

/// Concurrent group commits on PostgreSQL for a writer of several round trips
/// (the recorder); well inside the pool of 16, which the lanes and the API share.
const POSTGRES_WRITERS: usize = 4;

pub struct Writers {
    writing: JoinSet<()>,
    most: usize,
}

impl Writers {
    pub fn for_database(db: &DatabaseConnection) -> Writers {
        let most = if super::is_postgres(db) { POSTGRES_WRITERS } else { 1 };
        Writers { writing: JoinSet::new(), most }
    }

    /// One batch at a time, on any database: for batches written in one round
    /// trip (the publish), where a second batch in flight only splits the one
    /// that gathers meanwhile in two, and the database pays twice for the same
    /// events. A lone batch grows with the load instead.
    pub fn one() -> Writers {
        Writers { writing: JoinSet::new(), most: 1 }
    }

    /// Waits until another batch may be written.
    pub async fn room(&mut self) {
        while self.writing.len() >= self.most {
            self.writing.join_next().await;
        }
    }

    /// Writes a batch alongside the others.
    pub fn spawn(&mut self, batch: impl Future<Output = ()> + Send + 'static) {
        self.writing.spawn(batch);
    }

    /// Waits for every batch in flight.
    pub async fn finish(mut self) {
        while self.writing.join_next().await.is_some() {}
    }
}
