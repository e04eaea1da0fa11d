//! The signer against published test vectors and against ring's verifiers.

use super::denial::Signing;
use super::key::{algorithm, KeyError, SigningKey};
use super::rrsig::{self, Validity};
use super::{base64, nsec3, records, Dnssec};
use crate::answer::{answer, Context, Outcome, Transport};
use crate::signer::{build, sign};
use crate::snapshot::skydns::{Config, Service};
use crate::wire::Name;
use hickory_proto::op::ResponseCode;
use ring::signature::{self, RsaPublicKeyComponents, UnparsedPublicKey};
use std::cell::RefCell;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// RFC 8080 §6.1, example 1 (with erratum 4935).
const ED25519_KEY: &str = "example.com. 3600 IN DNSKEY 257 3 15 (\n l02Woi0iS8Aa25FQkUd9RMzZHJpBoRQwAQEX1SxZJA4= )";
const ED25519_PRIVATE: &str =
    "Private-key-format: v1.2\nAlgorithm: 15 (ED25519)\nPrivateKey: ODIyNjAzODQ2MjgwODAxMjI2NDUxOTAyMDQxNDIyNjI=\n";

/// RFC 6605 §6.1.
const ECDSA_KEY: &str = "example.net. 3600 IN DNSKEY 257 3 13 (\n GojIhhXUN/u4v54ZQqGSnyhWJwaubCvTmeexv7bR6edb\n krSqQpF64cYbcB7wNcP+e+MAnLr+Wi9xMWyQLc8NAA== )";
const ECDSA_PRIVATE: &str =
    "Private-key-format: v1.2\nAlgorithm: 13 (ECDSAP256SHA256)\nPrivateKey: GU6SnQ/Ou+xC5RumuIUIuJZteXT2z0O/ok1s38Et6mQ=\n";

/// A key `dnssec-keygen -a RSASHA256 -b 2048 skydns.test` wrote (tag 39030).
const RSA_KEY: &str = include_str!("testdata/rsa.key");
const RSA_PRIVATE: &str = include_str!("testdata/rsa.private");

fn key(public: &str, private: &str, domain: &str) -> Result<SigningKey, KeyError> {
    let domain = Name::from_dotted(domain).unwrap();
    SigningKey::from_bind(public, Path::new("K.key"), private, Path::new("K.private"), &domain)
}

/// Verifies the RRSIG RDATA `rrsig` over the RRset of `owner` with `rdatas` by `key`'s public
/// half, with ring's verifiers.
fn verify(key: &SigningKey, owner: &[u8], rtype: u16, ttl: u32, rdatas: &[Vec<u8>], rrsig: &[u8]) -> bool {
    let signer_len = key.owner().wire().len();
    let fixed = 18 + signer_len;
    let mut data = rrsig[..fixed].to_vec();
    let mut sorted = rdatas.to_vec();
    sorted.sort();
    for rdata in &sorted {
        data.extend_from_slice(owner);
        data.extend_from_slice(&rtype.to_be_bytes());
        data.extend_from_slice(&[0, 1]);
        data.extend_from_slice(&ttl.to_be_bytes());
        data.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
        data.extend_from_slice(rdata);
    }
    let signature_bytes = &rrsig[fixed..];
    let public = &key.dnskey_rdata()[4..];
    match key.algorithm() {
        algorithm::ED25519 => UnparsedPublicKey::new(&signature::ED25519, public)
            .verify(&data, signature_bytes)
            .is_ok(),
        algorithm::ECDSAP256SHA256 => {
            let mut point = vec![4];
            point.extend_from_slice(public);
            UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, &point)
                .verify(&data, signature_bytes)
                .is_ok()
        }
        _ => {
            let (e, n) = match public[0] {
                0 => {
                    let len = usize::from(u16::from_be_bytes([public[1], public[2]]));
                    (&public[3..3 + len], &public[3 + len..])
                }
                len => (&public[1..1 + usize::from(len)], &public[1 + usize::from(len)..]),
            };
            RsaPublicKeyComponents { n, e }
                .verify(&signature::RSA_PKCS1_2048_8192_SHA256, &data, signature_bytes)
                .is_ok()
        }
    }
}

