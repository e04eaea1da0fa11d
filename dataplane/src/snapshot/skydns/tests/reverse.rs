//! Reverse names from the `arpa` tree (docs/skydns-semantics.md, "Reverse names").

use super::*;

#[test]
fn a_key_with_one_record_answers_ptr_without_authority() {
    let snap = snapshot(&[("arpa/in-addr/10/0/0/1", host("web1.a.skydns.test."))]);
    let reply = ask(&snap, "1.0.0.10.in-addr.arpa.", RecordType::PTR);
    assert_eq!(
        lines(reply.answers()),
        ["1.0.0.10.in-addr.arpa. 3600 PTR web1.a.skydns.test."]
    );
    assert!(!reply.authoritative());
}

#[test]
fn ip6_names_answer_ptr_too() {
    let key = format!("arpa/ip6/{}", "0/".repeat(31) + "1");
    let snap = snapshot(&[(&key, host("v6.skydns.test"))]);
    let name = format!("1.{}ip6.arpa.", "0.".repeat(31));
    assert_eq!(
        answers(&snap, &name, RecordType::PTR),
        [format!("{name} 3600 PTR v6.skydns.test.")]
    );
}

#[test]
fn a_directory_of_reverse_keys_is_not_answered() {
    let snap = snapshot(&[
        ("arpa/in-addr/10/0/0/1", host("a.skydns.test.")),
        ("arpa/in-addr/10/0/0/1/x", host("b.skydns.test.")),
    ]);
    assert_eq!(
        ask(&snap, "1.0.0.10.in-addr.arpa.", RecordType::PTR).response_code(),
        ResponseCode::Refused
    );
    assert_eq!(
        ask(&snap, "0.0.10.in-addr.arpa.", RecordType::PTR).response_code(),
        ResponseCode::Refused
    );
}

#[test]
fn a_reverse_key_holding_two_records_is_not_answered() {
    let records = vec![
        ("/skydns/arpa/in-addr/10/0/0/2".to_string(), host("a.skydns.test.")),
        ("/skydns/arpa/in-addr/10/0/0/2".to_string(), host("b.skydns.test.")),
    ];
    let snap = build(&config(), &records, 1, UNIX_EPOCH);
    assert_eq!(
        ask(&snap, "2.0.0.10.in-addr.arpa.", RecordType::PTR).response_code(),
        ResponseCode::Refused
    );
}
