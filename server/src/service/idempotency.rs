//! Answers kept for `Idempotency-Key`. The HTTP layer opens a scope around a request that
//! carries a key (which caller, which key, the route's success status); a use case that changes
//! something keeps its answer with [`keep_answer`] in the transaction of the change, so that a
//! crash can keep neither or both, never the change without its answer. Outside a scope (the
//! dashboard, the pipeline) it does nothing.

use std::future::Future;

use sea_orm::{ConnectionTrait, DatabaseTransaction, DbErr};
use serde::Serialize;

use crate::store::idempotency_keys;

tokio::task_local! {
    static SCOPE: Scope;
}

/// The key the request being served carries.
#[derive(Clone, Debug)]
pub struct Scope {
    /// `admin`, or `customer:<id>`: keys are the caller's own.
    pub caller: String,
    pub key: String,
    /// The status the route answers when it succeeds.
    pub status: u16,
}

/// Runs `work` (the request) within the key's scope.
pub async fn within<F: Future>(scope: Scope, work: F) -> F::Output {
    SCOPE.scope(scope, work).await
}

/// Keeps `body` (or no body) as the answer to the request being served, if it carries a key,
/// in `txn`: the transaction of the change it answers.
pub async fn keep_answer<T: Serialize>(txn: &impl ConnectionTrait, body: Option<&T>) -> Result<(), DbErr> {
    let Ok(scope) = SCOPE.try_with(Scope::clone) else { return Ok(()) };
    let body = body.map(|body| serde_json::to_string(body).expect("answers serialize to JSON"));
    let content_type = body.as_ref().map(|_| "application/json");
    idempotency_keys::answer(txn, &scope.caller, &scope.key, scope.status, content_type, body).await
}

/// Keeps `answer` in `txn` (see [`keep_answer`]), commits, and returns it.
pub async fn commit_answering<T: Serialize>(txn: DatabaseTransaction, answer: T) -> super::Result<T> {
    keep_answer(&txn, Some(&answer)).await?;
    txn.commit().await?;
    Ok(answer)
}