fn mx_rdata() -> Vec<u8> {
    let mut rdata = vec![0, 10];
    rdata.extend_from_slice(Name::from_dotted("mail.example.com.").unwrap().wire());
    rdata
}

#[test]
fn ed25519_signs_the_rfc_8080_example_exactly() {
    let key = key(ED25519_KEY, ED25519_PRIVATE, "example.com.").unwrap();
    assert_eq!((key.tag(), key.algorithm()), (3613, 15));
    let owner = Name::from_dotted("example.com.").unwrap();
    let validity = Validity {
        inception: 1438207200,
        expiration: 1440021600,
    };
    let rrsig = rrsig::sign(&key, owner.wire(), 15, 3600, &mut vec![mx_rdata()], validity).unwrap();
    let expected =
        base64::decode("oL9krJun7xfBOIWcGHi7mag5/hdZrKWw15jPGrHpjQeRAvTdszaPD+QLs3fx8A4M3e23mRZ9VrbpMngwcrqNAg==")
            .unwrap();
    assert_eq!(&rrsig[rrsig.len() - 64..], &expected[..]);
    assert_eq!(&rrsig[..4], &[0, 15, 15, 2]);
}

#[test]
fn ecdsa_and_rsa_keys_load_and_sign_what_their_dnskey_verifies() {
    let ecdsa = key(ECDSA_KEY, ECDSA_PRIVATE, "example.net.").unwrap();
    assert_eq!(ecdsa.tag(), 55648);
    let rsa = key(RSA_KEY, RSA_PRIVATE, "skydns.test.").unwrap();
    assert_eq!((rsa.tag(), rsa.algorithm()), (39030, 8));
    let validity = Validity::from(SystemTime::now());
    for key in [&ecdsa, &rsa] {
        let owner = key.owner().wire().to_vec();
        let mut rdatas = vec![vec![192, 0, 2, 2], vec![192, 0, 2, 1]];
        let rrsig = rrsig::sign(key, &owner, 1, 60, &mut rdatas, validity).unwrap();
        assert!(verify(key, &owner, 1, 60, &rdatas, &rrsig), "{key:?}");
        assert!(!verify(key, &owner, 1, 61, &rdatas, &rrsig), "{key:?}");
    }
    assert!(!format!("{rsa:?}").contains("Modulus"));
}

#[test]
fn what_is_wrong_with_a_key_is_named() {
    assert!(matches!(
        key(ED25519_KEY, ED25519_PRIVATE, "skydns.test."),
        Err(KeyError::WrongOwner { .. })
    ));
    assert!(matches!(
        key(ED25519_KEY, ECDSA_PRIVATE, "example.com."),
        Err(KeyError::AlgorithmMismatch {
            private: 13,
            public: 15,
            ..
        })
    ));
    let other = ECDSA_KEY.replace("example.net.", "example.com.");
    let wrong = ECDSA_PRIVATE.replace("GU6SnQ", "GU6SnR");
    assert!(matches!(
        key(&other, &wrong, "example.com."),
        Err(KeyError::Mismatch { .. })
    ));
    let rsa5 = ED25519_KEY.replace(" 15 (", " 5 (");
    assert!(matches!(
        key(&rsa5, &ED25519_PRIVATE.replace("15 (", "5 ("), "example.com."),
        Err(KeyError::Algorithm(5))
    ));
    assert!(matches!(
        key("; nothing", ED25519_PRIVATE, "example.com."),
        Err(KeyError::NoDnskey(_))
    ));
    let missing = RSA_PRIVATE.replace("Prime1", "Prime9");
    assert!(matches!(
        key(RSA_KEY, &missing, "skydns.test."),
        Err(KeyError::Field { field: "Prime1", .. })
    ));
    assert!(matches!(
        key(&ED25519_KEY.replace("257", "1"), ED25519_PRIVATE, "example.com."),
        Err(KeyError::NotZoneKey { .. })
    ));
}

