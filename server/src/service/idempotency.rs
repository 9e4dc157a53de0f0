//! Answers kept for `Idempotency-Key`. The HTTP layer opens a scope around a request that
//! carries a key (which caller, which key, the request that holds it, the route's success
//! status); a use case that changes something keeps its answer with [`keep_answer`] in the
//! transaction of the change, so that a crash can keep neither or both, never the change without
//! its answer. A request that no longer holds its key (a repeat took it over after its lock
//! ended) cannot keep an answer, and its change is rolled back. Outside a scope (the dashboard,
//! the pipeline) this does nothing.

use std::future::Future;
use std::sync::Arc;

use sea_orm::{ConnectionTrait, DatabaseTransaction};
use serde::Serialize;

use super::ServiceError;
use crate::secrets::{Sealer, Unsealable};
use crate::store::idempotency_keys::{self, Answer};

tokio::task_local! {
    static SCOPE: Scope;
}

/// The key the request being served carries.
#[derive(Clone)]
pub struct Scope {
    /// `admin`, or `customer:<id>`: keys are the caller's own.
    pub caller: String,
    pub key: String,
    /// This request's hold on the key.
    pub owner: i64,
    /// The status the route answers when it succeeds.
    pub status: u16,
    pub sealer: Arc<Sealer>,
}

impl Scope {
    /// An answer's body sealed, bound to the caller and the key (it may hold a secret).
    pub fn seal(&self, body: &str) -> String {
        self.sealer.seal(body, &self.bound())
    }

    pub fn open(&self, sealed: &str) -> Result<String, Unsealable> {
        self.sealer.open(sealed, &self.bound())
    }

    fn bound(&self) -> String {
        format!("idempotency/{}/{}", self.caller, self.key)
    }
}

/// Runs `work` (the request) within the key's scope.
pub async fn within<F: Future>(scope: Scope, work: F) -> F::Output {
    SCOPE.scope(scope, work).await
}

/// Keeps `body` (or no body) as the answer to the request being served, if it carries a key,
/// in `txn`: the transaction of the change it answers. A conflict when the request no longer
/// holds its key: the change must not be committed.
pub async fn keep_answer<T: Serialize>(txn: &impl ConnectionTrait, body: Option<&T>) -> super::Result<()> {
    let Ok(scope) = SCOPE.try_with(Scope::clone) else { return Ok(()) };
    let body = body.map(|body| serde_json::to_string(body).expect("answers serialize to JSON"));
    let answer = Answer {
        status: scope.status,
        content_type: body.as_ref().map(|_| "application/json"),
        body: body.as_deref().map(|body| scope.seal(body)),
    };
    if idempotency_keys::answer(txn, &scope.caller, &scope.key, scope.owner, answer).await? {
        Ok(())
    } else {
        Err(ServiceError::Conflict(
            "a repeat of this request took its Idempotency-Key over after it ran too long; nothing was changed".into(),
        ))
    }
}

/// Keeps `answer` in `txn` (see [`keep_answer`]), commits, and returns it.
pub async fn commit_answering<T: Serialize>(txn: DatabaseTransaction, answer: T) -> super::Result<T> {
    keep_answer(&txn, Some(&answer)).await?;
    txn.commit().await?;
    Ok(answer)
}
