//! Unicode's default-ignorable code points (`Default_Ignorable_Code_Point` in
//! `DerivedCoreProperties.txt`, Unicode 15.1): characters that show nothing where they
//! are not supported, so that two strings that look alike differ by them. Adjacent
//! ranges of the file are merged here.

/// The ranges, in order.
const RANGES: &[(u32, u32)] = &[
    (0x00AD, 0x00AD),   // soft hyphen
    (0x034F, 0x034F),   // combining grapheme joiner
    (0x061C, 0x061C),   // Arabic letter mark
    (0x115F, 0x1160),   // Hangul choseong and jungseong fillers
    (0x17B4, 0x17B5),   // Khmer inherent vowels
    (0x180B, 0x180F),   // Mongolian variation selectors and vowel separator
    (0x200B, 0x200F),   // zero-width space, joiners, direction marks
    (0x202A, 0x202E),   // direction embeddings and overrides
    (0x2060, 0x206F),   // word joiner, invisible operators, isolates, deprecated formats
    (0x3164, 0x3164),   // Hangul filler
    (0xFE00, 0xFE0F),   // variation selectors 1-16
    (0xFEFF, 0xFEFF),   // zero-width no-break space (byte-order mark)
    (0xFFA0, 0xFFA0),   // halfwidth Hangul filler
    (0xFFF0, 0xFFF8),   // reserved
    (0x1BCA0, 0x1BCA3), // shorthand format controls
    (0x1D173, 0x1D17A), // musical symbol beam and phrase controls
    (0xE0000, 0xE0FFF), // tags, variation selectors 17-256, reserved
];

/// Whether `c` is a default-ignorable code point.
pub(crate) fn is_default_ignorable(c: char) -> bool {
    let c = u32::from(c);
    RANGES
        .binary_search_by(|&(first, last)| {
            if last < c {
                std::cmp::Ordering::Less
            } else if first > c {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        })
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ranges_are_sorted_and_apart() {
        assert!(RANGES.windows(2).all(|w| w[0].1 + 1 < w[1].0));
        assert!(RANGES.iter().all(|(first, last)| first <= last));
    }

    #[test]
    fn invisible_characters_are_found_and_visible_ones_not() {
        for c in [
            '\u{ad}',
            '\u{34f}',
            '\u{115f}',
            '\u{180e}',
            '\u{200b}',
            '\u{200d}',
            '\u{202e}',
            '\u{2064}',
            '\u{3164}',
            '\u{fe0f}',
            '\u{feff}',
            '\u{ffa0}',
            '\u{1d173}',
            '\u{e0001}',
            '\u{e0100}',
            '\u{e0fff}',
        ] {
            assert!(is_default_ignorable(c), "{:04X}", u32::from(c));
        }
        for c in [
            'a',
            '@',
            '.',
            '\u{e9}',
            '\u{ff41}',
            '\u{3163}',
            '\u{1100}',
            '\u{1f600}',
            '\u{e1000}',
        ] {
            assert!(!is_default_ignorable(c), "{:04X}", u32::from(c));
        }
    }
}