/// A signed snapshot of `skydns.test.` (Ed25519 key of RFC 8080 moved to that owner) with a
/// few names.
fn signed() -> (crate::snapshot::Snapshot, Arc<SigningKey>) {
    let public = ED25519_KEY.replace("example.com.", "skydns.test.");
    let key = Arc::new(key(&public, ED25519_PRIVATE, "skydns.test.").unwrap());
    let config = Config {
        domain: Name::from_dotted("skydns.test.").unwrap(),
        dnssec: Some(Dnssec {
            key: Arc::clone(&key),
            cache: 4,
        }),
        ..Config::default()
    };
    let records: Vec<(String, Service)> = [
        ("/skydns/test/skydns/web", "10.0.0.1", 0),
        ("/skydns/test/skydns/east/db", "10.0.0.2", 5432),
        ("/skydns/test/skydns/east/cache", "fd00::1", 0),
        ("/skydns/test/skydns/alias", "web.skydns.test.", 0),
    ]
    .into_iter()
    .map(|(k, host, port)| {
        let service = Service {
            host: host.into(),
            port,
            ..Service::default()
        };
        (k.to_string(), service)
    })
    .collect();
    (build(&config, &records, 1, SystemTime::now()), key)
}

fn ask(snapshot: &crate::snapshot::Snapshot, name: &str, qtype: u16, dnssec_ok: bool) -> Vec<u8> {
    ask_at(
        &RefCell::new(Signing::new()),
        SystemTime::now(),
        snapshot,
        name,
        qtype,
        dnssec_ok,
    )
}

/// [`ask`] at `now` over UDP, signing per query name with and into `signing`, as a worker's
/// answers do.
fn ask_at(
    signing: &RefCell<Signing>,
    now: SystemTime,
    snapshot: &crate::snapshot::Snapshot,
    name: &str,
    qtype: u16,
    dnssec_ok: bool,
) -> Vec<u8> {
    let mut query = vec![0x12, 0x34, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1];
    query.extend_from_slice(Name::from_dotted(name).unwrap().wire());
    query.extend_from_slice(&qtype.to_be_bytes());
    query.extend_from_slice(&[0, 1]);
    query.extend_from_slice(&[0, 0, 41, 0x04, 0xD0, 0, 0, if dnssec_ok { 0x80 } else { 0 }, 0, 0, 0]);
    let mut out = vec![0; 65535];
    let ctx = Context::new(Transport::Udp).at(now).with_signing(signing);
    let Outcome::Reply(reply) = answer(&query, snapshot, &ctx, &mut out) else {
        panic!("dropped");
    };
    out.truncate(reply.len());
    out
}

/// Checks every RRSIG of `reply` against the set it follows; returns the (section, type) of
/// every set, RRSIGs included.
fn check(reply: &[u8], key: &SigningKey) -> Vec<(u8, u16)> {
    let sets = records::sets(reply).unwrap();
    for (i, set) in sets.iter().enumerate() {
        if set.rtype == rrsig::RRSIG {
            let covered = &sets[i - 1];
            assert_eq!(covered.owner, set.owner);
            assert_eq!(u16::from_be_bytes([set.rdatas[0][0], set.rdatas[0][1]]), covered.rtype);
            assert!(
                verify(
                    key,
                    &covered.owner,
                    covered.rtype,
                    covered.ttl,
                    &covered.rdatas,
                    &set.rdatas[0]
                ),
                "signature over {covered:?}"
            );
        } else if sets.get(i + 1).is_none_or(|next| next.rtype != rrsig::RRSIG) {
            panic!("unsigned set {set:?}");
        }
    }
    sets.iter().map(|s| (s.section, s.rtype)).collect()
}

