//! DNS Cookies (RFC 7873) with the interoperable server cookie of RFC 9018: a lightweight
//! proof that a client can receive at the address it sends from, which lets a UDP client past
//! response rate limiting and makes spoofed-source floods cheap to tell apart.
//!
//! A server cookie is 16 bytes: version 1, three reserved bytes, a 32-bit timestamp in
//! seconds, and an 8-byte SipHash-2-4 of the client cookie, those first eight bytes and the
//! client's address, keyed by a 16-byte secret. Every
//! worker checks and makes them with the same secrets, so a client may reach any of them; a
//! previous secret is still accepted, so that a rotation does not cost every client a
//! BADCOOKIE round trip. See docs/robustness.md ("DNS Cookies").

use arc_swap::ArcSwap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// Length of a client cookie.
pub const CLIENT_COOKIE_LEN: usize = 8;
/// Length of the server cookie this server makes (RFC 9018 §4).
pub const SERVER_COOKIE_LEN: usize = 16;
/// Length of a COOKIE option's data as this server writes it: the client cookie and its own.
pub const COOKIE_LEN: usize = CLIENT_COOKIE_LEN + SERVER_COOKIE_LEN;
/// The server cookie version of RFC 9018.
const VERSION: u8 = 1;
/// How old a server cookie may be and still be accepted (RFC 9018 §4.3).
const MAX_AGE: i64 = 3600;
/// How far in the future a timestamp may lie, for clocks of workers and servers that differ.
const MAX_AHEAD: i64 = 300;
/// Past this age a valid server cookie is replaced by a fresh one in the reply.
const REISSUE_AGE: i64 = 1800;

/// A 16-byte SipHash key.
pub type Secret = [u8; 16];

/// The secrets server cookies are made and checked with, shared by every worker.
#[derive(Clone, PartialEq, Eq)]
pub struct CookieSecrets {
    /// Makes every server cookie, and checks them.
    pub current: Secret,
    /// Still accepted, from before a rotation; a cookie it made is replaced in the reply.
    pub previous: Option<Secret>,
}

impl std::fmt::Debug for CookieSecrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // A secret in a log line would let anyone who reads it make valid cookies.
        f.debug_struct("CookieSecrets")
            .field("previous", &self.previous.is_some())
            .finish_non_exhaustive()
    }
}

/// Why no secret could be had.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SecretError {
    /// The text is not 32 hexadecimal digits.
    #[error("a cookie secret is 32 hexadecimal digits (16 bytes)")]
    NotHex,
    /// The operating system's random number generator failed.
    #[error("the operating system's random number generator failed")]
    Random,
}

impl CookieSecrets {
    /// Secrets with a random current one, from the operating system's generator: the default,
    /// for a server whose cookies need to be valid only at its own addresses and for its life.
    pub fn generate() -> Result<CookieSecrets, SecretError> {
        let mut current = [0u8; 16];
        getrandom::getrandom(&mut current).map_err(|_| SecretError::Random)?;
        Ok(CookieSecrets {
            current,
            previous: None,
        })
    }

    /// Reads a secret written as 32 hexadecimal digits.
    pub fn parse_secret(text: &str) -> Result<Secret, SecretError> {
        let text = text.trim();
        if text.len() != 32 || !text.is_ascii() {
            return Err(SecretError::NotHex);
        }
        let mut secret = [0u8; 16];
        for (i, byte) in secret.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).map_err(|_| SecretError::NotHex)?;
        }
        Ok(secret)
    }

    /// Checks the COOKIE option `data` (8 or 16..=40 bytes, as the parser let through) of a
    /// query from `client` at `now` (seconds since the epoch, modulo 2^32), and writes the
    /// cookie for the reply into `reply`, unless the reply is to echo the server cookie it
    /// got.
    #[inline(never)]
    pub fn check(&self, data: &[u8], client: IpAddr, now: u32, reply: &mut [u8; COOKIE_LEN]) -> Verdict {
        let Some((client_cookie, server)) = data.split_first_chunk::<CLIENT_COOKIE_LEN>() else {
            return Verdict::ClientOnly;
        };
        reply[..CLIENT_COOKIE_LEN].copy_from_slice(client_cookie);
        let fresh = |reply: &mut [u8; COOKIE_LEN]| {
            let cookie = server_cookie(&self.current, client_cookie, client, now);
            reply[CLIENT_COOKIE_LEN..].copy_from_slice(&cookie);
        };
        if server.is_empty() {
            fresh(reply);
            return Verdict::ClientOnly;
        }
        let verdict = self.verify(client_cookie, server, client, now);
        match verdict {
            Verdict::Valid => reply[CLIENT_COOKIE_LEN..].copy_from_slice(server),
            Verdict::Renewed | Verdict::Invalid | Verdict::ClientOnly => fresh(reply),
        }
        verdict
    }

    fn verify(&self, client_cookie: &[u8; CLIENT_COOKIE_LEN], server: &[u8], client: IpAddr, now: u32) -> Verdict {
        let Ok(server) = <&[u8; SERVER_COOKIE_LEN]>::try_from(server) else {
            return Verdict::Invalid;
        };
        if server[0] != VERSION {
            return Verdict::Invalid;
        }
        let stamp = u32::from_be_bytes([server[4], server[5], server[6], server[7]]);
        // Serial number arithmetic (RFC 1982), as RFC 9018 §4.3 asks: the age across the wrap.
        let age = i64::from(now.wrapping_sub(stamp) as i32);
        if !(-MAX_AHEAD..=MAX_AGE).contains(&age) {
            return Verdict::Invalid;
        }
        let head = server.first_chunk::<8>().copied().unwrap_or_default();
        let hash = &server[8..];
        if mac(&self.current, client_cookie, &head, client).to_le_bytes() == hash {
            return if age > REISSUE_AGE {
                Verdict::Renewed
            } else {
                Verdict::Valid
            };
        }
        match self.previous {
            Some(previous) if mac(&previous, client_cookie, &head, client).to_le_bytes() == hash => Verdict::Renewed,
            _ => Verdict::Invalid,
        }
    }
}

