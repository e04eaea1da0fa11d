//! `fallthrough` (CoreDNS etcd): a name of the domain without records is passed on, never
//! denied, while the names that hold records answer as before, without AA.

use super::*;
use crate::snapshot::Found;
use crate::wire::LowerName;

fn through() -> Config {
    Config {
        fallthrough: true,
        ..config()
    }
}

fn found_outside(snap: &Snapshot, name: &str) -> bool {
    let name = Name::from_dotted(name).unwrap();
    matches!(snap.find(&LowerName::from_wire(name.wire()).unwrap()), Found::Outside)
}

#[test]
fn a_missing_name_of_the_domain_is_passed_on_and_a_held_one_still_answers() {
    let records = [("test/skydns/east/web", host("10.0.0.1"))];
    let denying = snapshot(&records);
    assert!(is_nxdomain(&denying, "gone.skydns.test.", RecordType::A));
    assert!(!found_outside(&denying, "gone.skydns.test."));

    let snap = snapshot_with(&through(), &records);
    assert!(found_outside(&snap, "gone.skydns.test."));
    for missing in ["gone.skydns.test.", "west.skydns.test.", "*.gone.skydns.test."] {
        let reply = ask(&snap, missing, RecordType::A);
        assert_eq!(
            reply.response_code(),
            ResponseCode::Refused,
            "{missing}: passed on, and without forwarding refused"
        );
    }
    let reply = ask(&snap, "web.east.skydns.test.", RecordType::A);
    assert_eq!(lines(reply.answers()), ["web.east.skydns.test. 3600 A 10.0.0.1"]);
    assert!(!reply.authoritative(), "a domain passing misses on is not owned");
    assert_eq!(
        answers(&snap, "*.east.skydns.test.", RecordType::A),
        ["*.east.skydns.test. 3600 A 10.0.0.1"],
        "query wildcards still match"
    );
    assert!(is_nodata(&snap, "web.east.skydns.test.", RecordType::MX));
    assert_eq!(answers(&snap, "skydns.test.", RecordType::SOA).len(), 1);
}
