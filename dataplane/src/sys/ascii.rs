//! ASCII lower case of sixteen bytes at once, in the CPU's vector registers where it has them.
//!
//! Every query's name is lower-cased before it is looked up. Written as a loop over bytes, the
//! compiler vectorised the lower-casing but then rebuilt each 64-bit word byte by byte for the
//! hash that follows, at three times the cost of the old word-at-a-time arithmetic; the
//! instructions themselves take six.

/// `chunk` with the bytes in `A..=Z` lower-cased, as its two little-endian halves.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub fn lower16(chunk: &[u8; 16]) -> [u64; 2] {
    use std::arch::x86_64::{
        _mm_and_si128, _mm_cmpeq_epi8, _mm_cvtsi128_si64, _mm_loadu_si128, _mm_min_epu8, _mm_or_si128, _mm_set1_epi8,
        _mm_sub_epi8, _mm_unpackhi_epi64,
    };
    // SAFETY: SSE2 is part of the x86_64 baseline, so every machine this code runs on has these
    // instructions; the unaligned load reads exactly the sixteen bytes `chunk` borrows.
    unsafe {
        let bytes = _mm_loadu_si128(chunk.as_ptr().cast());
        let from_a = _mm_sub_epi8(bytes, _mm_set1_epi8(b'A' as i8));
        // `from_a` as unsigned bytes is below 26 exactly for the upper-case letters.
        let upper = _mm_cmpeq_epi8(_mm_min_epu8(from_a, _mm_set1_epi8(25)), from_a);
        let lower = _mm_or_si128(bytes, _mm_and_si128(upper, _mm_set1_epi8(0x20)));
        [
            _mm_cvtsi128_si64(lower) as u64,
            _mm_cvtsi128_si64(_mm_unpackhi_epi64(lower, lower)) as u64,
        ]
    }
}

/// `chunk` with the bytes in `A..=Z` lower-cased, as its two little-endian halves: eight bytes
/// at a time in general-purpose registers, where there are no vector instructions to use.
#[cfg(any(not(target_arch = "x86_64"), test))]
#[inline(always)]
pub fn lower16_words(chunk: &[u8; 16]) -> [u64; 2] {
    let half = |at: usize| {
        let word = u64::from_le_bytes(chunk[at..at + 8].try_into().expect("eight bytes"));
        const ONES: u64 = 0x0101_0101_0101_0101;
        // A byte gets bit 0x20 when it lies in `A..=Z`; adding to each byte's low seven bits
        // never carries into the next byte.
        let low7 = word & (0x7F * ONES);
        let at_least_a = low7 + (0x3F * ONES);
        let beyond_z = low7 + (0x25 * ONES);
        let upper = at_least_a & !beyond_z & !word & (0x80 * ONES);
        word | (upper >> 2)
    };
    [half(0), half(8)]
}

#[cfg(not(target_arch = "x86_64"))]
pub use lower16_words as lower16;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_in_every_lane_lower_cases_as_one_at_a_time() {
        for b in 0..=255u8 {
            for lane in 0..16 {
                let mut chunk = *b"Q\xC1@[zA\xDAZ`{-09_\x7F\x80";
                chunk[lane] = b;
                let lowered = chunk.map(|c| c.to_ascii_lowercase());
                let expected = [
                    u64::from_le_bytes(lowered[..8].try_into().unwrap()),
                    u64::from_le_bytes(lowered[8..].try_into().unwrap()),
                ];
                assert_eq!(lower16(&chunk), expected, "byte {b:#x} in lane {lane}");
                assert_eq!(lower16_words(&chunk), expected, "byte {b:#x} in lane {lane}");
            }
        }
    }
}
