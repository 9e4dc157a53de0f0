use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[derive(DeriveIden)]
enum Customers {
    Table,
    Id,
    Name,
    CreatedAt,
}

#[derive(DeriveIden)]
enum Users {
    Table,
    Id,
    Username,
    PasswordHash,
    Role,
    CustomerId,
    CreatedAt,
}

#[derive(DeriveIden)]
enum ApiKeys {
    Table,
    Id,
    CustomerId,
    Name,
    TokenHash,
    CreatedAt,
    LastUsedAt,
}

#[derive(DeriveIden)]
enum Subscriptions {
    Table,
    Id,
    CustomerId,
    Name,
    Url,
    EndpointId,
    EventTypes,
    RetryPolicy,
    TimeoutMs,
    ContentMode,
    Status,
    Secret,
    PreviousSecret,
    PreviousSecretExpiresAt,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum Events {
    Table,
    Id,
    CustomerId,
    Source,
    CeId,
    EventType,
    Payload,
    CreatedAt,
}

#[derive(DeriveIden)]
enum Messages {
    Table,
    Id,
    CustomerId,
    EventId,
    SubscriptionId,
    EndpointId,
    EventType,
    State,
    DeadReason,
    AttemptCount,
    AttemptBase,
    TtlStartedAt,
    ExpiresAt,
    NextAttemptAt,
    LeaseToken,
    CreatedAt,
    UpdatedAt,
    DeliveredAt,
    LastStatus,
}

#[derive(DeriveIden)]
enum Attempts {
    Table,
    Id,
    MessageId,
    CustomerId,
    Number,
    StartedAt,
    DurationMs,
    StatusCode,
    ErrorKind,
    ErrorDetail,
    Outcome,
    RequestHeaders,
    ResponseHeaders,
    ResponseBody,
}

#[derive(DeriveIden)]
enum Endpoints {
    Table,
    Id,
    CustomerId,
    Url,
    State,
    ConsecutiveFailures,
    WindowBuckets,
    LastSuccessAt,
    LastFailureAt,
    NextProbeAt,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum AuditLog {
    Table,
    Id,
    At,
    Actor,
    Action,
    Target,
    Detail,
}

fn index(name: &str, table: impl IntoIden, columns: &[&'static str]) -> IndexCreateStatement {
    let mut stmt = Index::create();
    stmt.name(name).table(table);
    for column in columns {
        stmt.col(Alias::new(*column));
    }
    stmt
}

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, m: &SchemaManager) -> Result<(), DbErr> {
        m.create_table(
            Table::create()
                .table(Customers::Table)
                .col(string(Customers::Id).primary_key())
                .col(string(Customers::Name))
                .col(big_integer(Customers::CreatedAt))
                .to_owned(),
        )
        .await?;

        m.create_table(
            Table::create()
                .table(Users::Table)
                .col(string(Users::Id).primary_key())
                .col(string_uniq(Users::Username))
                .col(string(Users::PasswordHash))
                .col(string(Users::Role))
                .col(string_null(Users::CustomerId))
                .col(big_integer(Users::CreatedAt))
                .to_owned(),
        )
        .await?;

        m.create_table(
            Table::create()
                .table(ApiKeys::Table)
                .col(string(ApiKeys::Id).primary_key())
                .col(string(ApiKeys::CustomerId))
                .col(string(ApiKeys::Name))
                .col(string_uniq(ApiKeys::TokenHash))
                .col(big_integer(ApiKeys::CreatedAt))
                .col(big_integer_null(ApiKeys::LastUsedAt))
                .to_owned(),
        )
        .await?;
        m.create_index(index("idx_api_keys_customer", ApiKeys::Table, &["customer_id", "id"])).await?;

        m.create_table(
            Table::create()
                .table(Subscriptions::Table)
                .col(string(Subscriptions::Id).primary_key())
                .col(string(Subscriptions::CustomerId))
                .col(string(Subscriptions::Name))
                .col(text(Subscriptions::Url))
                .col(string(Subscriptions::EndpointId))
                .col(text(Subscriptions::EventTypes))
                .col(text(Subscriptions::RetryPolicy))
                .col(integer(Subscriptions::TimeoutMs))
                .col(string(Subscriptions::ContentMode))
                .col(string(Subscriptions::Status))
                .col(text(Subscriptions::Secret))
                .col(text_null(Subscriptions::PreviousSecret))
                .col(big_integer_null(Subscriptions::PreviousSecretExpiresAt))
                .col(big_integer(Subscriptions::CreatedAt))
                .col(big_integer(Subscriptions::UpdatedAt))
                .to_owned(),
        )
        .await?;
        m.create_index(index("idx_subscriptions_customer", Subscriptions::Table, &["customer_id", "id"])).await?;

        m.create_table(
            Table::create()
                .table(Events::Table)
                .col(string(Events::Id).primary_key())
                .col(string(Events::CustomerId))
                .col(text(Events::Source))
                .col(text(Events::CeId))
                .col(text(Events::EventType))
                .col(text(Events::Payload))
                .col(big_integer(Events::CreatedAt))
                .to_owned(),
        )
        .await?;
        m.create_index(
            index("uq_events_customer_source_id", Events::Table, &["customer_id", "source", "ce_id"])
                .unique()
                .to_owned(),
        )
        .await?;

        m.create_table(
            Table::create()
                .table(Messages::Table)
                .col(string(Messages::Id).primary_key())
                .col(string(Messages::CustomerId))
                .col(string(Messages::EventId))
                .col(string(Messages::SubscriptionId))
                .col(string(Messages::EndpointId))
                .col(text(Messages::EventType))
                .col(string(Messages::State))
                .col(string_null(Messages::DeadReason))
                .col(integer(Messages::AttemptCount))
                // A replay starts a new series: the policy counts attempts above this base…
                .col(integer(Messages::AttemptBase))
                // …and measures the TTL from this time (the creation, or the last replay).
                .col(big_integer(Messages::TtlStartedAt))
                // When the TTL of the series ends: a held message is due to expire then.
                .col(big_integer(Messages::ExpiresAt))
                .col(big_integer_null(Messages::NextAttemptAt))
                .col(big_integer_null(Messages::LeaseToken))
                .col(big_integer(Messages::CreatedAt))
                .col(big_integer(Messages::UpdatedAt))
                .col(big_integer_null(Messages::DeliveredAt))
                .col(integer_null(Messages::LastStatus))
                .to_owned(),
        )
        .await?;
        // The retry lane's claim, and expired leases (a delivering message is due again at its lease end).
        m.create_index(index("idx_messages_due", Messages::Table, &["state", "next_attempt_at"])).await?;
        // The fresh lane's claim: first attempts only.
        m.create_index(index("idx_messages_fresh", Messages::Table, &["state", "attempt_count", "next_attempt_at"]))
            .await?;
        // The delivery log, newest first, per customer and per subscription.
        m.create_index(index("idx_messages_customer", Messages::Table, &["customer_id", "id"])).await?;
        m.create_index(index("idx_messages_customer_state", Messages::Table, &["customer_id", "state", "id"])).await?;
        m.create_index(index("idx_messages_subscription", Messages::Table, &["subscription_id", "id"])).await?;
        m.create_index(index("idx_messages_endpoint", Messages::Table, &["endpoint_id", "state"])).await?;
        m.create_index(index("idx_messages_event", Messages::Table, &["event_id"])).await?;

        m.create_table(
            Table::create()
                .table(Attempts::Table)
                .col(string(Attempts::Id).primary_key())
                .col(string(Attempts::MessageId))
                .col(string(Attempts::CustomerId))
                .col(integer(Attempts::Number))
                .col(big_integer(Attempts::StartedAt))
                .col(big_integer(Attempts::DurationMs))
                .col(integer_null(Attempts::StatusCode))
                .col(string_null(Attempts::ErrorKind))
                .col(text_null(Attempts::ErrorDetail))
                .col(string(Attempts::Outcome))
                .col(text(Attempts::RequestHeaders))
                .col(text(Attempts::ResponseHeaders))
                .col(text_null(Attempts::ResponseBody))
                .to_owned(),
        )
        .await?;
        m.create_index(
            index("uq_attempts_message_number", Attempts::Table, &["message_id", "number"]).unique().to_owned(),
        )
        .await?;
        // The overview's chart: attempts per minute, per customer.
        m.create_index(index("idx_attempts_started", Attempts::Table, &["started_at"])).await?;
        m.create_index(index("idx_attempts_customer_started", Attempts::Table, &["customer_id", "started_at"])).await?;

        m.create_table(
            Table::create()
                .table(Endpoints::Table)
                .col(string(Endpoints::Id).primary_key())
                .col(string(Endpoints::CustomerId))
                .col(text(Endpoints::Url))
                .col(string(Endpoints::State))
                .col(big_integer(Endpoints::ConsecutiveFailures))
                // The failure-rate window: time buckets of (attempts, failures), as JSON.
                .col(text(Endpoints::WindowBuckets))
                .col(big_integer_null(Endpoints::LastSuccessAt))
                .col(big_integer_null(Endpoints::LastFailureAt))
                .col(big_integer_null(Endpoints::NextProbeAt))
                .col(big_integer(Endpoints::CreatedAt))
                .col(big_integer(Endpoints::UpdatedAt))
                .to_owned(),
        )
        .await?;
        m.create_index(
            index("uq_endpoints_customer_url", Endpoints::Table, &["customer_id", "url"]).unique().to_owned(),
        )
        .await?;

        m.create_table(
            Table::create()
                .table(AuditLog::Table)
                .col(string(AuditLog::Id).primary_key())
                .col(big_integer(AuditLog::At))
                .col(string(AuditLog::Actor))
                .col(string(AuditLog::Action))
                .col(string(AuditLog::Target))
                .col(text(AuditLog::Detail))
                .to_owned(),
        )
        .await?;
        Ok(())
    }

    async fn down(&self, m: &SchemaManager) -> Result<(), DbErr> {
        for table in [
            "audit_log",
            "endpoints",
            "attempts",
            "messages",
            "events",
            "subscriptions",
            "api_keys",
            "users",
            "customers",
        ] {
            m.drop_table(Table::drop().table(Alias::new(table)).to_owned()).await?;
        }
        Ok(())
    }
}
