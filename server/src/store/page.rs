//! Keyset paging over ids, which sort by creation time: the cursor is the last
//! id of a page, encoded so that clients treat it as opaque.
//!
//! A filter that an index cannot answer (an event type, a source, a start
//! time, a state across customers) is checked row by row along the index of
//! the rest. So that no page reads without end when few rows match, a page
//! reads at most [`SCAN_BUDGET`] rows of that index ([`newest_first`]): when they run
//! out before the page fills, the page ends there, short, with a cursor that
//! continues the search from the last row read and the time it reached.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use sea_orm::{ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QueryOrder, QuerySelect, Select};

pub use domain::query::{DEFAULT_LIMIT, MAX_LIMIT};

/// Rows a page whose filter is checked row by row reads at most: tens of milliseconds.
pub const SCAN_BUDGET: u64 = 20_000;
/// The rows read first, enough for a page of a filter that most rows match; the rest of the
/// budget is read only when they do not fill the page.
const FIRST_READ: u64 = 1_000;

/// A page of `filtered` (the whole filter), newest first, one row more than `page.limit` when
/// another follows. With a `range` (the same rows as far as an index answers the filter, when
/// the rest is checked row by row), it reads at most [`SCAN_BUDGET`] rows along it; when the
/// budget ran out first, the id of the last row read comes back too: the next page continues
/// below it.
pub async fn newest_first<E: EntityTrait>(
    db: &impl ConnectionTrait,
    range: Option<Select<E>>,
    filtered: Select<E>,
    id: E::Column,
    page: &PageRequest,
) -> Result<(Vec<E::Model>, Option<String>), DbErr> {
    let below = |query: Select<E>, id_below: Option<&str>| match id_below {
        Some(before) => query.filter(id.lt(before)),
        None => query,
    };
    let Some(range) = range else {
        let query = below(filtered, page.before.as_deref()).order_by_desc(id).limit(page.limit + 1);
        return Ok((query.all(db).await?, None));
    };
    let mut rows = Vec::new();
    let mut upper = page.before.clone();
    for read in [FIRST_READ, SCAN_BUDGET] {
        // The last row this read may reach, counted from the cursor.
        let stop: Option<String> = below(range.clone(), page.before.as_deref())
            .select_only()
            .column(id)
            .order_by_desc(id)
            .offset(read - 1)
            .limit(1)
            .into_tuple()
            .one(db)
            .await?;
        let mut query = below(filtered.clone(), upper.as_deref()).order_by_desc(id);
        if let Some(stop) = &stop {
            query = query.filter(id.gte(stop.as_str()));
        }
        rows.extend(query.limit(page.limit + 1 - rows.len() as u64).all(db).await?);
        if rows.len() as u64 > page.limit || stop.is_none() {
            return Ok((rows, None));
        }
        upper = stop;
    }
    Ok((rows, upper))
}

/// A page of `query`, newest first, one row more than `page.limit` when another follows, for a
/// filter an index answers whole.
pub async fn newest<E: EntityTrait>(
    db: &impl ConnectionTrait,
    query: Select<E>,
    id: E::Column,
    page: &PageRequest,
) -> Result<Vec<E::Model>, DbErr> {
    Ok(newest_first(db, None, query, id, page).await?.0)
}

/// Splits a fetch of `limit + 1` rows into the page, the next cursor and, when the search
/// stopped at `stop` before the page filled, that id: the next page continues below it.
pub fn finish_search<T>(
    rows: Vec<T>,
    limit: u64,
    id_of: impl Fn(&T) -> &str,
    stop: Option<String>,
) -> (Vec<T>, Option<String>, Option<String>) {
    if rows.len() as u64 > limit {
        let (rows, next) = finish(rows, limit, id_of);
        return (rows, next, None);
    }
    let next = stop.as_deref().map(encode_cursor);
    (rows, next, stop)
}

/// A validated page request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PageRequest {
    /// Only rows with an id below this one (the previous page's last row).
    pub before: Option<String>,
    pub limit: u64,
}

pub fn encode_cursor(id: &str) -> String {
    URL_SAFE_NO_PAD.encode(format!("c1:{id}"))
}

/// `None` when the cursor was not made by `encode_cursor`.
pub fn decode_cursor(cursor: &str) -> Option<String> {
    let bytes = URL_SAFE_NO_PAD.decode(cursor).ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let id = text.strip_prefix("c1:")?;
    let valid = !id.is_empty() && id.len() <= 64 && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    valid.then(|| id.to_string())
}

/// Splits a fetch of `limit + 1` rows into the page and the next cursor.
pub fn finish<T>(mut rows: Vec<T>, limit: u64, id_of: impl Fn(&T) -> &str) -> (Vec<T>, Option<String>) {
    if rows.len() as u64 > limit {
        rows.truncate(limit as usize);
        let next = rows.last().map(|row| encode_cursor(id_of(row)));
        (rows, next)
    } else {
        (rows, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_cursor_round_trips_and_garbage_is_refused() {
        assert_eq!(decode_cursor(&encode_cursor("msg_01ABC")), Some("msg_01ABC".into()));
        for bad in ["", "!!", "bXNn", &URL_SAFE_NO_PAD.encode("c1:x' OR 1=1")] {
            assert_eq!(decode_cursor(bad), None, "{bad}");
        }
    }

    #[test]
    fn finish_returns_a_cursor_only_when_more_rows_exist() {
        let (rows, next) = finish(vec!["c", "b", "a"], 2, |s| s);
        assert_eq!((rows, next), (vec!["c", "b"], Some(encode_cursor("b"))));
        let (rows, next) = finish(vec!["c", "b"], 2, |s| s);
        assert_eq!((rows, next), (vec!["c", "b"], None));
    }

    #[test]
    fn a_search_stopped_short_continues_below_its_last_row() {
        let stop = Some("b".to_string());
        let (rows, next, stopped) = finish_search(vec!["d", "c"], 2, |s| s, stop.clone());
        assert_eq!((rows, next, stopped), (vec!["d", "c"], Some(encode_cursor("b")), Some("b".into())));
        let (rows, next, stopped) = finish_search(vec!["d", "c", "b"], 2, |s| s, stop.clone());
        assert_eq!((rows, next, stopped), (vec!["d", "c"], Some(encode_cursor("c")), None));
        let (rows, next, stopped) = finish_search(vec!["d"], 2, |s| s, stop);
        assert_eq!((rows, next, stopped), (vec!["d"], Some(encode_cursor("b")), Some("b".into())));
        let (rows, next, stopped) = finish_search(vec!["d"], 2, |s| s, None);
        assert_eq!((rows, next, stopped), (vec!["d"], None, None), "nothing more to read");
    }

    proptest! {
        #[test]
        fn decoding_any_string_never_panics(s in ".{0,200}") {
            let _ = decode_cursor(&s);
        }
    }
}
