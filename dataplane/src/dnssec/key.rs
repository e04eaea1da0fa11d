//! The zone's signing key, read from the pair of files `dnssec-keygen` writes: `KEYBASE.key`,
//! the DNSKEY record in zone-file form, and `KEYBASE.private`, the private key in BIND's
//! "Private-key-format: v1.3".

use super::base64;
use crate::wire::types::class;
use crate::wire::Name;
use ring::rand::SystemRandom;
use ring::signature::{EcdsaKeyPair, Ed25519KeyPair, RsaKeyPair, ECDSA_P256_SHA256_FIXED_SIGNING, RSA_PKCS1_SHA256};
use std::fmt;
use std::path::{Path, PathBuf};

/// DNSSEC algorithm numbers (IANA "DNS Security Algorithm Numbers") this signer supports.
pub mod algorithm {
    /// RSA/SHA-256 (RFC 5702).
    pub const RSASHA256: u8 = 8;
    /// ECDSA P-256 with SHA-256 (RFC 6605).
    pub const ECDSAP256SHA256: u8 = 13;
    /// Ed25519 (RFC 8080).
    pub const ED25519: u8 = 15;
}

pub use crate::wire::types::rtype::DNSKEY;

/// Why a key pair cannot sign the zone: each variant names the file or field at fault.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// A file of the pair could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The `.key` file holds no DNSKEY record.
    #[error("{0}: no DNSKEY record")]
    NoDnskey(PathBuf),
    /// The DNSKEY record does not parse.
    #[error("{path}: malformed DNSKEY record: {why}")]
    BadDnskey {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: &'static str,
    },
    /// The DNSKEY's owner is not the domain it is to sign.
    #[error("the DNSKEY is for {owner}, not for the domain {domain}")]
    WrongOwner {
        /// The DNSKEY's owner.
        owner: Name,
        /// The domain.
        domain: Name,
    },
    /// The DNSKEY is not a zone key (flags bit 7 clear) or has a protocol other than 3.
    #[error("the DNSKEY is not a zone key (flags {flags}, protocol {protocol})")]
    NotZoneKey {
        /// Its flags.
        flags: u16,
        /// Its protocol.
        protocol: u8,
    },
    /// An algorithm other than 8, 13 and 15.
    #[error("DNSSEC algorithm {0} is not supported (8 RSASHA256, 13 ECDSAP256SHA256, 15 Ed25519 are)")]
    Algorithm(u8),
    /// The `.private` file lacks a field or has one that does not decode.
    #[error("{path}: field {field} is missing or malformed")]
    Field {
        /// The file.
        path: PathBuf,
        /// The field.
        field: &'static str,
    },
    /// The two files disagree on the algorithm.
    #[error("{path}: algorithm {private} differs from the DNSKEY's {public}")]
    AlgorithmMismatch {
        /// The `.private` file.
        path: PathBuf,
        /// Its algorithm.
        private: u8,
        /// The DNSKEY's.
        public: u8,
    },
    /// The private key is rejected, or is not the DNSKEY's public key's pair. The reason
    /// never quotes key material.
    #[error("{path}: the private key is invalid or does not match the DNSKEY")]
    Mismatch {
        /// The `.private` file.
        path: PathBuf,
    },
}

/// The key pair a zone is signed with. Its private half is never printed: `Debug` shows the
/// DNSKEY's identity alone.
pub struct SigningKey {
    owner: Name,
    flags: u16,
    algorithm: u8,
    public: Box<[u8]>,
    tag: u16,
    pair: Pair,
    rng: SystemRandom,
}

enum Pair {
    Rsa(RsaKeyPair),
    Ecdsa(EcdsaKeyPair),
    Ed25519(Ed25519KeyPair),
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SigningKey")
            .field("owner", &self.owner)
            .field("algorithm", &self.algorithm)
            .field("tag", &self.tag)
            .finish_non_exhaustive()
    }
}

impl PartialEq for SigningKey {
    /// Two keys are the same when their DNSKEYs are: a reload that reads the same files keeps
    /// the signatures made.
    fn eq(&self, other: &SigningKey) -> bool {
        self.owner == other.owner
            && self.flags == other.flags
            && self.algorithm == other.algorithm
            && self.public == other.public
    }
}

impl Eq for SigningKey {}

