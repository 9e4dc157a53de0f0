//! Dashboard sessions in Herald's own database, so a session survives a
//! restart on SQLite and PostgreSQL alike, with one connection pool. Only a
//! hash of each session id is stored.

use sea_orm::sea_query::OnConflict;
use sea_orm::{ActiveValue::Set, ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter};
use tower_sessions::cookie::time::OffsetDateTime;
use tower_sessions::session::{Id, Record};
use tower_sessions::session_store::{self, SessionStore};

use super::entities::session::{self, Column, Entity as Sessions};
use crate::ids::token_hash;

#[derive(Debug, Clone)]
pub struct DbSessionStore {
    db: DatabaseConnection,
}

impl DbSessionStore {
    pub fn new(db: DatabaseConnection) -> Self {
        DbSessionStore { db }
    }

    /// Removes sessions past their expiry.
    pub async fn delete_expired(&self, now_ms: i64) -> Result<u64, sea_orm::DbErr> {
        Ok(Sessions::delete_many().filter(Column::ExpiresAt.lt(now_ms)).exec(&self.db).await?.rows_affected)
    }
}

fn backend(e: impl std::fmt::Display) -> session_store::Error {
    session_store::Error::Backend(e.to_string())
}

fn key(id: &Id) -> String {
    token_hash(&id.to_string())
}

fn millis(t: OffsetDateTime) -> i64 {
    (t.unix_timestamp_nanos() / 1_000_000) as i64
}

#[async_trait::async_trait]
impl SessionStore for DbSessionStore {
    async fn create(&self, record: &mut Record) -> session_store::Result<()> {
        // A collision of 128-bit random ids is not expected; if one happens, draw again.
        loop {
            let exists = Sessions::find_by_id(key(&record.id)).one(&self.db).await.map_err(backend)?.is_some();
            if !exists {
                return self.save(record).await;
            }
            record.id = Id::default();
        }
    }

    async fn save(&self, record: &Record) -> session_store::Result<()> {
        let data = serde_json::to_string(&record.data).map_err(|e| session_store::Error::Encode(e.to_string()))?;
        let row = session::ActiveModel {
            id_hash: Set(key(&record.id)),
            data: Set(data),
            expires_at: Set(millis(record.expiry_date)),
        };
        Sessions::insert(row)
            .on_conflict(
                OnConflict::column(Column::IdHash).update_columns([Column::Data, Column::ExpiresAt]).to_owned(),
            )
            .exec_without_returning(&self.db)
            .await
            .map_err(backend)?;
        Ok(())
    }

    async fn load(&self, id: &Id) -> session_store::Result<Option<Record>> {
        let Some(row) = Sessions::find_by_id(key(id)).one(&self.db).await.map_err(backend)? else {
            return Ok(None);
        };
        let expiry_date =
            OffsetDateTime::from_unix_timestamp_nanos(row.expires_at as i128 * 1_000_000).map_err(backend)?;
        if expiry_date <= OffsetDateTime::now_utc() {
            return Ok(None);
        }
        let data = serde_json::from_str(&row.data).map_err(|e| session_store::Error::Decode(e.to_string()))?;
        Ok(Some(Record { id: *id, data, expiry_date }))
    }

    async fn delete(&self, id: &Id) -> session_store::Result<()> {
        Sessions::delete_by_id(key(id)).exec(&self.db).await.map_err(backend)?;
        Ok(())
    }
}
