use domain::ids::{CustomerId, EventId};
use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel, serde::Serialize)]
#[sea_orm(table_name = "events")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: EventId,
    pub customer_id: CustomerId,
    pub source: String,
    pub ce_id: String,
    pub event_type: String,
    pub payload: String,
    pub created_at: i64,
    /// The ids of the messages the event was routed to, comma-separated, in
    /// the order they were made: what a repeated publish answers.
    pub message_ids: String,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

impl Model {
    /// Lists one more of the event's messages.
    pub fn add_message_id(&mut self, id: &str) {
        if !self.message_ids.is_empty() {
            self.message_ids.push(',');
        }
        self.message_ids.push_str(id);
    }

    /// The event as published; `None` only if its stored text was damaged.
    pub fn cloud_event(&self) -> Option<domain::event::CloudEvent> {
        serde_json::from_str(&self.payload).ok().and_then(domain::event::CloudEvent::from_stored)
    }

    /// The event's message ids, in the order they were made.
    pub fn message_id_list(&self) -> Vec<String> {
        self.message_ids.split(',').filter(|id| !id.is_empty()).map(str::to_string).collect()
    }
}