impl SigningKey {
    /// Reads `KEYBASE.key` and `KEYBASE.private` (`keybase` is the path without either
    /// suffix, as `dnssec-keygen` prints it) for the zone `domain`.
    pub fn load(keybase: &Path, domain: &Name) -> Result<SigningKey, KeyError> {
        let with = |suffix: &str| {
            let mut path = keybase.as_os_str().to_owned();
            path.push(suffix);
            PathBuf::from(path)
        };
        let (key_path, private_path) = (with(".key"), with(".private"));
        let read = |path: &PathBuf| {
            std::fs::read_to_string(path).map_err(|source| KeyError::Read {
                path: path.clone(),
                source,
            })
        };
        let key = read(&key_path)?;
        let private = read(&private_path)?;
        SigningKey::from_bind(&key, &key_path, &private, &private_path, domain)
    }

    /// The key of the texts of a `.key` and a `.private` file; the paths only name them in
    /// errors.
    pub fn from_bind(
        key: &str,
        key_path: &Path,
        private: &str,
        private_path: &Path,
        domain: &Name,
    ) -> Result<SigningKey, KeyError> {
        let dnskey = Dnskey::parse(key, key_path)?;
        if dnskey.owner != *domain {
            return Err(KeyError::WrongOwner {
                owner: dnskey.owner,
                domain: domain.clone(),
            });
        }
        if dnskey.flags & 0x0100 == 0 || dnskey.protocol != 3 {
            return Err(KeyError::NotZoneKey {
                flags: dnskey.flags,
                protocol: dnskey.protocol,
            });
        }
        let fields = PrivateFields::parse(private);
        let field = |name: &'static str| {
            fields.get(name).ok_or_else(|| KeyError::Field {
                path: private_path.to_path_buf(),
                field: name,
            })
        };
        let private_algorithm = fields
            .text("Algorithm")
            .and_then(|v| v.split_whitespace().next())
            .and_then(|n| n.parse::<u8>().ok())
            .ok_or_else(|| KeyError::Field {
                path: private_path.to_path_buf(),
                field: "Algorithm",
            })?;
        if private_algorithm != dnskey.algorithm {
            return Err(KeyError::AlgorithmMismatch {
                path: private_path.to_path_buf(),
                private: private_algorithm,
                public: dnskey.algorithm,
            });
        }
        let mismatch = || KeyError::Mismatch {
            path: private_path.to_path_buf(),
        };
        let rng = SystemRandom::new();
        let pair = match dnskey.algorithm {
            algorithm::RSASHA256 => {
                let parts = [
                    "Modulus",
                    "PublicExponent",
                    "PrivateExponent",
                    "Prime1",
                    "Prime2",
                    "Exponent1",
                    "Exponent2",
                    "Coefficient",
                ]
                .map(field);
                let [n, e, d, p, q, dp, dq, qi] = parts;
                let der = rsa_der(&[&n?, &e?, &d?, &p?, &q?, &dp?, &dq?, &qi?]);
                let pair = RsaKeyPair::from_der(&der).map_err(|_| mismatch())?;
                if rsa_public(pair.public().as_ref()).as_deref() != Some(&dnskey.public[..]) {
                    return Err(mismatch());
                }
                Pair::Rsa(pair)
            }
            algorithm::ECDSAP256SHA256 => {
                let scalar = field("PrivateKey")?;
                let mut point = Vec::with_capacity(65);
                point.push(4);
                point.extend_from_slice(&dnskey.public);
                let pair = EcdsaKeyPair::from_private_key_and_public_key(
                    &ECDSA_P256_SHA256_FIXED_SIGNING,
                    &scalar,
                    &point,
                    &rng,
                )
                .map_err(|_| mismatch())?;
                Pair::Ecdsa(pair)
            }
            algorithm::ED25519 => {
                let seed = field("PrivateKey")?;
                let pair = Ed25519KeyPair::from_seed_and_public_key(&seed, &dnskey.public).map_err(|_| mismatch())?;
                Pair::Ed25519(pair)
            }
            other => return Err(KeyError::Algorithm(other)),
        };
        let mut key = SigningKey {
            owner: dnskey.owner,
            flags: dnskey.flags,
            algorithm: dnskey.algorithm,
            public: dnskey.public,
            tag: 0,
            pair,
            rng,
        };
        key.tag = key_tag(&key.dnskey_rdata());
        Ok(key)
    }

    /// The zone the key signs: the DNSKEY's owner.
    pub fn owner(&self) -> &Name {
        &self.owner
    }

    /// The algorithm number.
    pub fn algorithm(&self) -> u8 {
        self.algorithm
    }

    /// The key tag RRSIGs name the key by (RFC 4034 Appendix B).
    pub fn tag(&self) -> u16 {
        self.tag
    }

    /// The DNSKEY's RDATA: flags, protocol 3, algorithm, public key.
    pub fn dnskey_rdata(&self) -> Vec<u8> {
        let mut rdata = Vec::with_capacity(4 + self.public.len());
        rdata.extend_from_slice(&self.flags.to_be_bytes());
        rdata.push(3);
        rdata.push(self.algorithm);
        rdata.extend_from_slice(&self.public);
        rdata
    }

    /// The DNSKEY in zone-file form, as a trust anchor or a DS is made from.
    pub fn dnskey_text(&self, ttl: u32) -> String {
        format!(
            "{} {ttl} IN DNSKEY {} 3 {} {}",
            self.owner,
            self.flags,
            self.algorithm,
            base64::encode(&self.public)
        )
    }

    /// Signs `data`; `None` only if the cryptographic library fails, which a valid key does
    /// not.
    pub fn sign(&self, data: &[u8]) -> Option<Vec<u8>> {
        match &self.pair {
            Pair::Rsa(pair) => {
                let mut signature = vec![0; pair.public().modulus_len()];
                pair.sign(&RSA_PKCS1_SHA256, &self.rng, data, &mut signature).ok()?;
                Some(signature)
            }
            Pair::Ecdsa(pair) => Some(pair.sign(&self.rng, data).ok()?.as_ref().to_vec()),
            Pair::Ed25519(pair) => Some(pair.sign(data).as_ref().to_vec()),
        }
    }
}

