//! NSEC3 (RFC 5155) as SkyDNS answers denials: "white lies", records made per answer whose
//! hash range holds exactly the one hash they prove absent (or present), so that no answer
//! lists the zone's names. SHA-1, no extra iterations, an empty salt (RFC 9276 §3.1).

use ring::digest::{digest, SHA1_FOR_LEGACY_USE_ONLY};

/// The apex publishes the hash parameters in an NSEC3PARAM (RFC 5155 §4), so that a secondary
/// or a zone checker can hash names as the NSEC3 records do.
pub use crate::wire::types::rtype::{NSEC3, NSEC3PARAM};

/// The hash algorithm of the NSEC3 records and the NSEC3PARAM: SHA-1, the only one RFC 5155
/// §11 defines.
pub const SHA1: u8 = 1;

/// Extra iterations of the hash: none, as RFC 9276 §3.1 asks.
pub const ITERATIONS: u16 = 0;

/// The salt: empty, as RFC 9276 §3.1 asks.
pub const SALT: &[u8] = &[];

/// Length of a SHA-1 hash.
pub const HASH_LEN: usize = 20;

/// A hashed owner name.
pub type Hash = [u8; HASH_LEN];

/// The NSEC3 hash of `name` (lower-cased, uncompressed wire form) with `salt` and `iterations`
/// extra iterations (RFC 5155 §5); skyline signs with none of either.
pub fn hash(name: &[u8], salt: &[u8], iterations: u16) -> Hash {
    let mut input = Vec::with_capacity(name.len().max(HASH_LEN) + salt.len());
    input.extend_from_slice(name);
    input.extend_from_slice(salt);
    let mut out = [0; HASH_LEN];
    out.copy_from_slice(digest(&SHA1_FOR_LEGACY_USE_ONLY, &input).as_ref());
    for _ in 0..iterations {
        input.clear();
        input.extend_from_slice(&out);
        input.extend_from_slice(salt);
        out.copy_from_slice(digest(&SHA1_FOR_LEGACY_USE_ONLY, &input).as_ref());
    }
    out
}

/// `hash` in lower-case base32hex without padding (RFC 4648 §7): the first label of an NSEC3
/// owner.
pub fn base32hex(hash: &Hash) -> [u8; 32] {
    const ALPHABET: &[u8; 32] = b"0123456789abcdefghijklmnopqrstuv";
    let mut out = [0; 32];
    for (chunk, text) in hash.chunks(5).zip(out.chunks_mut(8)) {
        let n = chunk.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b));
        for (i, c) in text.iter_mut().enumerate() {
            *c = ALPHABET[(n >> (35 - 5 * i)) as usize & 31];
        }
    }
    out
}

/// The owner of the NSEC3 record of `hash` in the zone `apex` (wire form).
pub fn owner(hash: &Hash, apex: &[u8]) -> Vec<u8> {
    let mut owner = Vec::with_capacity(33 + apex.len());
    owner.push(32);
    owner.extend_from_slice(&base32hex(hash));
    owner.extend_from_slice(apex);
    owner
}

/// `hash` plus (`up`) or minus one, wrapping around.
pub fn step(hash: &Hash, up: bool) -> Hash {
    let mut out = *hash;
    for byte in out.iter_mut().rev() {
        let (value, carry) = if up {
            byte.overflowing_add(1)
        } else {
            byte.overflowing_sub(1)
        };
        *byte = value;
        if !carry {
            break;
        }
    }
    out
}

/// The type bit maps field of `types` (RFC 4034 §4.1.2), which need not be sorted.
pub fn type_bitmap(types: &[u16]) -> Vec<u8> {
    let mut types = types.to_vec();
    types.sort_unstable();
    types.dedup();
    let mut out = Vec::new();
    let mut i = 0;
    while i < types.len() {
        let window = types[i] >> 8;
        let mut bits = [0u8; 32];
        let mut len = 0;
        while i < types.len() && types[i] >> 8 == window {
            let low = usize::from(types[i] & 0xFF);
            bits[low / 8] |= 0x80 >> (low % 8);
            len = low / 8 + 1;
            i += 1;
        }
        out.push(window as u8);
        out.push(len as u8);
        out.extend_from_slice(&bits[..len]);
    }
    out
}

/// The hash parameters every NSEC3 record and the NSEC3PARAM share: algorithm, flags, iterations,
/// salt length and salt. The flags are 0: no opt-out in NSEC3 (RFC 5155 §3.1.2), and always 0 in
/// NSEC3PARAM (§4.1.2).
fn parameters(out: &mut Vec<u8>) {
    out.extend_from_slice(&[SHA1, 0]);
    out.extend_from_slice(&ITERATIONS.to_be_bytes());
    out.push(SALT.len() as u8);
    out.extend_from_slice(SALT);
}

