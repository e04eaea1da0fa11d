//! SRV and MX answers and their glue (docs/skydns-semantics.md, "SRV" and "MX").

use super::*;

fn srv(host: &str, port: u16, priority: u16, weight: u16) -> Service {
    Service {
        host: host.into(),
        port,
        priority,
        weight,
        ..Service::default()
    }
}

#[test]
fn weights_are_normalised_per_priority() {
    let snap = snapshot(&[
        ("test/skydns/s/a", srv("10.0.0.1", 80, 1, 130)),
        ("test/skydns/s/b", srv("10.0.0.2", 80, 1, 80)),
        ("test/skydns/s/c", srv("10.0.0.3", 80, 1, 150)),
        ("test/skydns/s/d", srv("10.0.0.4", 80, 2, 97)),
    ]);
    assert_eq!(
        answers(&snap, "s.skydns.test.", RecordType::SRV),
        [
            "s.skydns.test. 3600 SRV 1 36 80 a.s.skydns.test.",
            "s.skydns.test. 3600 SRV 1 22 80 b.s.skydns.test.",
            "s.skydns.test. 3600 SRV 1 41 80 c.s.skydns.test.",
            "s.skydns.test. 3600 SRV 2 99 80 d.s.skydns.test.",
        ]
    );
}

#[test]
fn an_address_host_is_named_by_its_key_with_the_address_as_glue() {
    let snap = snapshot(&[
        ("test/skydns/web/a", srv("10.0.0.1", 80, 0, 0)),
        ("test/skydns/web/b", srv("2001:db8::2", 81, 0, 0)),
    ]);
    assert_eq!(
        additionals(&snap, "web.skydns.test.", RecordType::SRV),
        [
            "a.web.skydns.test. 3600 A 10.0.0.1",
            "b.web.skydns.test. 3600 AAAA 2001:db8::2"
        ]
    );
}

#[test]
fn targetstrip_drops_leftmost_labels_of_the_target_and_its_glue() {
    let snap = snapshot(&[
        (
            "test/skydns/x/web/a",
            Service {
                target_strip: 1,
                ..srv("10.0.0.1", 80, 0, 0)
            },
        ),
        (
            "test/skydns/x/named",
            Service {
                target_strip: 2,
                ..srv("a.b.example.org", 80, 0, 0)
            },
        ),
        (
            "test/skydns/x/over",
            Service {
                target_strip: 9,
                ..srv("c.example.org", 80, 0, 0)
            },
        ),
    ]);
    assert_eq!(
        answers(&snap, "x.skydns.test.", RecordType::SRV),
        [
            "x.skydns.test. 3600 SRV 10 33 80 example.org.",
            "x.skydns.test. 3600 SRV 10 33 80 c.example.org.",
            "x.skydns.test. 3600 SRV 10 33 80 web.x.skydns.test.",
        ]
    );
    assert_eq!(
        additionals(&snap, "x.skydns.test.", RecordType::SRV),
        ["web.x.skydns.test. 3600 A 10.0.0.1"]
    );
}

#[test]
fn a_name_target_inside_the_domain_gets_its_addresses_as_glue() {
    let snap = snapshot(&[
        ("test/skydns/svc/a", srv("alias.skydns.test", 80, 0, 0)),
        ("test/skydns/alias", host("hosts.skydns.test")),
        ("test/skydns/hosts/v4", host("10.0.0.1")),
        ("test/skydns/hosts/v6", host("2001:db8::1")),
    ]);
    assert_eq!(
        additionals(&snap, "a.svc.skydns.test.", RecordType::SRV),
        [
            "alias.skydns.test. 3600 A 10.0.0.1",
            "alias.skydns.test. 3600 AAAA 2001:db8::1",
        ],
        "the target's addresses at the target's own name, as its A and AAAA answers give them"
    );
}

#[test]
fn a_name_target_outside_the_domain_gets_no_glue() {
    let snap = snapshot(&[("test/skydns/svc", srv("web.example.org", 443, 0, 0))]);
    assert_eq!(
        answers(&snap, "svc.skydns.test.", RecordType::SRV),
        ["svc.skydns.test. 3600 SRV 10 100 443 web.example.org."]
    );
    assert!(additionals(&snap, "svc.skydns.test.", RecordType::SRV).is_empty());
}

#[test]
fn records_differing_only_in_text_merge_after_weighting() {
    let snap = snapshot(&[
        (
            "test/skydns/s/a",
            Service {
                text: "one".into(),
                ..srv("web.example.org", 80, 0, 0)
            },
        ),
        (
            "test/skydns/s/b",
            Service {
                text: "two".into(),
                ..srv("web.example.org", 80, 0, 0)
            },
        ),
    ]);
    assert_eq!(
        answers(&snap, "s.skydns.test.", RecordType::SRV),
        ["s.skydns.test. 3600 SRV 10 50 80 web.example.org."]
    );
}

#[test]
fn records_without_host_are_no_service_and_weigh_nothing() {
    let snap = snapshot(&[
        ("test/skydns/s/a", srv("10.0.0.1", 80, 0, 0)),
        (
            "test/skydns/s/info",
            Service {
                text: "about".into(),
                ..Service::default()
            },
        ),
    ]);
    assert_eq!(
        answers(&snap, "s.skydns.test.", RecordType::SRV),
        ["s.skydns.test. 3600 SRV 10 100 80 a.s.skydns.test."]
    );
}

#[test]
fn mx_ignores_groups() {
    let mail = |h: &str, g: &str| Service {
        host: h.into(),
        mail: true,
        group: g.into(),
        ..Service::default()
    };
    let snap = snapshot(&[
        ("test/skydns/m/a", mail("mx1.example.org", "g1")),
        ("test/skydns/m/sub/c", mail("mx3.example.org", "g3")),
    ]);
    assert_eq!(answers(&snap, "m.skydns.test.", RecordType::MX).len(), 2);
    assert_eq!(
        answers(&snap, "m.skydns.test.", RecordType::SRV).len(),
        1,
        "SRV keeps only the shallowest group"
    );
}

#[test]
fn mx_preference_is_the_priority_and_address_glue_keeps_the_unstripped_key() {
    let snap = snapshot(&[(
        "test/skydns/m/mx1",
        Service {
            host: "10.0.1.1".into(),
            mail: true,
            priority: 20,
            target_strip: 1,
            ..Service::default()
        },
    )]);
    assert_eq!(
        answers(&snap, "m.skydns.test.", RecordType::MX),
        ["m.skydns.test. 3600 MX 20 m.skydns.test."]
    );
    assert_eq!(
        additionals(&snap, "m.skydns.test.", RecordType::MX),
        ["mx1.m.skydns.test. 3600 A 10.0.1.1"]
    );
}

#[test]
fn mx_glue_for_an_exchange_inside_the_domain_is_resolved() {
    let snap = snapshot(&[
        (
            "test/skydns/mx/m1",
            Service {
                host: "mail.skydns.test.".into(),
                mail: true,
                ..Service::default()
            },
        ),
        ("test/skydns/mail", host("10.0.1.1")),
    ]);
    assert_eq!(
        additionals(&snap, "m1.mx.skydns.test.", RecordType::MX),
        ["mail.skydns.test. 3600 A 10.0.1.1"]
    );
}