/// The class of the records signed: every zone skyline signs is IN.
pub(super) const CLASS: u16 = class::IN;

/// RFC 4034 Appendix B: the key tag of a DNSKEY's RDATA.
pub fn key_tag(rdata: &[u8]) -> u16 {
    let mut acc: u32 = 0;
    for (i, &b) in rdata.iter().enumerate() {
        acc += if i & 1 == 0 { u32::from(b) << 8 } else { u32::from(b) };
    }
    acc += (acc >> 16) & 0xFFFF;
    (acc & 0xFFFF) as u16
}

/// The DNSKEY record of a `.key` file.
struct Dnskey {
    owner: Name,
    flags: u16,
    protocol: u8,
    algorithm: u8,
    public: Box<[u8]>,
}

impl Dnskey {
    fn parse(text: &str, path: &Path) -> Result<Dnskey, KeyError> {
        let bad = |why| KeyError::BadDnskey {
            path: path.to_path_buf(),
            why,
        };
        let lines: Vec<&str> = text
            .lines()
            .map(|line| line.split(';').next().unwrap_or_default())
            .collect();
        let first = lines
            .iter()
            .position(|line| line.split_whitespace().any(|t| t.eq_ignore_ascii_case("DNSKEY")))
            .ok_or_else(|| KeyError::NoDnskey(path.to_path_buf()))?;
        // A record may run over several lines inside parentheses.
        let mut record = String::new();
        for line in &lines[first..] {
            record.push(' ');
            record.push_str(line);
            if record.matches('(').count() <= record.matches(')').count() {
                break;
            }
        }
        let spaced = record.replace(['(', ')'], " ");
        let tokens: Vec<&str> = spaced.split_whitespace().collect();
        let at = tokens
            .iter()
            .position(|t| t.eq_ignore_ascii_case("DNSKEY"))
            .ok_or_else(|| bad("no DNSKEY type"))?;
        let owner = tokens.first().filter(|_| at > 0).ok_or_else(|| bad("no owner"))?;
        let owner = Name::from_dotted(owner).map_err(|_| bad("the owner is not a name"))?;
        let rest = &tokens[at + 1..];
        let [flags, protocol, algorithm, key @ ..] = rest else {
            return Err(bad("too few fields"));
        };
        let flags = flags.parse().map_err(|_| bad("flags"))?;
        let protocol = protocol.parse().map_err(|_| bad("protocol"))?;
        let algorithm = algorithm.parse().map_err(|_| bad("algorithm"))?;
        let public = base64::decode(&key.concat()).ok_or_else(|| bad("public key is not base64"))?;
        if public.is_empty() {
            return Err(bad("empty public key"));
        }
        Ok(Dnskey {
            owner,
            flags,
            protocol,
            algorithm,
            public: public.into_boxed_slice(),
        })
    }
}

