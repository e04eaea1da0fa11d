//! Views, `.self` and `.wildcards` (docs/skydns-semantics.md, "Views" and "`.self` and
//! `.wildcards`"), asked from client addresses of every kind.

use super::*;
use crate::snapshot::skydns::{Value, ViewKey};
use crate::snapshot::Slot;

/// A view map: each list by `default` or its prefix.
fn views(lists: &[(&str, &[Service])]) -> Value {
    Value::Views(
        lists
            .iter()
            .map(|(key, records)| {
                let key = match *key {
                    "default" => ViewKey::Default,
                    prefix => ViewKey::Prefix(prefix.parse().unwrap()),
                };
                (key, records.to_vec())
            })
            .collect(),
    )
}

fn record(host: &str) -> Value {
    Value::Record(super::host(host))
}

/// The reply to `name` asked by `client`.
fn ask_from(snap: &Snapshot, client: &str, name: &str, rtype: RecordType) -> Message {
    let ctx = Context::new(Transport::Tcp).with_client(client.parse().unwrap());
    ask_with(snap, name, rtype, &ctx)
}

/// The data of the answer records `client` gets for `name`, in order.
fn data_from(snap: &Snapshot, client: &str, name: &str, rtype: RecordType) -> Vec<String> {
    let reply = ask_from(snap, client, name, rtype);
    assert_eq!(
        reply.response_code(),
        ResponseCode::NoError,
        "{name} {rtype} from {client}"
    );
    reply.answers().iter().map(|r| r.data().unwrap().to_string()).collect()
}

fn nested() -> Value {
    views(&[
        ("default", &[host("10.9.9.9")]),
        ("10.0.0.0/8", &[host("10.0.0.1")]),
        ("10.1.0.0/16", &[host("10.1.0.1"), host("10.1.0.2")]),
        ("10.1.2.0/24", &[host("10.1.2.1")]),
        ("2001:db8::/32", &[host("10.6.6.6")]),
    ])
}

#[test]
fn a_client_gets_the_list_of_its_longest_matching_prefix_else_the_default() {
    let snap = snapshot(&[("test/skydns/web", nested())]);
    let a = |client: &str| data_from(&snap, client, "web.skydns.test.", RecordType::A);
    assert_eq!(a("10.1.2.3"), ["10.1.2.1"]);
    assert_eq!(a("10.1.3.3"), ["10.1.0.1", "10.1.0.2"]);
    assert_eq!(a("10.2.0.1"), ["10.0.0.1"]);
    assert_eq!(a("192.0.2.1"), ["10.9.9.9"]);
    assert_eq!(a("2001:db8::1"), ["10.6.6.6"]);
    assert_eq!(a("2001:db9::1"), ["10.9.9.9"]);
    assert_eq!(a("::ffff:10.1.2.3"), ["10.1.2.1"], "a mapped address is IPv4");
    let reply = ask_from(&snap, "10.1.2.3", "web.skydns.test.", RecordType::A);
    assert!(reply.authoritative());
    assert_eq!(reply.answers()[0].ttl(), 3600);
}

#[test]
fn without_a_default_a_client_no_prefix_holds_gets_every_list() {
    let snap = snapshot(&[(
        "test/skydns/web",
        views(&[
            ("10.0.0.0/8", &[host("10.0.0.1"), host("10.0.0.2")]),
            ("192.168.0.0/16", &[host("10.0.0.2"), host("10.0.0.3")]),
        ]),
    )]);
    let a = |client: &str| data_from(&snap, client, "web.skydns.test.", RecordType::A);
    assert_eq!(a("10.1.1.1"), ["10.0.0.1", "10.0.0.2"]);
    assert_eq!(a("192.168.1.1"), ["10.0.0.2", "10.0.0.3"]);
    assert_eq!(
        a("172.16.0.1"),
        ["10.0.0.1", "10.0.0.2", "10.0.0.3"],
        "the union, duplicates once"
    );
}

