//! Every other change of a message's state, each guarded by the state (and
//! lease) it expects: releases, put-backs, deferrals, replays, holds and
//! releases of an endpoint's messages, expiry, deletion of a subscription, a
//! change of URL.

use std::ops::Range;

use sea_orm::sea_query::{Alias, Expr, ExprTrait, Query};
use sea_orm::{ColumnTrait, Condition, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QueryOrder, QuerySelect};

use domain::ids::{EndpointId, MessageId, SubscriptionId};
use domain::states::{EndpointState, MessageState};
use migrations::{FRESH_LANE, RETRY_LANE};

use super::*;
use crate::store::entities::endpoint;
use crate::store::entities::message::{Column, Entity as Messages};
/// Gives a leased message back without an attempt: deferred until a probe,
/// held behind a locked endpoint, expired while waiting, or its subscription
/// gone. The attempt count stays as it was.
pub async fn release_unattempted(
    db: &impl ConnectionTrait,
    id: &MessageId,
    lease_token: i64,
    now_ms: i64,
    finish: Finish,
) -> Result<bool, DbErr> {
    let update = Messages::update_many()
        .col_expr(Column::State, Expr::val(finish.state.as_str()))
        .col_expr(Column::DeadReason, Expr::val(finish.dead_reason))
        .col_expr(Column::NextAttemptAt, Expr::val(finish.next_attempt_at))
        .col_expr(Column::LeaseToken, Expr::val(Option::<i64>::None))
        .col_expr(Column::UpdatedAt, Expr::val(now_ms))
        .filter(Column::Id.eq(id.clone()))
        .filter(Column::State.eq(MessageState::Delivering.as_str()))
        .filter(Column::LeaseToken.eq(lease_token));
    Ok(update.exec(db).await?.rows_affected == 1)
}

/// Gives claimed messages back unattempted, due at `due_ms` (their endpoint
/// was busy); one claim's messages share its lease token.
pub async fn put_back(
    db: &impl ConnectionTrait,
    ids: Vec<MessageId>,
    lease_token: i64,
    due_ms: i64,
    now_ms: i64,
) -> Result<u64, DbErr> {
    let result = Messages::update_many()
        .col_expr(Column::State, Expr::val(MessageState::Pending.as_str()))
        .col_expr(Column::NextAttemptAt, Expr::val(due_ms))
        .col_expr(Column::LeaseToken, Expr::val(Option::<i64>::None))
        .col_expr(Column::UpdatedAt, Expr::val(now_ms))
        .filter(Column::Id.is_in(ids))
        .filter(Column::State.eq(MessageState::Delivering.as_str()))
        .filter(Column::LeaseToken.eq(lease_token))
        .exec(db)
        .await?;
    Ok(result.rows_affected)
}

/// Puts a leased message back, unattempted, until `until_ms` (its endpoint's
/// next probe) — or due now if the circuit has closed meanwhile, so that a
/// deferral racing a successful probe never strands the message.
pub async fn defer(
    db: &impl ConnectionTrait,
    id: &MessageId,
    lease_token: i64,
    until_ms: i64,
    now_ms: i64,
) -> Result<bool, DbErr> {
    let closed = Query::select()
        .expr(Expr::val(1))
        .from(endpoint::Entity)
        .and_where(Expr::col((endpoint::Entity, endpoint::Column::Id)).equals((Messages, Column::EndpointId)))
        .and_where(Expr::col((endpoint::Entity, endpoint::Column::State)).eq(EndpointState::Closed.as_str()))
        .to_owned();
    let result = Messages::update_many()
        .col_expr(Column::State, Expr::val(MessageState::Pending.as_str()))
        .col_expr(Column::NextAttemptAt, Expr::case(Expr::exists(closed), now_ms).finally(until_ms).into())
        .col_expr(Column::LeaseToken, Expr::val(Option::<i64>::None))
        .col_expr(Column::UpdatedAt, Expr::val(now_ms))
        .filter(Column::Id.eq(id.clone()))
        .filter(Column::State.eq(MessageState::Delivering.as_str()))
        .filter(Column::LeaseToken.eq(lease_token))
        .exec(db)
        .await?;
    Ok(result.rows_affected == 1)
}

