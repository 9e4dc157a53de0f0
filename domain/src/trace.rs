//! W3C Trace Context for the requests Herald sends (README, "What a receiver gets"; docs/operations.md, "Traces").
//!
//! Every request to a receiver carries a `traceparent` naming a new span (the attempt) in the
//! message's trace. An event published with a valid `traceparent` extension puts its messages
//! in the publisher's trace: each attempt is a child of Herald's publish span, itself a child of
//! the publisher's span. An event without one gives each of its messages a trace of its own,
//! whose id is the message id's 128 bits, so that a trace id leads back to its message.

use std::sync::LazyLock;

use memchr::memmem;
use serde::Deserialize;

/// The version Herald writes; it reads any version but `ff` as version 00's four fields.
const VERSION: &str = "00";
/// The sampled flag, set on the traces Herald starts.
pub const SAMPLED: u8 = 0x01;
/// The longest `tracestate` passed on (W3C: 32 members of at most 256 characters would be
/// more; tracers keep 512 characters).
pub const MAX_TRACESTATE_LEN: usize = 512;

/// A parsed `traceparent`: the trace, the caller's span, and the trace flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TraceParent {
    pub trace_id: [u8; 16],
    pub parent_id: [u8; 8],
    pub flags: u8,
}

impl TraceParent {
    /// Reads a header value as Trace Context level 1 defines it. `None` for what a tracer
    /// discards: another length, upper-case or non-hex digits, an all-zero id, version `ff`,
    /// or a version 00 value with anything after its flags.
    pub fn parse(text: &str) -> Option<TraceParent> {
        let text = text.trim_matches([' ', '\t']);
        let bytes = text.as_bytes();
        if bytes.len() < 55 || bytes[2] != b'-' || bytes[35] != b'-' || bytes[52] != b'-' {
            return None;
        }
        let version = &text[..2];
        if version == "ff" || (version == VERSION && bytes.len() != 55) || (bytes.len() > 55 && bytes[55] != b'-') {
            return None;
        }
        let _: [u8; 1] = from_hex(version)?;
        let trace_id: [u8; 16] = from_hex(&text[3..35])?;
        let parent_id: [u8; 8] = from_hex(&text[36..52])?;
        let [flags] = from_hex(&text[53..55])?;
        let nonzero = trace_id.iter().any(|&b| b != 0) && parent_id.iter().any(|&b| b != 0);
        nonzero.then_some(TraceParent { trace_id, parent_id, flags })
    }

    pub fn header(&self) -> String {
        // Written digit by digit: this is made for every request Herald sends.
        let mut out = String::with_capacity(55);
        out.push_str(VERSION);
        for part in [&self.trace_id[..], &self.parent_id[..], &[self.flags][..]] {
            out.push('-');
            push_hex(&mut out, part);
        }
        out
    }
}

/// The trace context an event was published with: its `traceparent` and `tracestate`
/// extensions (the CloudEvents distributed tracing extension), read from the stored event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventTrace {
    pub parent: TraceParent,
    pub state: Option<String>,
}

impl EventTrace {
    /// `None` when the event has no valid `traceparent`; a `tracestate` that no header could
    /// carry, or longer than [`MAX_TRACESTATE_LEN`], is dropped.
    pub fn of_stored(payload: &str) -> Option<EventTrace> {
        // Most events carry no trace: they are not parsed at all.
        static NAME: LazyLock<memmem::Finder<'static>> = LazyLock::new(|| memmem::Finder::new(b"\"traceparent\""));
        NAME.find(payload.as_bytes())?;
        #[derive(Deserialize)]
        struct Extensions<'a> {
            #[serde(borrow)]
            traceparent: Option<std::borrow::Cow<'a, str>>,
            #[serde(borrow)]
            tracestate: Option<std::borrow::Cow<'a, str>>,
        }
        let ext: Extensions = serde_json::from_str(payload).ok()?;
        let parent = TraceParent::parse(ext.traceparent.as_deref()?)?;
        let state = ext
            .tracestate
            .filter(|s| !s.is_empty() && s.len() <= MAX_TRACESTATE_LEN && s.bytes().all(|b| (0x20..0x7f).contains(&b)))
            .map(|s| s.into_owned());
        Some(EventTrace { parent, state })
    }
}

/// Where a message's requests sit in a trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageTrace {
    pub trace_id: [u8; 16],
    pub flags: u8,
    /// The span every attempt is a child of: Herald's publish span in the publisher's trace;
    /// `None` in the message's own trace, where each attempt is a root.
    pub parent_id: Option<[u8; 8]>,
    /// Passed on unchanged with the publisher's trace.
    pub state: Option<String>,
}

impl MessageTrace {
    /// `event_id` and `message_id` are the 128 bits of the event's and the message's ids.
    pub fn of(event: Option<EventTrace>, event_id: [u8; 16], message_id: [u8; 16]) -> MessageTrace {
        match event {
            Some(EventTrace { parent, state }) => MessageTrace {
                trace_id: parent.trace_id,
                flags: parent.flags,
                parent_id: Some(publish_span_id(event_id)),
                state,
            },
            None => MessageTrace { trace_id: own_trace_id(message_id), flags: SAMPLED, parent_id: None, state: None },
        }
    }

    /// The `traceparent` of the attempt whose span is `span_id`.
    pub fn traceparent(&self, span_id: [u8; 8]) -> String {
        TraceParent { trace_id: self.trace_id, parent_id: span_id, flags: self.flags }.header()
    }