#[test]
fn signed_answers_carry_valid_signatures_and_unsigned_ones_do_not_change() {
    let (snapshot, key) = signed();
    let mut unsigned = snapshot;
    let signed_zone = unsigned.dnssec.take();
    let plain = ask(&unsigned, "web.skydns.test.", 1, false);
    unsigned.dnssec = signed_zone;
    assert_eq!(
        ask(&unsigned, "web.skydns.test.", 1, false),
        plain,
        "DO=0 answers as before"
    );
    let snapshot = unsigned;
    assert_eq!(
        check(&ask(&snapshot, "web.skydns.test.", 1, true), &key),
        [(0, 1), (0, 46)]
    );
    assert_eq!(
        check(&ask(&snapshot, "alias.skydns.test.", 1, true), &key),
        [(0, 1), (0, 46)],
        "a name pointing to a name answers its target's addresses at its own name, signed"
    );
    assert_eq!(
        check(&ask(&snapshot, "skydns.test.", 48, true), &key),
        [(0, 48), (0, 46)]
    );
    assert_eq!(
        check(&ask(&snapshot, "db.east.skydns.test.", 33, true), &key),
        [(0, 33), (0, 46), (2, 1), (2, 46)]
    );
    let nodata = ask(&snapshot, "web.skydns.test.", 28, true);
    assert_eq!(nodata[3] & 0x0F, 0);
    assert_eq!(check(&nodata, &key), [(1, 6), (1, 46), (1, nsec3::NSEC3), (1, 46)]);
    let sets = records::sets(&nodata).unwrap();
    let hash = nsec3::hash(Name::from_dotted("web.skydns.test.").unwrap().wire(), &[], 0);
    assert_eq!(&sets[2].owner[1..33], &nsec3::base32hex(&hash));
    assert_eq!(&sets[2].rdatas[0][26..], &nsec3::type_bitmap(&[1, 33, 46])[..]);
    for name in ["nope.skydns.test.", "a.b.nope.east.skydns.test."] {
        let nx = ask(&snapshot, name, 1, true);
        assert_eq!(nx[3] & 0x0F, 3, "{name}");
        assert_eq!(
            check(&nx, &key),
            [(1, 6), (1, 46), (1, 50), (1, 46), (1, 50), (1, 46), (1, 50), (1, 46)]
        );
    }
}

#[test]
fn query_wildcards_are_signed_per_query() {
    let (snapshot, key) = signed();
    let all = ask(&snapshot, "*.east.skydns.test.", 1, true);
    assert_eq!(check(&all, &key), [(0, 1), (0, 46)]);
    let sets = records::sets(&all).unwrap();
    assert_eq!(sets[0].owner, Name::from_dotted("*.east.skydns.test.").unwrap().wire());
    assert_eq!(
        check(&ask(&snapshot, "any.east.skydns.test.", 28, true), &key),
        [(0, 28), (0, 46)]
    );
    let signing = RefCell::new(Signing::new());
    let now = SystemTime::now();
    let first = ask_at(&signing, now, &snapshot, "*.east.skydns.test.", 1, true);
    assert!(signing.borrow().signed());
    signing.borrow_mut().charge(Duration::from_secs(1));
    assert_eq!(
        ask_at(&signing, now, &snapshot, "*.east.skydns.test.", 1, true),
        first,
        "the cache answers again, whatever the budget"
    );
    assert!(!signing.borrow().signed(), "nothing was signed for it");
    let nodata = ask(&snapshot, "*.east.skydns.test.", 16, true);
    assert_eq!(nodata[3] & 0x0F, 0);
    assert_eq!(check(&nodata, &key), [(1, 6), (1, 46), (1, nsec3::NSEC3), (1, 46)]);
    let sets = records::sets(&nodata).unwrap();
    assert_eq!(&sets[2].rdatas[0][26..], &nsec3::type_bitmap(&[1, 28, 33, 46])[..]);
    let nx = ask(&snapshot, "*.nope.skydns.test.", 1, true);
    assert_eq!(nx[3] & 0x0F, 3);
    assert_eq!(
        check(&nx, &key),
        [(1, 6), (1, 46), (1, 50), (1, 46), (1, 50), (1, 46), (1, 50), (1, 46)]
    );
}