/// Makes a dead or delivered message (whose event is still kept) due now as a new series: same id, its
/// attempts kept, a fresh attempt budget and TTL.
pub async fn replay(
    db: &impl ConnectionTrait,
    filter: &MessageFilter,
    ids: Option<Vec<MessageId>>,
    now_ms: i64,
) -> Result<u64, DbErr> {
    let replayable = [MessageState::Dead.as_str(), MessageState::Delivered.as_str()];
    let mut update = Messages::update_many()
        .col_expr(Column::State, Expr::val(MessageState::Pending.as_str()))
        .col_expr(Column::DeadReason, Expr::val(Option::<String>::None))
        .col_expr(Column::NextAttemptAt, Expr::val(now_ms))
        .col_expr(Column::AttemptBase, Expr::col(Column::AttemptCount))
        // Where this series begins, kept beside the earlier ones for the message's page.
        .col_expr(Alias::new("series_starts"), Expr::cust("series_starts || ',' || attempt_count"))
        .col_expr(Column::TtlStartedAt, Expr::val(now_ms))
        // The new series lives as long as the first one did.
        .col_expr(
            Column::ExpiresAt,
            Expr::val(now_ms).add(Expr::col(Column::ExpiresAt).sub(Expr::col(Column::TtlStartedAt))),
        )
        .col_expr(Column::UpdatedAt, Expr::val(now_ms))
        // Through the subscription's current URL (it may have changed since), counted by that
        // URL's circuit; a deleted subscription's message keeps its endpoint and ends again.
        .col_expr(
            Column::EndpointId,
            Expr::cust(
                "COALESCE((SELECT subscriptions.endpoint_id FROM subscriptions \
                 WHERE subscriptions.id = messages.subscription_id), messages.endpoint_id)",
            ),
        )
        .filter(filter.condition())
        .filter(Column::State.is_in(replayable))
        // A message whose event retention removed has nothing left to send.
        .filter(Expr::cust("EXISTS (SELECT 1 FROM events WHERE events.id = messages.event_id)"));
    if let Some(ids) = ids {
        update = update.filter(Column::Id.is_in(ids));
    }
    Ok(update.exec(db).await?.rows_affected)
}

/// The ids of the first `limit` messages the filter selects after `after`, in id order: a
/// replay job's next batch.
pub async fn ids_after(
    db: &impl ConnectionTrait,
    filter: &MessageFilter,
    after: Option<&MessageId>,
    limit: u64,
) -> Result<Vec<MessageId>, DbErr> {
    let mut query = Messages::find().select_only().column(Column::Id).filter(filter.condition());
    if let Some(after) = after {
        query = query.filter(Column::Id.gt(after.clone()));
    }
    query.order_by_asc(Column::Id).limit(limit).into_tuple().all(db).await
}

/// Holds every waiting message of an endpoint that just locked; each is due
/// to expire at the end of its TTL.
pub async fn hold_endpoint(db: &impl ConnectionTrait, endpoint_id: &EndpointId, now_ms: i64) -> Result<u64, DbErr> {
    Ok(holding(endpoint_id, now_ms).exec(db).await?.rows_affected)
}

pub(super) fn holding(endpoint_id: &EndpointId, now_ms: i64) -> sea_orm::UpdateMany<Messages> {
    Messages::update_many()
        .col_expr(Column::State, Expr::val(MessageState::Held.as_str()))
        .col_expr(Column::NextAttemptAt, Expr::col(Column::ExpiresAt))
        .col_expr(Column::UpdatedAt, Expr::val(now_ms))
        .filter(Column::EndpointId.eq(endpoint_id.clone()))
        .filter(Column::State.eq(MessageState::Pending.as_str()))
        .filter(waiting())
}

/// Makes an endpoint's waiting messages due now: held ones after an unlock,
/// and pending ones due before `up_to_ms` (those deferred to a probe) when its
/// circuit closes. Retries scheduled later keep their time.
pub async fn release_endpoint(
    db: &impl ConnectionTrait,
    endpoint_id: &EndpointId,
    up_to_ms: i64,
    now_ms: i64,
) -> Result<u64, DbErr> {
    Ok(releasing(endpoint_id, up_to_ms, now_ms).exec(db).await?.rows_affected)
}