    pub fn trace_id_hex(&self) -> String {
        hex(&self.trace_id)
    }
}

/// The trace Herald starts for a message (or for the publish of an event without a trace):
/// the 128 bits of its id, a ULID whose last 80 bits are random.
pub fn own_trace_id(id: [u8; 16]) -> [u8; 16] {
    nonzero(id)
}

/// An attempt's span: random bits, never all zero.
pub fn span_id(random: u64) -> [u8; 8] {
    nonzero(random.to_be_bytes())
}

/// Herald's span for the publish of an event: the low 64 bits of the event's id, which are
/// random, so that every attempt can name it as its parent without storing it.
pub fn publish_span_id(event_id: [u8; 16]) -> [u8; 8] {
    let mut span = [0u8; 8];
    span.copy_from_slice(&event_id[8..]);
    nonzero(span)
}

/// Ids of all zeros are invalid; an id that happens to be zero gets its last bit set.
fn nonzero<const N: usize>(mut id: [u8; N]) -> [u8; N] {
    if id.iter().all(|&b| b == 0) {
        id[N - 1] = 1;
    }
    id
}

/// Lower-case hexadecimal, as trace context writes ids.
pub fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    push_hex(&mut out, bytes);
    out
}

fn push_hex(out: &mut String, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for &b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 0x0f)] as char);
    }
}

/// Lower-case hexadecimal only: trace context forbids upper case.
fn from_hex<const N: usize>(text: &str) -> Option<[u8; N]> {
    let digit = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    };
    let text = text.as_bytes();
    if text.len() != N * 2 {
        return None;
    }
    let mut out = [0u8; N];
    for (i, pair) in text.chunks_exact(2).enumerate() {
        out[i] = digit(pair[0])? << 4 | digit(pair[1])?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SAMPLE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn the_specification_example_reads_and_writes_back() {
        let parsed = TraceParent::parse(SAMPLE).unwrap();
        assert_eq!(hex(&parsed.trace_id), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(hex(&parsed.parent_id), "00f067aa0ba902b7");
        assert_eq!(parsed.flags, 1);
        assert_eq!(parsed.header(), SAMPLE);
    }

    #[test]
    fn values_a_tracer_would_discard_are_refused() {
        for bad in [
            "00-x",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "0g-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            assert_eq!(TraceParent::parse(bad), None, "{bad}");
        }
        // A later version may add fields after a dash; its first four are read.
        let later = "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-comes-next";
        assert_eq!(TraceParent::parse(later).unwrap().header(), SAMPLE);
    }

    #[test]
    fn an_event_with_a_trace_puts_its_messages_under_the_publish_span() {
        let payload = format!(
            r#"{{"id":"e1","data":{{"traceparent":"not this one"}},"traceparent":"{SAMPLE}","tracestate":"vendor=abc"}}"#
        );
        let event = EventTrace::of_stored(&payload).unwrap();
        assert_eq!(event.state.as_deref(), Some("vendor=abc"));
        let event_id = [7u8; 16];
        let trace = MessageTrace::of(Some(event), event_id, [9u8; 16]);
        assert_eq!(trace.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(trace.parent_id, Some(publish_span_id(event_id)));
        assert_eq!(trace.traceparent([0xab; 8]), "00-4bf92f3577b34da6a3ce929d0e0e4736-abababababababab-01");
    }

    #[test]
    fn an_event_without_a_valid_trace_gives_its_message_a_trace_named_by_its_id() {
        for payload in [r#"{"id":"e1"}"#, r#"{"id":"e1","traceparent":"00-x"}"#, r#"{"traceparent":5}"#, "not json"] {
            assert_eq!(EventTrace::of_stored(payload), None, "{payload}");
        }
        let message_id = *b"0123456789abcdef";
        let trace = MessageTrace::of(None, [1; 16], message_id);
        assert_eq!(trace.trace_id, message_id);
        assert_eq!((trace.flags, trace.parent_id, trace.state.clone()), (SAMPLED, None, None));
        assert!(trace.traceparent([1; 8]).ends_with("-0101010101010101-01"));
    }

    #[test]
    fn an_unusable_tracestate_is_dropped_and_the_traceparent_kept() {
        let long = "a".repeat(MAX_TRACESTATE_LEN + 1);
        for state in [long.as_str(), "caf\u{e9}=1", ""] {
            let payload = serde_json::json!({"traceparent": SAMPLE, "tracestate": state}).to_string();
            let event = EventTrace::of_stored(&payload).unwrap();
            assert_eq!(event.state, None, "{state}");
        }
    }

    #[test]
    fn zero_ids_never_leave() {
        assert_eq!(publish_span_id([0; 16]), [0, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(MessageTrace::of(None, [0; 16], [0; 16]).trace_id[15], 1);
        assert_eq!(span_id(0), [0, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(span_id(0x0102), [0, 0, 0, 0, 0, 0, 1, 2]);
    }

    proptest! {
        #[test]
        fn every_written_traceparent_reads_back(trace in any::<[u8; 16]>(), span in any::<[u8; 8]>(), flags in any::<u8>()) {
            let written = TraceParent { trace_id: nonzero(trace), parent_id: nonzero(span), flags };
            prop_assert_eq!(TraceParent::parse(&written.header()), Some(written));
        }
    }
}