#[test]
fn a_directory_answers_the_union_of_its_records_selections() {
    let snap = snapshot(&[
        ("test/skydns/dir/plain", record("10.0.0.1")),
        (
            "test/skydns/dir/v1",
            views(&[("default", &[host("10.1.0.0")]), ("10.0.0.0/8", &[host("10.1.0.10")])]),
        ),
        (
            "test/skydns/dir/v2",
            views(&[
                ("default", &[host("10.2.0.0")]),
                ("10.5.0.0/16", &[host("10.2.0.5"), host("10.0.0.1")]),
            ]),
        ),
    ]);
    let a = |client: &str| data_from(&snap, client, "dir.skydns.test.", RecordType::A);
    assert_eq!(a("192.0.2.1"), ["10.0.0.1", "10.1.0.0", "10.2.0.0"]);
    assert_eq!(a("10.1.1.1"), ["10.0.0.1", "10.1.0.10", "10.2.0.0"]);
    assert_eq!(
        a("10.5.1.1"),
        ["10.0.0.1", "10.1.0.10", "10.2.0.5"],
        "10.0.0.1 of v2's list repeats the plain record"
    );
    assert_eq!(
        data_from(&snap, "10.5.1.1", "plain.dir.skydns.test.", RecordType::A),
        ["10.0.0.1"]
    );
}

#[test]
fn srv_txt_and_mx_come_from_the_clients_list() {
    let srv = |port: u16, text: &str| Service {
        host: "10.0.0.1".into(),
        port,
        text: text.into(),
        mail: true,
        ..Service::default()
    };
    let snap = snapshot(&[(
        "test/skydns/svc",
        views(&[
            ("default", &[srv(80, "outside")]),
            ("10.0.0.0/8", &[srv(8080, "inside")]),
        ]),
    )]);
    assert_eq!(
        data_from(&snap, "10.0.0.7", "svc.skydns.test.", RecordType::SRV),
        ["10 100 8080 svc.skydns.test."]
    );
    assert_eq!(
        data_from(&snap, "192.0.2.7", "svc.skydns.test.", RecordType::SRV),
        ["10 100 80 svc.skydns.test."]
    );
    assert_eq!(
        data_from(&snap, "10.0.0.7", "svc.skydns.test.", RecordType::TXT),
        ["inside"]
    );
    assert_eq!(
        data_from(&snap, "192.0.2.7", "svc.skydns.test.", RecordType::TXT),
        ["outside"]
    );
    assert_eq!(
        data_from(&snap, "10.0.0.7", "svc.skydns.test.", RecordType::MX),
        ["10 svc.skydns.test."]
    );
    let glue = ask_from(&snap, "10.0.0.7", "svc.skydns.test.", RecordType::SRV);
    assert_eq!(lines(glue.additionals()), ["svc.skydns.test. 3600 A 10.0.0.1"]);
}

#[test]
fn ptr_comes_from_the_clients_list_when_it_is_one_name() {
    let snap = snapshot(&[(
        "arpa/in-addr/10/0/0/1",
        views(&[
            ("default", &[host("public.skydns.test.")]),
            ("10.0.0.0/8", &[host("inside.skydns.test.")]),
            ("172.16.0.0/12", &[host("a.skydns.test."), host("b.skydns.test.")]),
        ]),
    )]);
    let name = "1.0.0.10.in-addr.arpa.";
    assert_eq!(
        data_from(&snap, "10.1.1.1", name, RecordType::PTR),
        ["inside.skydns.test."]
    );
    assert_eq!(
        data_from(&snap, "192.0.2.1", name, RecordType::PTR),
        ["public.skydns.test."]
    );
    let two = ask_from(&snap, "172.16.0.1", name, RecordType::PTR);
    assert!(two.answers().is_empty() && !two.authoritative());
}

