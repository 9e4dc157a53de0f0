//! Keyset paging over ids, which sort by creation time: the cursor is the last
//! id of a page, encoded so that clients treat it as opaque.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

pub const DEFAULT_LIMIT: u64 = 50;
pub const MAX_LIMIT: u64 = 1000;

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

    proptest! {
        #[test]
        fn decoding_any_string_never_panics(s in ".{0,200}") {
            let _ = decode_cursor(&s);
        }
    }
}
