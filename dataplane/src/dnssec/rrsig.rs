//! RRSIG records (RFC 4034 §3) over RRsets in canonical form (RFC 4034 §6).

use super::key::{SigningKey, CLASS};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

pub use crate::wire::types::rtype::RRSIG;

/// How long before it was made a signature is valid: SkyDNS's 3 hours, for clients whose clock
/// is behind.
pub const INCEPTION_BEFORE: u32 = 3 * 3600;

/// How long a signature is valid after it was made: SkyDNS's 7 days.
pub const VALIDITY: u32 = 7 * 24 * 3600;

/// When a signature is made again: once less than this is left of its validity, well before
/// it expires (SkyDNS re-signed within a day of the expiration; a snapshot holding a signature
/// may be served for long without a change, so skyline renews with days to spare).
pub const RENEW_BEFORE: u32 = 4 * 24 * 3600;

/// The period a signature is valid in, in seconds since the epoch (RFC 4034 §3.1.5; serial
/// arithmetic keeps these meaningful past 2106).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Validity {
    /// Signature inception.
    pub inception: u32,
    /// Signature expiration.
    pub expiration: u32,
}

impl Validity {
    /// The validity of a signature made at `now`.
    pub fn from(now: SystemTime) -> Validity {
        let now = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()) as u32;
        Validity {
            inception: now.wrapping_sub(INCEPTION_BEFORE),
            expiration: now.wrapping_add(VALIDITY),
        }
    }

    /// Whether a signature of this validity is to be made again at `now`.
    pub fn due(&self, now: SystemTime) -> bool {
        self.due_in(now).is_zero()
    }

    /// How long after `now` a signature of this validity comes [`Validity::due`]: zero when it
    /// is. What a source waits before it builds again only to renew the signatures, so that a
    /// domain that does not change never serves an expired one.
    pub fn due_in(&self, now: SystemTime) -> Duration {
        let now = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs()) as u32;
        let left = self.expiration.wrapping_sub(now) as i32;
        // Due once less than RENEW_BEFORE is left: one second past the last whole second with
        // exactly that much left.
        Duration::from_secs(u64::try_from(left - RENEW_BEFORE as i32 + 1).unwrap_or(0))
    }
}

/// The number of labels of the owner name RRSIG records: the root and a leading `*` do not count
/// (RFC 4034 §3.1.3).
fn labels(owner: &[u8]) -> u8 {
    let mut count = 0u8;
    let mut pos = 0;
    while let Some(&len) = owner.get(pos) {
        if len == 0 {
            break;
        }
        count += 1;
        pos += 1 + usize::from(len);
    }
    if owner.starts_with(b"\x01*") {
        count -= 1;
    }
    count
}

/// The RDATA of the RRSIG over the RRset of `owner` (lower-cased, uncompressed wire form), type
/// `rtype` and TTL `ttl` whose records' RDATA, each in canonical form (names lower-cased and
/// uncompressed), are `rdatas`; these are sorted and deduplicated in place (RFC 4034 §6.3).
/// `None` if the key fails to sign.
pub fn sign(
    key: &SigningKey,
    owner: &[u8],
    rtype: u16,
    ttl: u32,
    rdatas: &mut Vec<Vec<u8>>,
    validity: Validity,
) -> Option<Vec<u8>> {
    rdatas.sort();
    rdatas.dedup();
    let signer = key.owner().wire().to_ascii_lowercase();
    let mut rdata = Vec::with_capacity(18 + signer.len() + 256);
    rdata.extend_from_slice(&rtype.to_be_bytes());
    rdata.push(key.algorithm());
    rdata.push(labels(owner));
    rdata.extend_from_slice(&ttl.to_be_bytes());
    rdata.extend_from_slice(&validity.expiration.to_be_bytes());
    rdata.extend_from_slice(&validity.inception.to_be_bytes());
    rdata.extend_from_slice(&key.tag().to_be_bytes());
    rdata.extend_from_slice(&signer);
    let mut data = rdata.clone();
    for record in rdatas.iter() {
        data.extend_from_slice(owner);
        data.extend_from_slice(&rtype.to_be_bytes());
        data.extend_from_slice(&CLASS.to_be_bytes());
        data.extend_from_slice(&ttl.to_be_bytes());
        data.extend_from_slice(&(record.len() as u16).to_be_bytes());
        data.extend_from_slice(record);
    }
    rdata.extend_from_slice(&key.sign(&data)?);
    Some(rdata)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_leave_out_the_root_and_a_leading_wildcard() {
        assert_eq!(labels(b"\x00"), 0);
        assert_eq!(labels(b"\x03www\x07example\x03com\x00"), 3);
        assert_eq!(labels(b"\x01*\x07example\x03com\x00"), 2);
    }

    #[test]
    fn a_signature_is_due_with_less_than_four_days_left() {
        let now = UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
        let validity = Validity::from(now);
        assert_eq!(validity.expiration - validity.inception, VALIDITY + INCEPTION_BEFORE);
        assert!(!validity.due(now));
        assert!(!validity.due(now + std::time::Duration::from_secs(2 * 24 * 3600)));
        assert!(validity.due(now + std::time::Duration::from_secs(3 * 24 * 3600 + 1)));
    }

    #[test]
    fn a_signature_comes_due_when_less_than_four_days_are_left() {
        let now = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let validity = Validity::from(now);
        let wait = validity.due_in(now);
        assert_eq!(wait, Duration::from_secs(u64::from(VALIDITY - RENEW_BEFORE) + 1));
        assert!(!validity.due(now + wait - Duration::from_secs(1)));
        assert!(validity.due(now + wait));
        assert_eq!(validity.due_in(now + wait), Duration::ZERO);
        assert_eq!(
            validity.due_in(now + Duration::from_secs(30 * 24 * 3600)),
            Duration::ZERO
        );
        assert_eq!(
            validity.due_in(now + Duration::from_millis(1500)),
            wait - Duration::from_secs(1)
        );
    }
}
