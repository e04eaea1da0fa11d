//! Copying the short runs of bytes a reply is made of.

/// Copies `src` to the start of `dst`, which must be at least as long. Most copies on the
/// answer path are a question, a compiled record or a cached answer of a few dozen bytes, for
/// which a call to `memcpy` cost more than the copy: up to 32 bytes are copied inline, as
/// overlapping words; longer runs go to `copy_from_slice`.
#[inline(always)]
pub fn copy_short(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    let dst = &mut dst[..n];
    match n {
        0 => {}
        1..=3 => {
            dst[0] = src[0];
            dst[n / 2] = src[n / 2];
            dst[n - 1] = src[n - 1];
        }
        4..=7 => {
            dst[..4].copy_from_slice(&src[..4]);
            dst[n - 4..].copy_from_slice(&src[n - 4..]);
        }
        8..=16 => {
            dst[..8].copy_from_slice(&src[..8]);
            dst[n - 8..].copy_from_slice(&src[n - 8..]);
        }
        17..=32 => {
            dst[..16].copy_from_slice(&src[..16]);
            dst[n - 16..].copy_from_slice(&src[n - 16..]);
        }
        _ => dst.copy_from_slice(src),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_length_is_copied_exactly_and_nothing_past_it() {
        let src: Vec<u8> = (1..=80).collect();
        for n in 0..=80 {
            let mut dst = [0u8; 96];
            copy_short(&mut dst, &src[..n]);
            assert_eq!(&dst[..n], &src[..n], "length {n}");
            assert!(dst[n..].iter().all(|&b| b == 0), "length {n} wrote past its end");
        }
    }

    #[test]
    #[should_panic]
    fn a_destination_too_short_panics_rather_than_writing_less() {
        copy_short(&mut [0u8; 4], &[1, 2, 3, 4, 5]);
    }
}