/// Where the workers read the cookie secrets, once per batch; a reload sets new ones.
#[derive(Clone, Debug)]
pub struct CookieCell(Arc<ArcSwap<CookieSecrets>>);

impl CookieCell {
    /// A cell holding `secrets`.
    pub fn new(secrets: CookieSecrets) -> CookieCell {
        CookieCell(Arc::new(ArcSwap::from_pointee(secrets)))
    }

    /// The secrets now.
    pub fn get(&self) -> Arc<CookieSecrets> {
        self.0.load_full()
    }

    /// Replaces the secrets; every worker uses them from its next batch.
    pub fn set(&self, secrets: CookieSecrets) {
        self.0.store(Arc::new(secrets));
    }

    /// A per-worker reader that costs a pointer comparison while nothing changed.
    pub(crate) fn reader(&self) -> arc_swap::Cache<Arc<ArcSwap<CookieSecrets>>, Arc<CookieSecrets>> {
        arc_swap::Cache::new(Arc::clone(&self.0))
    }
}

impl PartialEq for CookieCell {
    fn eq(&self, other: &CookieCell) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for CookieCell {}

/// What a query's COOKIE option proved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// A client cookie alone: the reply carries a fresh server cookie.
    ClientOnly,
    /// A server cookie this server made, recent: the reply echoes it.
    Valid,
    /// A server cookie this server made, older than half an hour or made with the previous
    /// secret: valid, and the reply carries a fresh one.
    Renewed,
    /// A server cookie this server did not make, or too old or too far ahead: the client is
    /// not known to receive at its address; the reply carries a fresh one.
    Invalid,
}

impl Verdict {
    /// Whether the client proved it receives at its address.
    pub fn is_valid(self) -> bool {
        matches!(self, Verdict::Valid | Verdict::Renewed)
    }
}

/// `now` as a server cookie timestamp: seconds since the epoch, modulo 2^32. The caller reads
/// the clock: answering takes the time from its [`crate::answer::Context`].
pub fn timestamp(now: SystemTime) -> u32 {
    now.duration_since(UNIX_EPOCH).map_or(0, |since| since.as_secs() as u32)
}

/// The RFC 9018 server cookie for `client_cookie` from `client` at `now`, reserved bytes zero.
pub fn server_cookie(
    secret: &Secret,
    client_cookie: &[u8; CLIENT_COOKIE_LEN],
    client: IpAddr,
    now: u32,
) -> [u8; SERVER_COOKIE_LEN] {
    let mut cookie = [0u8; SERVER_COOKIE_LEN];
    cookie[0] = VERSION;
    cookie[4..8].copy_from_slice(&now.to_be_bytes());
    let head = cookie.first_chunk::<8>().copied().unwrap_or_default();
    cookie[8..].copy_from_slice(&mac(secret, client_cookie, &head, client).to_le_bytes());
    cookie
}

