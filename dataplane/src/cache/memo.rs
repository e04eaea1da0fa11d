//! What a served entry remembers of the reply it made for one exact query, so that the same
//! query asked again is answered by copying: the header and OPT of that reply, around the
//! client's own question and the entry's records with their TTLs counted down
//! (`forward/replay.rs` makes and replays memos; ARCHITECTURE.md, "A cache miss, to the upstream
//! and back").
//!
//! A memo holds only for a query of the plain shape most clients send (one question, nothing
//! else but an OPT without options), over UDP, and only while the snapshot and the forwarding
//! plan it was made under are in force: its `stamp` says which.

use crate::reply::Reply;

/// Bytes of an OPT record without options, the one record a plain query may carry.
pub const PLAIN_OPT_LEN: usize = 11;

/// The parts of a query a memo is kept for: its flags and counts (bytes 2 to 12), and its OPT
/// record as sent, if any. The question is the entry's key; the ID differs from query to query
/// and is copied. Packed in three words, compared at every replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Asked([u64; 3]);

impl Asked {
    /// The query with the header after the ID `header` and, when it has one, the OPT record
    /// `opt`.
    #[inline(always)]
    pub fn new(header: &[u8; 10], opt: Option<&[u8; PLAIN_OPT_LEN]>) -> Asked {
        let mut bytes = [0u8; 24];
        bytes[..10].copy_from_slice(header);
        if let Some(opt) = opt {
            bytes[10..10 + PLAIN_OPT_LEN].copy_from_slice(opt);
            bytes[23] = 1;
        }
        Asked([0, 8, 16].map(|at| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("eight bytes"))))
    }

    /// Whether the query ends with an OPT record (and its reply with one of its own).
    #[inline(always)]
    pub fn opt(&self) -> bool {
        self.0[2] >> 56 != 0
    }
}

/// The reply a served entry made for one [`Asked`] query, less what each query brings (the ID,
/// the question as spelled) and what each moment changes (the records' TTLs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Memo {
    /// The snapshot and forwarding plan the reply was made under (`forward/replay.rs`).
    pub stamp: u64,
    /// The query it answers.
    pub asked: Asked,
    /// The reply's header after the ID.
    pub header: [u8; 10],
    /// The reply's OPT record, when the query had one.
    pub opt_record: [u8; PLAIN_OPT_LEN],
    /// The facts of the reply: its length, response code and question.
    pub reply: Reply,
}

/// Fewest bits a [`Filter`] has.
const MIN_FILTER_BITS: usize = 4096;
/// Bits a [`Filter`] is given per memo when it is rebuilt.
const FILTER_BITS_PER_MEMO: usize = 32;

/// Which names may have a memo: one bit per name hash (a Bloom filter with one hash). A query
/// asks it before it looks for a memo, so that a name answered from the zones, which has none,
/// pays a bit test rather than a probe of the cache's index. A bit stays set when its memo
/// goes (a name that finds it set only probes for nothing); the filter is rebuilt from the
/// memos held, at 32 bits per memo, once the names noted since it was built reach an eighth of
/// its bits, which keeps the share of bits set, and so of names probed in vain, near 1 in 8.
#[derive(Debug)]
pub(super) struct Filter {
    words: Box<[u64]>,
    /// How far a name hash is shifted to leave a bit's index: its top bits, which are
    /// independent of the cache index's (`Cache::hash` mixes in a secret).
    shift: u32,
    /// Names noted since the filter was last built.
    noted: usize,
}

impl Default for Filter {
    fn default() -> Filter {
        Filter::with_bits(MIN_FILTER_BITS)
    }
}

impl Filter {
    fn with_bits(bits: usize) -> Filter {
        let bits = bits.next_power_of_two();
        Filter {
            words: vec![0; bits / 64].into_boxed_slice(),
            shift: 64 - bits.trailing_zeros(),
            noted: 0,
        }
    }

    /// The index of `name_hash`'s bit.
    #[inline(always)]
    fn bit(&self, name_hash: u64) -> usize {
        (name_hash >> self.shift) as usize
    }

    /// Whether a name with hash `name_hash` may have a memo.
    #[inline(always)]
    pub(super) fn may_hold(&self, name_hash: u64) -> bool {
        let bit = self.bit(name_hash);
        self.words.get(bit / 64).is_some_and(|word| word >> (bit % 64) & 1 != 0)
    }

    /// Notes that a name with hash `name_hash` has a memo; whether the filter should now be
    /// rebuilt (see [`Filter::rebuilt`]).
    pub(super) fn note(&mut self, name_hash: u64) -> bool {
        let bit = self.bit(name_hash);
        if let Some(word) = self.words.get_mut(bit / 64) {
            *word |= 1 << (bit % 64);
        }
        self.noted += 1;
        self.noted * 8 > self.words.len() * 64
    }

    /// A filter for `memos` memos, the names of which `names` gives.
    pub(super) fn rebuilt(memos: usize, names: impl Iterator<Item = u64>) -> Filter {
        let mut filter = Filter::with_bits((memos * FILTER_BITS_PER_MEMO).max(MIN_FILTER_BITS));
        for name_hash in names {
            filter.note(name_hash);
        }
        filter.noted = 0;
        filter
    }
}