/// The reply `client` gets for `name` PTR when forwarding is on (`allowed`: the client passes
/// the recursion ACL): `None` when the question is to go upstream.
fn forwarded_from(snap: &Snapshot, client: &str, name: &str, allowed: bool) -> Option<Message> {
    use crate::forward::{answer_recursive, Recursion, Resolution, Routes};
    let mut query = Message::new();
    query
        .set_id(7)
        .set_recursion_desired(true)
        .add_query(Query::query(HName::from_ascii(name).unwrap(), RecordType::PTR));
    let mut cache = crate::cache::Cache::new(crate::cache::CacheConfig::default());
    let routes = Routes::new(1, true, Vec::new());
    let mut rec = Recursion {
        cache: &mut cache,
        routes: &routes,
        down: &[false],
        allowed,
        prohibited: false,
        now: std::time::Instant::now(),
        resolved: None,
    };
    let ctx = Context::new(Transport::Udp).with_client(client.parse().unwrap());
    let mut out = vec![0; 65535];
    let mut qname = crate::wire::LowerName::default();
    match answer_recursive(&query.to_vec().unwrap(), snap, &ctx, &mut rec, &mut qname, &mut out) {
        Resolution::Done(Outcome::Reply(reply)) => Some(Message::from_vec(&out[..reply.len()]).unwrap()),
        Resolution::Forward(_) => None,
        _ => panic!("{name} from {client}: neither answered nor forwarded"),
    }
}

/// docs/skydns-semantics.md, "Reverse names": a client whose list (the union of every list,
/// for a client no prefix holds in a map without `default`) holds several records gets no PTR
/// from this server: its question is forwarded when it may use forwarding, else NXDOMAIN. A
/// list of one record still answers, and an empty list is still NODATA.
#[test]
fn a_reverse_name_selecting_several_records_is_passed_on() {
    let snap = snapshot(&[
        (
            "arpa/in-addr/10/0/0/1",
            views(&[
                ("10.0.0.0/8", &[host("inside.skydns.test.")]),
                ("172.16.0.0/12", &[host("a.skydns.test."), host("b.skydns.test.")]),
            ]),
        ),
        (
            "arpa/in-addr/10/0/0/2",
            views(&[("10.0.0.0/8", &[host("a.skydns.test."), host("b.skydns.test.")])]),
        ),
        (
            "arpa/in-addr/10/0/0/3",
            views(&[("default", &[host("public.skydns.test.")]), ("10.0.0.0/8", &[])]),
        ),
    ]);
    let one = "1.0.0.10.in-addr.arpa.";
    assert_eq!(
        data_from(&snap, "10.1.1.1", one, RecordType::PTR),
        ["inside.skydns.test."]
    );
    for (client, name) in [
        ("172.16.0.1", one),
        ("192.0.2.1", one),
        ("10.1.1.1", "2.0.0.10.in-addr.arpa."),
        ("192.0.2.1", "2.0.0.10.in-addr.arpa."),
    ] {
        let reply = ask_from(&snap, client, name, RecordType::PTR);
        assert_eq!(reply.response_code(), ResponseCode::NXDomain, "{name} from {client}");
        assert!(reply.answers().is_empty() && !reply.authoritative(), "{reply:?}");
        assert!(
            forwarded_from(&snap, client, name, true).is_none(),
            "{name} from {client} is forwarded"
        );
        let refused = forwarded_from(&snap, client, name, false).unwrap();
        assert_eq!(
            refused.response_code(),
            ResponseCode::NXDomain,
            "{name} from {client} outside the recursion ACL"
        );
    }
    let forwarded = forwarded_from(&snap, "10.1.1.1", one, true).expect("answered here");
    let ptrs: Vec<String> = forwarded
        .answers()
        .iter()
        .map(|r| r.data().unwrap().to_string())
        .collect();
    assert_eq!(ptrs, ["inside.skydns.test."]);
    let three = "3.0.0.10.in-addr.arpa.";
    assert_eq!(
        data_from(&snap, "192.0.2.1", three, RecordType::PTR),
        ["public.skydns.test."]
    );
    let empty = ask_from(&snap, "10.1.1.1", three, RecordType::PTR);
    assert_eq!(empty.response_code(), ResponseCode::NoError, "an empty list: NODATA");
    assert!(empty.answers().is_empty());
    assert!(
        forwarded_from(&snap, "10.1.1.1", three, true).is_some(),
        "not forwarded"
    );
}

#[test]
fn a_name_pointing_into_a_view_map_answers_by_the_client() {
    let snap = snapshot(&[
        ("test/skydns/www", record("web.skydns.test.")),
        ("test/skydns/web", nested()),
    ]);
    let rendered = |client: &str| lines(ask_from(&snap, client, "www.skydns.test.", RecordType::A).answers());
    assert_eq!(rendered("10.1.2.3"), ["www.skydns.test. 3600 A 10.1.2.1"]);
    assert_eq!(rendered("203.0.113.1"), ["www.skydns.test. 3600 A 10.9.9.9"]);
}