pub(super) fn releasing(endpoint_id: &EndpointId, up_to_ms: i64, now_ms: i64) -> sea_orm::UpdateMany<Messages> {
    // Held by the lock, not by a paused subscription.
    let held =
        Condition::all().add(Column::State.eq(MessageState::Held.as_str())).add(Column::NextAttemptAt.lt(PAUSED));
    let released = Condition::any().add(held).add(
        Condition::all().add(Column::State.eq(MessageState::Pending.as_str())).add(Column::NextAttemptAt.lte(up_to_ms)),
    );
    Messages::update_many()
        .col_expr(Column::State, Expr::val(MessageState::Pending.as_str()))
        .col_expr(Column::NextAttemptAt, Expr::val(now_ms))
        .col_expr(Column::UpdatedAt, Expr::val(now_ms))
        .filter(Column::EndpointId.eq(endpoint_id.clone()))
        .filter(released)
        .filter(waiting())
}

/// Ends an endpoint's held messages `dead` (`expired`), or only those created
/// before `created_before_ms`: an admin's unlock that gives up the backlog.
/// Returns the messages ended.
pub async fn end_held(
    db: &impl ConnectionTrait,
    endpoint_id: &EndpointId,
    created_before_ms: Option<i64>,
    now_ms: i64,
) -> Result<Vec<message::Model>, DbErr> {
    ending_held(endpoint_id, created_before_ms, now_ms).exec_with_returning(db).await
}

pub(super) fn ending_held(
    endpoint_id: &EndpointId,
    created_before_ms: Option<i64>,
    now_ms: i64,
) -> sea_orm::UpdateMany<Messages> {
    let mut update = Messages::update_many()
        .col_expr(Column::State, Expr::val(MessageState::Dead.as_str()))
        .col_expr(Column::DeadReason, Expr::val("expired"))
        .col_expr(Column::NextAttemptAt, Expr::val(Option::<i64>::None))
        .col_expr(Column::UpdatedAt, Expr::val(now_ms))
        .filter(Column::EndpointId.eq(endpoint_id.clone()))
        .filter(Column::State.eq(MessageState::Held.as_str()))
        // Held by the lock, not by a paused subscription.
        .filter(Column::NextAttemptAt.lt(PAUSED))
        .filter(waiting());
    if let Some(before) = created_before_ms {
        update = update.filter(Column::CreatedAt.lt(before));
    }
    update
}

/// Held messages whose TTL has ended become dead, `expired`; returns them.
pub async fn expire_held(db: &impl ConnectionTrait, now_ms: i64) -> Result<Vec<message::Model>, DbErr> {
    let mut expired = Vec::new();
    // One statement per lane, each reading that lane's index.
    for lane in [FRESH_LANE, RETRY_LANE] {
        expired.extend(expire_held_in(lane, now_ms).exec_with_returning(db).await?);
    }
    Ok(expired)
}

pub(super) fn expire_held_in(lane: &'static str, now_ms: i64) -> sea_orm::UpdateMany<Messages> {
    Messages::update_many()
        .col_expr(Column::State, Expr::val(MessageState::Dead.as_str()))
        .col_expr(Column::DeadReason, Expr::val("expired"))
        .col_expr(Column::NextAttemptAt, Expr::val(Option::<i64>::None))
        .col_expr(Column::UpdatedAt, Expr::val(now_ms))
        .filter(Column::State.eq(MessageState::Held.as_str()))
        .filter(Expr::cust(lane))
        .filter(Column::NextAttemptAt.lte(now_ms))
}

/// Ends the pending and held messages of a deleted subscription; returns them.
pub async fn kill_for_subscription(
    db: &impl ConnectionTrait,
    subscription_id: &SubscriptionId,
    now_ms: i64,
) -> Result<Vec<message::Model>, DbErr> {
    let open = [MessageState::Pending.as_str(), MessageState::Held.as_str()];
    Messages::update_many()
        .col_expr(Column::State, Expr::val(MessageState::Dead.as_str()))
        .col_expr(Column::DeadReason, Expr::val("subscription_deleted"))
        .col_expr(Column::NextAttemptAt, Expr::val(Option::<i64>::None))
        .col_expr(Column::UpdatedAt, Expr::val(now_ms))
        .filter(Column::SubscriptionId.eq(subscription_id.clone()))
        .filter(Column::State.is_in(open))
        .exec_with_returning(db)
        .await
}