#[test]
fn an_update_signs_only_what_it_touches_and_keeps_the_rest() {
    let (snapshot, _) = signed();
    let zone = snapshot.dnssec.as_deref().unwrap();
    let later = SystemTime::now() + Duration::from_secs(3600);
    let web = Name::from_dotted("web.skydns.test.").unwrap();
    let again = sign(
        &snapshot,
        zone.dnssec(),
        Some((zone, std::slice::from_ref(&web))),
        later,
    )
    .unwrap();
    let db = crate::wire::LowerName::from_wire(Name::from_dotted("db.east.skydns.test.").unwrap().wire()).unwrap();
    assert!(std::ptr::eq(again.name(&db).unwrap(), zone.name(&db).unwrap()));
    let web = crate::wire::LowerName::from_wire(web.wire()).unwrap();
    assert_ne!(again.name(&web).unwrap(), zone.name(&web).unwrap());
    let expired = UNIX_EPOCH + Duration::from_secs(u64::from(Validity::from(SystemTime::now()).expiration));
    let renewed = sign(&snapshot, zone.dnssec(), Some((zone, &[])), expired).unwrap();
    assert!(!std::ptr::eq(renewed.name(&db).unwrap(), zone.name(&db).unwrap()));
}

/// The RDATA of each record of `records` with its type, as hickory-proto reads them (it keeps
/// DNSSEC types as opaque data without its `dnssec` feature).
fn raw_rdatas(records: &[hickory_proto::rr::Record]) -> Vec<(hickory_proto::rr::RecordType, Vec<u8>)> {
    use hickory_proto::rr::RData;
    records
        .iter()
        .map(|r| match r.data() {
            Some(RData::Unknown { rdata, .. }) => (r.record_type(), rdata.anything().to_vec()),
            other => (r.record_type(), format!("{other:?}").into_bytes()),
        })
        .collect()
}

/// The apex answers DNSKEY and NSEC3PARAM to a query without DO with the bare RRset, and to one
/// with DO signed; its NSEC3 bitmap lists both; the NSEC3PARAM's parameters are those of every
/// NSEC3 record (RFC 5155 §4). Replies are read with hickory-proto, a parser independent of
/// skyline's.
#[test]
fn the_apex_answers_dnskey_and_nsec3param_with_and_without_do() {
    use hickory_proto::op::Message;
    use hickory_proto::rr::RecordType;
    let (snapshot, key) = signed();
    let parse = |reply: &[u8]| Message::from_vec(reply).unwrap();

    let plain = parse(&ask(&snapshot, "skydns.test.", 48, false));
    assert!(plain.authoritative());
    assert_eq!(
        raw_rdatas(plain.answers()),
        [(RecordType::DNSKEY, key.dnskey_rdata())],
        "the key alone, no RRSIG: {plain}"
    );
    assert_eq!(plain.answers()[0].name().to_ascii(), "skydns.test.");

    let param = parse(&ask(&snapshot, "skydns.test.", nsec3::NSEC3PARAM, false));
    let param = raw_rdatas(param.answers());
    assert_eq!(param.len(), 1, "{param:?}");
    let (rtype, param) = &param[0];
    assert_eq!(*rtype, RecordType::NSEC3PARAM);
    assert_eq!(
        param[..],
        [1, 0, 0, 0, 0],
        "SHA-1, flags 0 (RFC 5155 §4.1.2), no iterations, no salt"
    );

    assert_eq!(
        check(&ask(&snapshot, "skydns.test.", nsec3::NSEC3PARAM, true), &key),
        [(0, nsec3::NSEC3PARAM), (0, 46)]
    );
    assert_eq!(
        check(&ask(&snapshot, "skydns.test.", 48, true), &key),
        [(0, 48), (0, 46)]
    );
    for name in ["web.skydns.test.", "nope.skydns.test."] {
        for qtype in [48, nsec3::NSEC3PARAM] {
            let reply = parse(&ask(&snapshot, name, qtype, false));
            assert!(reply.answers().is_empty(), "{name} {qtype}: only the apex has one");
        }
    }

    for (name, answers) in [("skydns.test.", true), ("nope.skydns.test.", false)] {
        let denial = parse(&ask(&snapshot, name, 16, true));
        let nsec3s: Vec<Vec<u8>> = raw_rdatas(denial.name_servers())
            .into_iter()
            .filter(|(rtype, _)| *rtype == RecordType::NSEC3)
            .map(|(_, rdata)| rdata)
            .collect();
        assert!(!nsec3s.is_empty(), "{denial}");
        for nsec3 in &nsec3s {
            let flags = nsec3[1];
            assert_eq!(
                (nsec3[0], flags & !1, &nsec3[2..5]),
                (param[0], param[1], &param[2..5]),
                "{name}: the NSEC3PARAM's algorithm, flags, iterations and salt"
            );
        }
        if answers {
            let bitmap = &nsec3s[0][26..];
            assert_eq!(
                bitmap,
                &nsec3::type_bitmap(&[1, 6, 28, 33, 46, 48, 51])[..],
                "A SOA AAAA SRV RRSIG DNSKEY NSEC3PARAM"
            );
        }
    }
}

