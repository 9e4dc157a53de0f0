//! Property-based fuzzing of list cursors: `encode_cursor`/`decode_cursor`, the page split in
//! `finish`, and `page_request`, which turns the client's `limit` and `cursor` into a page.
//!
//! A decoded cursor is bound into a keyset query (`id < before`), so whatever the client sends
//! must come back as a well-formed id or be refused with the parameter named. Case counts follow
//! proptest's defaults (`PROPTEST_CASES` overrides them).

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use domain::query::{Limit, PageQuery, ReadQuery, text_of};
use herald::ids::new_id;
use herald::service::{ServiceError, page_request};
use herald::store::page::{DEFAULT_LIMIT, MAX_LIMIT, decode_cursor, encode_cursor, finish};
use proptest::prelude::*;

/// The ids a cursor may carry: 1 to 64 ASCII letters, digits or `_`.
fn is_valid_id(id: &str) -> bool {
    (1..=64).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

fn valid_id() -> impl Strategy<Value = String> {
    prop_oneof!["[A-Za-z0-9_]{1,64}", "[a-z]{2,4}_[0-9A-HJKMNP-TV-Z]{26}"]
}

/// Cursor-like text: base64url alphabet, padding, and anything else.
fn cursor_text() -> impl Strategy<Value = String> {
    prop_oneof!["[A-Za-z0-9_-]{0,100}", "[A-Za-z0-9+/=_-]{0,40}", ".{0,60}", any::<String>()]
}

/// One edit of a cursor: replace, remove or insert a character (from the base64 alphabets,
/// padding, or anything), or append padding.
fn edit(cursor: &str, at: prop::sample::Index, op: u8, c: char) -> String {
    let mut chars: Vec<char> = cursor.chars().collect();
    let i = at.index(chars.len().max(1)).min(chars.len());
    match op {
        0 if i < chars.len() => chars[i] = c,
        1 if i < chars.len() => {
            chars.remove(i);
        }
        2 => chars.insert(i, c),
        _ => chars.push('='),
    }
    chars.into_iter().collect()
}

proptest! {
    /// Any text decodes without panicking, and only ever to a well-formed id whose own cursor
    /// is exactly that text (so one position has one cursor).
    #[test]
    fn decoding_any_text_yields_a_valid_id_or_nothing(text in cursor_text()) {
        if let Some(id) = decode_cursor(&text) {
            prop_assert!(is_valid_id(&id), "{:?} decoded to {:?}", text, id);
            prop_assert_eq!(encode_cursor(&id), text);
        }
    }

    /// Any payload wrapped in base64url decodes exactly when it is `c1:` and a valid id: the
    /// decoder refuses other versions, invalid UTF-8, empty, long and injected ids.
    #[test]
    fn decoding_any_payload_follows_the_format(
        bytes in prop_oneof![
            prop::collection::vec(any::<u8>(), 0..80),
            "[A-Za-z0-9_' ;=-]{0,70}".prop_map(String::into_bytes),
        ],
        versioned in any::<bool>(),
    ) {
        let mut payload = if versioned { b"c1:".to_vec() } else { Vec::new() };
        payload.extend(bytes);
        let expected = std::str::from_utf8(&payload)
            .ok()
            .and_then(|text| text.strip_prefix("c1:"))
            .filter(|id| is_valid_id(id))
            .map(str::to_string);
        prop_assert_eq!(decode_cursor(&URL_SAFE_NO_PAD.encode(&payload)), expected);
    }

    /// encode then decode gives back the position, for any valid id and for the ids the
    /// server actually generates.
    #[test]
    fn cursors_round_trip(id in valid_id(), prefix in "[a-z]{1,5}") {
        prop_assert_eq!(decode_cursor(&encode_cursor(&id)), Some(id));
        let generated = new_id(&prefix);
        prop_assert_eq!(decode_cursor(&encode_cursor(&generated)), Some(generated));
    }

    /// A valid cursor with one edit either is refused or is itself the cursor of the id it
    /// decodes to: no edited spelling silently lands on some other position's cursor.
    #[test]
    fn edited_cursors_are_refused_or_canonical(
        id in valid_id(),
        at in any::<prop::sample::Index>(),
        op in 0u8..4,
        c in prop_oneof![prop::char::range('A', 'z'), Just('='), Just('+'), Just('/'), Just('-'), any::<char>()],
    ) {
        let edited = edit(&encode_cursor(&id), at, op, c);
        if let Some(decoded) = decode_cursor(&edited) {
            prop_assert!(is_valid_id(&decoded));
            prop_assert_eq!(encode_cursor(&decoded), edited);
        }
    }

    /// `finish` returns at most `limit` rows, in order, and a next cursor exactly when rows
    /// were left over; that cursor points at the page's last row and the API accepts it.
    #[test]
    fn finish_hands_out_cursors_the_api_accepts(
        ids in prop::collection::vec(valid_id(), 0..30),
        limit in 1u64..25,
    ) {
        let (rows, next) = finish(ids.clone(), limit, |id| id.as_str());
        prop_assert_eq!(rows.len() as u64, (ids.len() as u64).min(limit));
        prop_assert_eq!(&rows[..], &ids[..rows.len()]);
        prop_assert_eq!(next.is_some(), ids.len() as u64 > limit);
        if let Some(cursor) = next {
            let page = page_request(Some(Limit(limit)), Some(&cursor));
            prop_assert!(page.is_ok(), "{:?}", page);
            prop_assert_eq!(page.unwrap().before, rows.last().cloned());
        }
    }

    /// A page's query never panics: it accepts limits 1 to MAX_LIMIT (default when absent)
    /// and treats an empty cursor as none; a refusal names `limit` or `cursor`.
    #[test]
    fn a_page_query_is_accepted_or_names_the_parameter(
        limit in prop::option::of(prop_oneof![any::<i64>(), -2i64..1_003]),
        cursor in prop::option::of(prop_oneof![cursor_text(), valid_id().prop_map(|id| encode_cursor(&id))]),
    ) {
        let limit_ok = limit.is_none_or(|n| (1..=MAX_LIMIT as i64).contains(&n));
        let decoded = cursor.as_deref().filter(|c| !c.is_empty()).map(decode_cursor);
        let mut pairs: Vec<(String, String)> = limit.iter().map(|n| ("limit".to_string(), n.to_string())).collect();
        pairs.extend(cursor.iter().map(|c| ("cursor".to_string(), c.clone())));
        let read = PageQuery::read(&pairs).map_err(ServiceError::from);
        match read.and_then(|q| page_request(q.limit, text_of(&q.cursor))) {
            Ok(page) => {
                prop_assert!(limit_ok);
                prop_assert_eq!(page.limit, limit.map_or(DEFAULT_LIMIT, |n| n as u64));
                prop_assert!(decoded != Some(None), "an undecodable cursor was accepted: {:?}", cursor);
                prop_assert_eq!(page.before, decoded.flatten());
            }
            Err(ServiceError::Invalid(errors)) => {
                prop_assert_eq!(errors.len(), 1);
                let expected = if !limit_ok { "limit" } else { "cursor" };
                prop_assert_eq!(errors[0].field.as_str(), expected);
                prop_assert!(!errors[0].message.is_empty());
                prop_assert!(!limit_ok || decoded == Some(None));
            }
            Err(other) => prop_assert!(false, "unexpected error {:?}", other),
        }
    }
}
