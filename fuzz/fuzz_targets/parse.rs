//! Any bytes through the query parser: it never panics, drops only runts and responses, stays
//! within the message, folds the question name into a valid lower-case name, and agrees with
//! hickory-proto about the question of every query both accept.

#![no_main]

use hickory_proto::op::{Message, MessageType};
use hickory_proto::serialize::binary::BinEncodable;
use libfuzzer_sys::fuzz_target;
use skyline_dataplane::wire::name::read_name;
use skyline_dataplane::wire::types::{HEADER_LEN, MAX_NAME_LEN};
use skyline_dataplane::wire::{parse_query, FormatError, LowerName, WireError};
use skyline_fuzz::check;

/// Offsets at which a name is also read on its own, to cover pointers into every position.
const NAME_OFFSETS: usize = 64;

fuzz_target!(|data: &[u8]| {
    let mut qname = LowerName::default();
    match parse_query(data, &mut qname) {
        Err(reason) => check::dropped(data, reason),
        Ok(q) => {
            assert!(data.len() >= HEADER_LEN);
            if let Some(question) = q.question {
                assert!(question.end <= data.len(), "the question ends inside the message");
                let again = LowerName::from_wire(qname.wire()).expect("the folded name is valid");
                assert_eq!(again.wire(), qname.wire());
                assert_eq!(again.label_count(), qname.label_count());
                assert!(!qname.wire().iter().any(u8::is_ascii_uppercase), "the name is folded");
            }
            agrees_with_hickory(data, &q, &qname);
        }
    }
    let mut name = LowerName::default();
    for pos in 0..data.len().min(NAME_OFFSETS) {
        if let Ok(end) = read_name(data, pos, Some(&mut name)) {
            assert!(
                end > pos && end <= data.len(),
                "a name ends after it starts, inside the message"
            );
            assert!(name.wire().len() <= MAX_NAME_LEN);
        }
    }
});

/// When hickory-proto reads the whole message as a query, skyline read the same question,
/// unless it stopped at a chain of compression pointers longer than its bound (which hickory
/// does not have).
fn agrees_with_hickory(data: &[u8], q: &skyline_dataplane::wire::Query, qname: &LowerName) {
    let Ok(message) = Message::from_vec(data) else {
        return;
    };
    if message.message_type() != MessageType::Query {
        return;
    }
    let Some(theirs) = message.queries().first() else {
        return;
    };
    if q.error == Some(FormatError::Wire(WireError::PointerLoop)) {
        return;
    }
    let question = q.question.expect("hickory read a question, so skyline does too");
    assert_eq!(question.qtype, u16::from(theirs.query_type()));
    assert_eq!(question.qclass, u16::from(theirs.query_class()));
    let wire = theirs
        .name()
        .to_lowercase()
        .to_bytes()
        .expect("hickory encodes its name");
    assert_eq!(qname.wire(), &wire[..], "the same question name");
}