/// SipHash-2-4 of ClientCookie | Version | Reserved | Timestamp | Client-IP (RFC 9018 §4.4).
/// An IPv4 client seen through an IPv6 socket hashes as the IPv4 address it is.
fn mac(secret: &Secret, client_cookie: &[u8; 8], head: &[u8; 8], client: IpAddr) -> u64 {
    let mut input = [0u8; 32];
    input[..8].copy_from_slice(client_cookie);
    input[8..16].copy_from_slice(head);
    let len = match client.to_canonical() {
        IpAddr::V4(v4) => {
            input[16..20].copy_from_slice(&v4.octets());
            20
        }
        IpAddr::V6(v6) => {
            input[16..32].copy_from_slice(&v6.octets());
            32
        }
    };
    siphash24(secret, &input[..len])
}

/// SipHash-2-4 (Aumasson and Bernstein) of `data` under `key`, as RFC 9018 uses it: the 64-bit
/// result is written little-endian.
pub fn siphash24(key: &Secret, data: &[u8]) -> u64 {
    let k0 = u64::from_le_bytes(key[..8].try_into().unwrap_or_default());
    let k1 = u64::from_le_bytes(key[8..].try_into().unwrap_or_default());
    let mut v = [
        k0 ^ 0x736f_6d65_7073_6575,
        k1 ^ 0x646f_7261_6e64_6f6d,
        k0 ^ 0x6c79_6765_6e65_7261,
        k1 ^ 0x7465_6462_7974_6573,
    ];
    let mut chunks = data.chunks_exact(8);
    for chunk in &mut chunks {
        let m = u64::from_le_bytes(chunk.try_into().unwrap_or_default());
        v[3] ^= m;
        sip_round(&mut v);
        sip_round(&mut v);
        v[0] ^= m;
    }
    let mut last = [0u8; 8];
    let rest = chunks.remainder();
    last[..rest.len()].copy_from_slice(rest);
    last[7] = data.len() as u8;
    let m = u64::from_le_bytes(last);
    v[3] ^= m;
    sip_round(&mut v);
    sip_round(&mut v);
    v[0] ^= m;
    v[2] ^= 0xff;
    for _ in 0..4 {
        sip_round(&mut v);
    }
    v[0] ^ v[1] ^ v[2] ^ v[3]
}

