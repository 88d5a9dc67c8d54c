//! The ids of a W3C trace context: fixed-width lower-case hex, kept inline, and the
//! random ones a new trace or span gets. Apart from the context type so that what
//! makes and checks an id reads on its own.

/// An id as its `N` lower-case hex digits, inline: a context is made for every traced
/// request and every job it adds, so its ids cost no allocation and copy as bytes.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(super) struct HexId<const N: usize>([u8; N]);

impl<const N: usize> HexId<N> {
    /// The low `N` hex digits of `value`.
    pub(super) fn of(value: u128) -> Self {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let hex = |nibble: u8| DIGITS[usize::from(nibble & 0xf)];
        let mut digits = [b'0'; N];
        // Two digits a byte, from the last byte back: every request makes two ids.
        let bytes = value.to_be_bytes();
        let mut pairs = digits.rchunks_exact_mut(2);
        let mut low_first = bytes.iter().rev();
        for (pair, byte) in (&mut pairs).zip(&mut low_first) {
            pair[0] = hex(byte >> 4);
            pair[1] = hex(*byte);
        }
        // An odd width's first digit: the low nibble of the next byte.
        if let ([digit], Some(byte)) = (pairs.into_remainder(), low_first.next()) {
            *digit = hex(*byte);
        }
        HexId(digits)
    }

    /// `s` when it is exactly `N` lower-case hex digits, not all zeros.
    pub(super) fn parse_nonzero(s: &str) -> Option<Self> {
        if !nonzero_hex(s, N) {
            return None;
        }
        let mut digits = [0; N];
        digits.copy_from_slice(s.as_bytes());
        Some(HexId(digits))
    }

    pub(super) fn as_str(&self) -> &str {
        // Only ASCII hex digits are ever stored.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

/// Lower-case hex of exactly `len` characters.
pub(super) fn lower_hex(s: &str, len: usize) -> bool {
    s.len() == len
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Lower-case hex of exactly `len` characters, not all zeros.
fn nonzero_hex(s: &str, len: usize) -> bool {
    lower_hex(s, len) && s.bytes().any(|b| b != b'0')
}

/// A random non-zero id of `bits` bits, from a per-thread generator seeded once from the
/// system's randomness: ids must not collide, not be secret, and a request must not pay
/// a system call for each (OpenTelemetry's SDKs make them the same way).
pub(super) fn random_id(bits: u32) -> u128 {
    thread_local! {
        static STATE: std::cell::Cell<u64> =
            std::cell::Cell::new(uuid::Uuid::new_v4().as_u64_pair().0);
    }
    // SplitMix64: a full-period generator whose outputs pass statistical tests.
    let next = || {
        STATE.with(|state| {
            let mut z = state.get().wrapping_add(0x9e37_79b9_7f4a_7c15);
            state.set(z);
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        })
    };
    loop {
        let id = if bits > 64 {
            (u128::from(next()) << 64) | u128::from(next())
        } else {
            u128::from(next())
        };
        if id != 0 {
            return id;
        }
    }
}

/// A random span id: 16 hex digits, not all zeros.
pub(super) fn new_span_id() -> HexId<16> {
    HexId::of(random_id(64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_is_fixed_width_lower_case() {
        assert_eq!(HexId::<4>::of(0xab).as_str(), "00ab");
        assert_eq!(HexId::<3>::of(0xabcd).as_str(), "bcd");
        assert_eq!(HexId::<32>::of(u128::MAX).as_str(), "f".repeat(32));
        let value = 0x4bf9_2f35_77b3_4da6_a3ce_929d_0e0e_4736_u128;
        assert_eq!(HexId::<32>::of(value).as_str(), format!("{value:032x}"));
        assert_eq!(HexId::<16>::of(value).as_str(), "a3ce929d0e0e4736");
        assert!(HexId::<4>::parse_nonzero("0000").is_none());
        assert!(HexId::<4>::parse_nonzero("00Ab").is_none());
        assert_eq!(
            HexId::<4>::parse_nonzero("00ab").map(|h| h.0),
            Some(*b"00ab")
        );
    }
}