/// Moves a subscription's open messages to the endpoint of its new URL, as
/// that endpoint's state has them: held while it is locked, otherwise due
/// now (a new target starts afresh, and its circuit decides from there).
pub async fn move_to_endpoint(
    db: &impl ConnectionTrait,
    subscription_id: &SubscriptionId,
    endpoint_id: &EndpointId,
    locked: bool,
    now_ms: i64,
) -> Result<u64, DbErr> {
    let (state, next_attempt_at) = if locked {
        (MessageState::Held, Expr::col(Column::ExpiresAt))
    } else {
        (MessageState::Pending, Expr::val(now_ms))
    };
    let moved = Messages::update_many()
        .col_expr(Column::EndpointId, Expr::val(endpoint_id.as_str()))
        .col_expr(Column::State, Expr::val(state.as_str()))
        .col_expr(Column::NextAttemptAt, next_attempt_at)
        .col_expr(Column::UpdatedAt, Expr::val(now_ms))
        .filter(Column::SubscriptionId.eq(subscription_id.clone()))
        .filter(Column::State.is_in([MessageState::Pending.as_str(), MessageState::Held.as_str()]))
        // Those a pause holds wait for the resume, which sends them to the URL of that time.
        .filter(Column::NextAttemptAt.lt(PAUSED))
        .exec(db)
        .await?;
    Ok(moved.rows_affected)
}

/// The resume of a paused subscription: the messages the pause held go to its
/// endpoint (its URL may have changed meanwhile), due now, or held while that
/// endpoint is locked, and their TTL starts now.
pub async fn release_paused(
    db: &impl ConnectionTrait,
    subscription_id: &SubscriptionId,
    endpoint_id: &EndpointId,
    locked: bool,
    ttl_ms: i64,
    now_ms: i64,
) -> Result<u64, DbErr> {
    let (state, next_attempt_at) =
        if locked { (MessageState::Held, now_ms + ttl_ms) } else { (MessageState::Pending, now_ms) };
    let released = Messages::update_many()
        .col_expr(Column::EndpointId, Expr::val(endpoint_id.as_str()))
        .col_expr(Column::State, Expr::val(state.as_str()))
        .col_expr(Column::NextAttemptAt, Expr::val(next_attempt_at))
        .col_expr(Column::TtlStartedAt, Expr::val(now_ms))
        .col_expr(Column::ExpiresAt, Expr::val(now_ms + ttl_ms))
        .col_expr(Column::UpdatedAt, Expr::val(now_ms))
        .filter(Column::SubscriptionId.eq(subscription_id.clone()))
        .filter(Column::State.eq(MessageState::Held.as_str()))
        .filter(Column::NextAttemptAt.eq(PAUSED))
        .exec(db)
        .await?;
    Ok(released.rows_affected)
}

/// Makes leased messages due now, unattempted: all of them (`tokens` None), or
/// those whose lease token lies in `tokens` (one process's, see
/// [`crate::store::processes`]). Called for leases whose process is gone: the
/// one process that may serve a SQLite file finds only such at its start, and
/// on PostgreSQL a process that fell silent is taken for dead by the others.
/// The retry lane takes them at once instead of after their lease; their
/// attempt counts stay as they were.
pub async fn take_back_leases(
    db: &impl ConnectionTrait,
    tokens: Option<Range<i64>>,
    now_ms: i64,
) -> Result<u64, DbErr> {
    let mut taken = 0;
    // One statement per lane, each reading that lane's index.
    for lane in [FRESH_LANE, RETRY_LANE] {
        taken += taking_back_in(lane, tokens.clone(), now_ms).exec(db).await?.rows_affected;
    }
    Ok(taken)
}

pub(super) fn taking_back_in(
    lane: &'static str,
    tokens: Option<Range<i64>>,
    now_ms: i64,
) -> sea_orm::UpdateMany<Messages> {
    let mut update = Messages::update_many()
        .col_expr(Column::NextAttemptAt, Expr::val(now_ms))
        .col_expr(Column::UpdatedAt, Expr::val(now_ms))
        .filter(Column::State.eq(MessageState::Delivering.as_str()))
        .filter(Expr::cust(lane))
        .filter(Column::NextAttemptAt.gt(now_ms));
    if let Some(tokens) = tokens {
        update = update.filter(Column::LeaseToken.gte(tokens.start)).filter(Column::LeaseToken.lt(tokens.end));
    }
    update
}