#[test]
fn a_worker_out_of_signing_time_sends_new_denials_to_tcp_until_it_has_earned_more() {
    let (snapshot, key) = signed();
    let signing = RefCell::new(Signing::new());
    let now = SystemTime::now();
    let header = |reply: &[u8]| {
        let message = hickory_proto::op::Message::from_vec(reply).unwrap();
        (
            message.response_code(),
            message.truncated(),
            message.name_servers().len(),
        )
    };
    let nx = ask_at(&signing, now, &snapshot, "nope.skydns.test.", 1, true);
    assert_eq!(header(&nx), (ResponseCode::NXDomain, false, 8));
    check(&nx, &key);
    assert!(signing.borrow().signed(), "the denial was signed for this name");
    // The caller measured the signing at a second: the 100 ms budget is spent.
    signing.borrow_mut().charge(Duration::from_secs(1));
    assert_eq!(
        ask_at(&signing, now, &snapshot, "nope.skydns.test.", 1, true),
        nx,
        "a denial already signed is served whatever the budget"
    );
    assert_eq!(
        header(&ask_at(&signing, now, &snapshot, "other.skydns.test.", 1, true)),
        (ResponseCode::NoError, true, 0),
        "a new name over UDP is sent to TCP"
    );
    assert!(!signing.borrow().signed());
    let later = now + Duration::from_secs(1);
    let earned = ask_at(&signing, later, &snapshot, "other.skydns.test.", 1, true);
    assert_eq!(
        header(&earned),
        (ResponseCode::NXDomain, false, 8),
        "a second later it has 100 ms"
    );
    check(&earned, &key);
}

#[test]
fn signatures_made_per_query_start_at_the_time_the_caller_gives() {
    let (snapshot, _) = signed();
    let inceptions = |now: SystemTime| -> Vec<u32> {
        let nx = ask_at(
            &RefCell::new(Signing::new()),
            now,
            &snapshot,
            "nope.skydns.test.",
            1,
            true,
        );
        records::sets(&nx)
            .unwrap()
            .iter()
            .filter(|set| set.rtype == rrsig::RRSIG)
            .map(|set| u32::from_be_bytes(set.rdatas[0][12..16].try_into().unwrap()))
            .collect()
    };
    let given = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let made_now = Validity::from(given).inception;
    let at_given = inceptions(given);
    assert_eq!(at_given.len(), 4);
    assert!(
        at_given.contains(&made_now),
        "the NSEC3 record covering the name is signed at the time given: {at_given:?}"
    );
    assert_eq!(
        inceptions(given + Duration::from_secs(3600)),
        at_given
            .iter()
            .map(|&t| if t == made_now { t + 3600 } else { t })
            .collect::<Vec<_>>(),
        "an hour later, only what was signed per query moved"
    );
}