#[test]
fn a_cname_into_a_view_map_answers_by_the_client_of_the_alias() {
    let config = Config {
        cname_chains: true,
        ..config()
    };
    let snap = snapshot_with(
        &config,
        &[
            ("test/skydns/www", record("web.skydns.test.")),
            ("test/skydns/web", nested()),
        ],
    );
    let rendered = |client: &str| lines(ask_from(&snap, client, "www.skydns.test.", RecordType::A).answers());
    assert_eq!(
        rendered("10.1.2.3"),
        [
            "www.skydns.test. 3600 CNAME web.skydns.test.",
            "web.skydns.test. 3600 A 10.1.2.1"
        ]
    );
    assert_eq!(
        rendered("203.0.113.1"),
        [
            "www.skydns.test. 3600 CNAME web.skydns.test.",
            "web.skydns.test. 3600 A 10.9.9.9"
        ]
    );
}

#[test]
fn names_without_views_and_types_all_clients_share_answer_as_before() {
    let snap = snapshot(&[
        ("test/skydns/plain", record("10.0.0.1")),
        (
            "test/skydns/same",
            views(&[("default", &[host("10.0.0.2")]), ("10.0.0.0/8", &[host("10.0.0.2")])]),
        ),
        (
            "test/skydns/split",
            views(&[
                (
                    "default",
                    &[Service {
                        host: "10.0.0.3".into(),
                        text: "t".into(),
                        ..Service::default()
                    }],
                ),
                (
                    "10.0.0.0/8",
                    &[Service {
                        host: "10.0.0.4".into(),
                        text: "t".into(),
                        ..Service::default()
                    }],
                ),
            ]),
        ),
    ]);
    let node = |name: &str| snap.node(Name::from_dotted(name).unwrap().wire()).unwrap();
    assert!(
        node("same.skydns.test.").views().is_none(),
        "lists that agree need no views"
    );
    let split = node("split.skydns.test.");
    assert!(split.answer(Slot::Txt).is_some(), "one TXT for every client");
    assert!(split.answer(Slot::A).is_none());
    let views = split.views().unwrap();
    assert_eq!(views.apart().collect::<Vec<_>>(), [Slot::A, Slot::Srv]);
    let prefixes: Vec<String> = views.prefixes().map(|p| p.to_string()).collect();
    assert_eq!(prefixes, ["10.0.0.0/8"]);
    let apex = node("skydns.test.");
    assert!(apex.answer(Slot::Soa).is_some() && apex.views().is_some());
    assert!(snap
        .leaves
        .get(&crate::wire::LowerName::from_wire(Name::from_dotted("plain.skydns.test.").unwrap().wire()).unwrap())
        .is_some());
}

#[test]
fn wildcard_queries_take_the_clients_lists() {
    let snap = snapshot(&[
        ("test/skydns/dir/a", nested()),
        ("test/skydns/dir/b", record("10.0.0.8")),
    ]);
    let a = |client: &str| data_from(&snap, client, "*.dir.skydns.test.", RecordType::A);
    assert_eq!(a("10.1.2.3"), ["10.1.2.1", "10.0.0.8"]);
    assert_eq!(a("198.51.100.1"), ["10.9.9.9", "10.0.0.8"]);
}