/// The `Field: value` lines of a `.private` file.
struct PrivateFields<'a>(Vec<(&'a str, &'a str)>);

impl<'a> PrivateFields<'a> {
    fn parse(text: &'a str) -> PrivateFields<'a> {
        PrivateFields(
            text.lines()
                .filter_map(|line| line.split_once(':'))
                .map(|(k, v)| (k.trim(), v.trim()))
                .collect(),
        )
    }

    fn text(&self, name: &str) -> Option<&'a str> {
        self.0
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| *v)
    }

    /// A base64 field, decoded; `None` when missing, malformed or empty.
    fn get(&self, name: &str) -> Option<Zeroed> {
        base64::decode(self.text(name)?).filter(|v| !v.is_empty()).map(Zeroed)
    }
}

/// Key material that is overwritten when dropped.
struct Zeroed(Vec<u8>);

impl std::ops::Deref for Zeroed {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.0
    }
}

impl Drop for Zeroed {
    fn drop(&mut self) {
        self.0.iter_mut().for_each(|b| *b = 0);
    }
}

/// PKCS#1 `RSAPrivateKey` DER (RFC 8017 Appendix A.1.2) of the integers of a BIND RSA key, in
/// the order of the structure after its version.
fn rsa_der(integers: &[&[u8]; 8]) -> Zeroed {
    let mut body = Vec::new();
    der_integer(&mut body, &[0]);
    for integer in integers {
        der_integer(&mut body, integer);
    }
    let mut der = Vec::with_capacity(body.len() + 4);
    der.push(0x30);
    der_length(&mut der, body.len());
    der.extend_from_slice(&body);
    body.iter_mut().for_each(|b| *b = 0);
    Zeroed(der)
}

fn der_integer(out: &mut Vec<u8>, big_endian: &[u8]) {
    let start = big_endian
        .iter()
        .position(|&b| b != 0)
        .unwrap_or(big_endian.len().saturating_sub(1));
    let digits = &big_endian[start..];
    let pad = digits.first().is_some_and(|&b| b & 0x80 != 0);
    out.push(0x02);
    der_length(out, digits.len() + usize::from(pad));
    if pad {
        out.push(0);
    }
    out.extend_from_slice(digits);
}

fn der_length(out: &mut Vec<u8>, len: usize) {
    match len {
        0..=0x7F => out.push(len as u8),
        0x80..=0xFF => out.extend_from_slice(&[0x81, len as u8]),
        _ => {
            out.push(0x82);
            out.extend_from_slice(&(len as u16).to_be_bytes());
        }
    }
}

/// The RFC 3110 form of an RSA public key (exponent length, exponent, modulus) from the
/// PKCS#1 `RSAPublicKey` DER ring gives.
fn rsa_public(der: &[u8]) -> Option<Vec<u8>> {
    let (body, _) = der_read(der, 0x30)?;
    let (modulus, rest) = der_read(body, 0x02)?;
    let (exponent, _) = der_read(rest, 0x02)?;
    let strip = |v: &[u8]| v.iter().position(|&b| b != 0).map_or(Vec::new(), |i| v[i..].to_vec());
    let (modulus, exponent) = (strip(modulus), strip(exponent));
    let mut out = Vec::with_capacity(3 + exponent.len() + modulus.len());
    match u8::try_from(exponent.len()) {
        Ok(len) if len > 0 => out.push(len),
        _ => {
            out.push(0);
            out.extend_from_slice(&(exponent.len() as u16).to_be_bytes());
        }
    }
    out.extend_from_slice(&exponent);
    out.extend_from_slice(&modulus);
    Some(out)
}

/// One DER element of `tag` at the start of `der`: its contents and what follows it.
fn der_read(der: &[u8], tag: u8) -> Option<(&[u8], &[u8])> {
    let (&first, rest) = der.split_first()?;
    if first != tag {
        return None;
    }
    let (&len0, rest) = rest.split_first()?;
    let (len, rest) = match len0 {
        0..=0x7F => (usize::from(len0), rest),
        0x81 => (usize::from(*rest.first()?), &rest[1..]),
        0x82 => (
            usize::from(u16::from_be_bytes([*rest.first()?, *rest.get(1)?])),
            rest.get(2..)?,
        ),
        _ => return None,
    };
    Some((rest.get(..len)?, rest.get(len..)?))
}