/// The RDATA of an NSEC3 record whose next hashed owner is `next` and whose types are `bitmap`
/// ([`type_bitmap`]).
pub fn rdata(next: &Hash, bitmap: &[u8]) -> Vec<u8> {
    let mut rdata = Vec::with_capacity(6 + SALT.len() + HASH_LEN + bitmap.len());
    parameters(&mut rdata);
    rdata.push(HASH_LEN as u8);
    rdata.extend_from_slice(next);
    rdata.extend_from_slice(bitmap);
    rdata
}

/// The RDATA of the apex's NSEC3PARAM record (RFC 5155 §4.2): the parameters of [`rdata`].
pub fn param_rdata() -> Vec<u8> {
    let mut rdata = Vec::with_capacity(5 + SALT.len());
    parameters(&mut rdata);
    rdata
}

/// The NSEC3 hash of `name` (lower-cased, uncompressed wire form) with the zone's parameters.
pub fn hash_name(name: &[u8]) -> Hash {
    hash(name, SALT, ITERATIONS)
}

/// The white lie that matches `hash`: owned by it, its range reaching the next hash, with the
/// types of the name it is the hash of.
pub fn matching(hash: &Hash, bitmap: &[u8]) -> (Hash, Vec<u8>) {
    (*hash, rdata(&step(hash, true), bitmap))
}

/// The white lie that covers `hash`: owned by the hash before it, its range reaching the hash
/// after it, no types (RFC 7129 §5 describes the technique).
pub fn covering(hash: &Hash) -> (Hash, Vec<u8>) {
    (step(hash, false), rdata(&step(hash, true), &[]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Name;

    /// RFC 5155 Appendix A: the zone `example` hashes with salt aabbccdd and 12 iterations.
    #[test]
    fn rfc_5155_appendix_a_hashes() {
        let salt = [0xAA, 0xBB, 0xCC, 0xDD];
        for (name, hashed) in [
            ("example.", "0p9mhaveqvm6t7vbl5lop2u3t2rp3tom"),
            ("a.example.", "35mthgpgcu1qg68fab165klnsnk3dpvl"),
            ("ai.example.", "gjeqe526plbf1g8mklp59enfd789njgi"),
            ("ns1.example.", "2t7b4g4vsa5smi47k61mv5bv1a22bojr"),
            ("ns2.example.", "q04jkcevqvmu85r014c7dkba38o0ji5r"),
            ("w.example.", "k8udemvp1j2f7eg6jebps17vp3n8i58h"),
            ("*.w.example.", "r53bq7cc2uvmubfu5ocmm6pers9tk9en"),
            ("x.w.example.", "b4um86eghhds6nea196smvmlo4ors995"),
            ("y.w.example.", "ji6neoaepv8b5o6k4ev33abha8ht9fgc"),
            ("x.y.w.example.", "2vptu5timamqttgl4luu9kg21e0aor3s"),
            ("xx.example.", "t644ebqk9bibcna874givr6joj62mlhv"),
        ] {
            let wire = Name::from_dotted(name).unwrap().wire().to_vec();
            assert_eq!(&base32hex(&hash(&wire, &salt, 12)), hashed.as_bytes(), "{name}");
        }
    }

    /// RFC 5155 §4.2: the NSEC3PARAM holds the first four fields of the NSEC3 records, its flags 0.
    #[test]
    fn nsec3param_holds_the_parameters_of_the_nsec3_records() {
        let nsec3 = rdata(&[0; HASH_LEN], &type_bitmap(&[1]));
        let param = param_rdata();
        assert_eq!(param, [1, 0, 0, 0, 0]);
        assert_eq!(param[..], nsec3[..param.len()]);
        assert_eq!(nsec3[param.len()], HASH_LEN as u8);
    }

    #[test]
    fn white_lies_hold_exactly_their_hash() {
        let h = [0xFF; HASH_LEN];
        assert_eq!(step(&h, true), [0; HASH_LEN]);
        assert_eq!(step(&[0; HASH_LEN], false), h);
        let mut one = [0; HASH_LEN];
        one[HASH_LEN - 1] = 1;
        let (owner, rdata) = covering(&one);
        assert_eq!(owner, [0; HASH_LEN]);
        assert_eq!(rdata[6..26][HASH_LEN - 1], 2);
        let (owner, rdata) = matching(&one, &type_bitmap(&[1]));
        assert_eq!(owner, one);
        assert_eq!(&rdata[26..], &[0, 1, 0x40]);
    }

    /// RFC 4034 §4.3: A MX RRSIG NSEC TYPE1234.
    #[test]
    fn type_bitmap_of_rfc_4034_section_4_3() {
        let bitmap = type_bitmap(&[1234, 47, 46, 15, 1]);
        let mut expected = vec![0x00, 0x06, 0x40, 0x01, 0x00, 0x00, 0x00, 0x03, 0x04, 0x1B];
        expected.extend_from_slice(&[0; 26]);
        expected.push(0x20);
        assert_eq!(bitmap, expected);
    }
}