#[inline(always)]
fn sip_round(v: &mut [u64; 4]) {
    v[0] = v[0].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(13) ^ v[0];
    v[0] = v[0].rotate_left(32);
    v[2] = v[2].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(16) ^ v[2];
    v[0] = v[0].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(21) ^ v[0];
    v[2] = v[2].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(17) ^ v[2];
    v[2] = v[2].rotate_left(32);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(text: &str) -> Vec<u8> {
        (0..text.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
            .collect()
    }

    fn secret(text: &str) -> Secret {
        CookieSecrets::parse_secret(text).unwrap()
    }

    const SECRET_A: &str = "e5e973e5a6b2a43f48e7dc849e37bfcf";
    const SECRET_A4_OLD: &str = "dd3bdf9344b678b185a6f5cb60fca715";
    const SECRET_A4_NEW: &str = "445536bcd2513298075a5d379663c962";

    #[test]
    fn siphash_reference_vector() {
        // The SipHash paper's Appendix A: key 00..0f, message 00..0e.
        let key: Secret = std::array::from_fn(|i| i as u8);
        let data: Vec<u8> = (0..15).collect();
        assert_eq!(siphash24(&key, &data), 0xa129_ca61_49be_45e5);
    }

    #[test]
    fn rfc9018_appendix_a_server_cookies() {
        let cases = [
            (
                SECRET_A,
                "2464c4abcf10c957",
                "198.51.100.100",
                1_559_731_985,
                "010000005cf79f111f8130c3eee29480",
            ),
            (
                SECRET_A,
                "2464c4abcf10c957",
                "198.51.100.100",
                1_559_734_385,
                "010000005cf7a871d4a564a1442aca77",
            ),
            (
                SECRET_A,
                "fc93fc62807ddb86",
                "203.0.113.203",
                1_559_734_700,
                "010000005cf7a9acf73a7810aca2381e",
            ),
            (
                SECRET_A4_NEW,
                "22681ab97d52c298",
                "2001:db8:220:1:59de:d0f4:8769:82b8",
                1_559_741_961,
                "010000005cf7c609a6bb79d16625507a",
            ),
        ];
        for (key, client_cookie, ip, now, want) in cases {
            let client_cookie: [u8; 8] = hex(client_cookie).try_into().unwrap();
            let got = server_cookie(&secret(key), &client_cookie, ip.parse().unwrap(), now);
            assert_eq!(got.to_vec(), hex(want), "{ip} at {now}");
        }
    }

    #[test]
    fn rfc9018_appendix_a_checks() {
        let mut reply = [0u8; COOKIE_LEN];
        // A.2: a cookie 40 minutes old is valid and renewed.
        let secrets = CookieSecrets {
            current: secret(SECRET_A),
            previous: None,
        };
        let query = hex("2464c4abcf10c957010000005cf79f111f8130c3eee29480");
        let ip = "198.51.100.100".parse().unwrap();
        assert_eq!(secrets.check(&query, ip, 1_559_734_385, &mut reply), Verdict::Renewed);
        assert_eq!(reply.to_vec(), hex("2464c4abcf10c957010000005cf7a871d4a564a1442aca77"));
        // Within half an hour it is echoed as it came.
        assert_eq!(
            secrets.check(&query, ip, 1_559_731_985 + 60, &mut reply),
            Verdict::Valid
        );
        assert_eq!(reply.to_vec(), query);
        // A.3: the cookie is 1h52m old, past the hour: not valid, and the reply carries the
        // fresh cookie of the example.
        let query = hex("fc93fc62807ddb8601abcdef5cf78f71a314227b6679ebf5");
        let ip = "203.0.113.203".parse().unwrap();
        assert_eq!(secrets.check(&query, ip, 1_559_734_700, &mut reply), Verdict::Invalid);
        assert_eq!(reply.to_vec(), hex("fc93fc62807ddb86010000005cf7a9acf73a7810aca2381e"));
        // Within its hour it was valid: the reserved bytes the client sent back are part of
        // the hash, and from another address it is not ours.
        let issued = 0x5cf7_8f71;
        assert_eq!(secrets.check(&query, ip, issued + 10, &mut reply), Verdict::Valid);
        let other = "203.0.113.204".parse().unwrap();
        assert_eq!(secrets.check(&query, other, issued + 10, &mut reply), Verdict::Invalid);
        // A.4: after a rollover the old secret's cookie is accepted as the previous one's, and
        // the reply carries the new secret's.
        let query = hex("22681ab97d52c298010000005cf7c57926556bd0934c72f8");
        let ip = "2001:db8:220:1:59de:d0f4:8769:82b8".parse().unwrap();
        let rolled = CookieSecrets {
            current: secret(SECRET_A4_NEW),
            previous: Some(secret(SECRET_A4_OLD)),
        };
        assert_eq!(rolled.check(&query, ip, 1_559_741_961, &mut reply), Verdict::Renewed);
        assert_eq!(reply.to_vec(), hex("22681ab97d52c298010000005cf7c609a6bb79d16625507a"));
        let forgotten = CookieSecrets {
            previous: None,
            ..rolled
        };
        assert_eq!(forgotten.check(&query, ip, 1_559_741_961, &mut reply), Verdict::Invalid);
    }

    #[test]
    fn age_window() {
        let secrets = CookieSecrets {
            current: secret(SECRET_A),
            previous: None,
        };
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        let client_cookie = [7u8; 8];
        let mut reply = [0u8; COOKIE_LEN];
        let at = |stamp: u32, now: u32, reply: &mut [u8; COOKIE_LEN]| {
            let mut query = client_cookie.to_vec();
            query.extend_from_slice(&server_cookie(&secrets.current, &client_cookie, ip, stamp));
            secrets.check(&query, ip, now, reply)
        };
        let now = 1_559_731_985;
        assert_eq!(at(now, now, &mut reply), Verdict::Valid);
        assert_eq!(at(now - 1800, now, &mut reply), Verdict::Valid);
        assert_eq!(at(now - 1801, now, &mut reply), Verdict::Renewed);
        assert_eq!(at(now - 3600, now, &mut reply), Verdict::Renewed);
        assert_eq!(at(now - 3601, now, &mut reply), Verdict::Invalid);
        assert_eq!(at(now + 300, now, &mut reply), Verdict::Valid);
        assert_eq!(at(now + 301, now, &mut reply), Verdict::Invalid);
        assert_eq!(
            at(u32::MAX - 2599, 1000, &mut reply),
            Verdict::Renewed,
            "an hour old across the wrap"
        );
    }

    #[test]
    fn secrets_parse_from_hex_only() {
        assert_eq!(secret(SECRET_A)[0], 0xe5);
        assert_eq!(CookieSecrets::parse_secret("e5e9"), Err(SecretError::NotHex));
        assert_eq!(
            CookieSecrets::parse_secret("zz e973e5a6b2a43f48e7dc849e37bfcf"),
            Err(SecretError::NotHex)
        );
        assert_ne!(CookieSecrets::generate().unwrap(), CookieSecrets::generate().unwrap());
    }
}