#[test]
fn a_directory_with_a_self_key_answers_that_record_only() {
    let snap = snapshot(&[
        ("test/skydns/dir", record("10.0.0.5")),
        ("test/skydns/dir/.self", record("10.0.0.9")),
        ("test/skydns/dir/a", record("10.0.0.1")),
        ("test/skydns/dir/b/c", record("10.0.0.2")),
    ]);
    assert_eq!(
        answers(&snap, "dir.skydns.test.", RecordType::A),
        ["dir.skydns.test. 3600 A 10.0.0.9"]
    );
    assert_eq!(
        answers(&snap, "a.dir.skydns.test.", RecordType::A),
        ["a.dir.skydns.test. 3600 A 10.0.0.1"]
    );
    assert_eq!(
        answers(&snap, "b.dir.skydns.test.", RecordType::A),
        ["b.dir.skydns.test. 3600 A 10.0.0.2"]
    );
    assert_eq!(
        answers(&snap, "dir.skydns.test.", RecordType::SRV),
        ["dir.skydns.test. 3600 SRV 10 100 0 dir.skydns.test."],
        "the record is named by its directory"
    );
    assert_eq!(
        answers(&snap, "skydns.test.", RecordType::A).len(),
        4,
        "the names above see every record below them"
    );
    assert_eq!(
        answers(&snap, "*.skydns.test.", RecordType::A).len(),
        4,
        "a wildcard below the apex matches the directory's keys"
    );
    assert_eq!(
        answers(&snap, "*.dir.skydns.test.", RecordType::A),
        ["*.dir.skydns.test. 3600 A 10.0.0.9"],
        "a wildcard below it answers as the directory does, as below a single key"
    );
}

#[test]
fn a_self_key_makes_its_directory_answer_as_a_key() {
    let snap = snapshot(&[
        ("test/skydns/alias/.self", record("target.skydns.test.")),
        ("test/skydns/alias/x", record("10.0.0.1")),
        ("test/skydns/target", record("10.0.0.7")),
        ("test/skydns/only/.SELF", record("10.0.0.8")),
    ]);
    assert_eq!(
        answers(&snap, "alias.skydns.test.", RecordType::A),
        ["alias.skydns.test. 3600 A 10.0.0.7"],
        "a directory with a .self key answers as a key"
    );
    assert_eq!(
        answers(&snap, "only.skydns.test.", RecordType::A),
        ["only.skydns.test. 3600 A 10.0.0.8"]
    );
    assert!(is_nxdomain(&snap, "x.only.skydns.test.", RecordType::A));
}

#[test]
fn a_self_key_may_hold_a_view_map() {
    let snap = snapshot(&[
        ("test/skydns/dir/.self", nested()),
        ("test/skydns/dir/a", record("10.0.0.1")),
    ]);
    assert_eq!(
        data_from(&snap, "10.1.2.3", "dir.skydns.test.", RecordType::A),
        ["10.1.2.1"]
    );
    assert_eq!(
        data_from(&snap, "192.0.2.1", "dir.skydns.test.", RecordType::A),
        ["10.9.9.9"]
    );
    assert_eq!(
        data_from(&snap, "10.1.2.3", "a.dir.skydns.test.", RecordType::A),
        ["10.0.0.1"]
    );
}

fn marked() -> Vec<(&'static str, Value)> {
    vec![
        ("test/skydns/marked/.wildcards", Value::Marker),
        ("test/skydns/marked/a", record("10.0.0.1")),
        ("test/skydns/marked/b", record("10.0.0.2")),
        ("test/skydns/plain/a", record("10.0.1.1")),
        ("test/skydns/plain/b", record("10.0.1.2")),
        ("test/skydns/own", record("10.0.2.1")),
        ("test/skydns/own/x", record("10.0.2.2")),
        ("test/skydns/selfish/.self", record("10.0.3.1")),
        ("test/skydns/selfish/y", record("10.0.3.2")),
        ("test/skydns/lonely/.wildcards", record("10.0.4.1")),
    ]
}

#[test]
fn with_the_marker_flag_a_directory_answers_only_when_it_holds_a_wildcards_key() {
    let config = Config {
        wildcards_marker: true,
        ..config()
    };
    let snap = snapshot_with(&config, &marked());
    assert_eq!(answers(&snap, "marked.skydns.test.", RecordType::A).len(), 2);
    assert_eq!(answers(&snap, "*.marked.skydns.test.", RecordType::A).len(), 2);
    assert!(is_nxdomain(&snap, "plain.skydns.test.", RecordType::A));
    assert!(is_nxdomain(&snap, "*.plain.skydns.test.", RecordType::A));
    assert!(is_nxdomain(&snap, "any.plain.skydns.test.", RecordType::TXT));
    assert_eq!(
        answers(&snap, "a.plain.skydns.test.", RecordType::A),
        ["a.plain.skydns.test. 3600 A 10.0.1.1"]
    );
    assert_eq!(
        answers(&snap, "own.skydns.test.", RecordType::A),
        ["own.skydns.test. 3600 A 10.0.2.1"],
        "an unmarked name answers with its own records"
    );
    for name in ["selfish.skydns.test.", "*.selfish.skydns.test."] {
        assert!(
            is_nxdomain(&snap, name, RecordType::A),
            "{name}: the marker is looked at before the .self key"
        );
    }
    assert_eq!(
        answers(&snap, "y.selfish.skydns.test.", RecordType::A),
        ["y.selfish.skydns.test. 3600 A 10.0.3.2"]
    );
    assert!(
        is_nodata(&snap, "skydns.test.", RecordType::A),
        "the apex exists, unmarked"
    );
    assert!(
        is_nxdomain(&snap, "*.skydns.test.", RecordType::A),
        "nothing below the unmarked apex matches"
    );
    assert_eq!(
        answers(&snap, "*.own.skydns.test.", RecordType::A),
        ["*.own.skydns.test. 3600 A 10.0.2.1"]
    );
    assert!(
        is_nxdomain(&snap, "lonely.skydns.test.", RecordType::A),
        "a marker is no record"
    );
    let cname = snapshot_with(
        &config,
        &[
            ("test/skydns/alias", record("plain.skydns.test.")),
            ("test/skydns/plain/a", record("10.0.1.1")),
        ],
    );
    assert!(
        is_nodata(&cname, "alias.skydns.test.", RecordType::A),
        "a chain to an unmarked directory vanishes"
    );
}

/// Under the flag, a `.self` key answers only in a marked directory; an unmarked one answers
/// with the record at its own key, the `.self` key unread.
#[test]
fn with_the_marker_flag_a_self_key_answers_only_below_a_marker() {
    let config = Config {
        wildcards_marker: true,
        ..config()
    };
    let snap = snapshot_with(
        &config,
        &[
            ("test/skydns/marked/.wildcards", Value::Marker),
            ("test/skydns/marked/.self", record("10.0.5.9")),
            ("test/skydns/marked/a", record("10.0.5.1")),
            ("test/skydns/keyed", record("10.0.6.5")),
            ("test/skydns/keyed/.self", record("10.0.6.9")),
            ("test/skydns/keyed/a", record("10.0.6.1")),
            ("test/skydns/alone/.self", record("10.0.7.9")),
        ],
    );
    for name in ["marked.skydns.test.", "*.marked.skydns.test."] {
        assert_eq!(
            data_from(&snap, "192.0.2.1", name, RecordType::A),
            ["10.0.5.9"],
            "{name}"
        );
    }
    for name in ["keyed.skydns.test.", "*.keyed.skydns.test."] {
        assert_eq!(
            data_from(&snap, "192.0.2.1", name, RecordType::A),
            ["10.0.6.5"],
            "{name}: its own key's record, not its .self"
        );
    }
    assert!(is_nxdomain(&snap, "alone.skydns.test.", RecordType::A));
    assert!(is_nxdomain(&snap, "alone.skydns.test.", RecordType::CNAME));
    let without = snapshot(&[
        ("test/skydns/alone/.self", record("10.0.7.9")),
        ("test/skydns/alone/a", record("10.0.7.1")),
    ]);
    assert_eq!(
        data_from(&without, "192.0.2.1", "alone.skydns.test.", RecordType::A),
        ["10.0.7.9"],
        "without the flag the .self key answers"
    );
}

#[test]
fn without_the_flag_directories_answer_and_markers_are_still_no_records() {
    let snap = snapshot(&marked());
    assert_eq!(answers(&snap, "plain.skydns.test.", RecordType::A).len(), 2);
    assert_eq!(answers(&snap, "*.plain.skydns.test.", RecordType::A).len(), 2);
    assert_eq!(answers(&snap, "own.skydns.test.", RecordType::A).len(), 2);
    assert_eq!(answers(&snap, "marked.skydns.test.", RecordType::A).len(), 2);
    assert!(is_nxdomain(&snap, "lonely.skydns.test.", RecordType::A));
    assert_eq!(answers(&snap, "skydns.test.", RecordType::A).len(), 8);
}
