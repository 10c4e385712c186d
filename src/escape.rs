//! Making text from a log safe to show: characters a terminal or viewer
//! acts on, characters that are invisible, and characters XML 1.0 forbids
//! become visible escapes. Every report format shows log text through
//! [`visible`], so one list decides what no report carries raw.

use std::borrow::Cow;

/// Whether `c` must not reach a display as it is: a control character (C0,
/// DEL, C1), a bidi control or line or paragraph separator, which could
/// move the cursor, recolor, retitle or reorder what is shown; or a
/// Default_Ignorable_Code_Point (zero-width space and joiners, soft hyphen,
/// byte order mark, fillers, variation selectors, tags, shorthand format
/// controls, ...), which a display draws as nothing and so would let two
/// different ids look the same; or a noncharacter (U+FDD0..U+FDEF, and the
/// last two code points of every plane), among them U+FFFE and U+FFFF,
/// which XML 1.0 forbids as it forbids C0 controls (surrogates cannot occur
/// in a Rust string). The invisible and bidi sets come from the Unicode
/// character database (`icu_properties`), not from a list kept by hand.
pub fn hidden(c: char) -> bool {
    use icu_properties::CodePointSetData;
    use icu_properties::props::{BidiControl, DefaultIgnorableCodePoint};
    if c.is_ascii() {
        return c.is_ascii_control();
    }
    c.is_control()
        || noncharacter(c)
        || matches!(c, '\u{2028}' | '\u{2029}')
        || CodePointSetData::new::<DefaultIgnorableCodePoint>().contains(c)
        || CodePointSetData::new::<BidiControl>().contains(c)
}

/// U+FDD0..U+FDEF and U+nFFFE, U+nFFFF of every plane: code points Unicode
/// keeps for a program's own use, never for interchange.
fn noncharacter(c: char) -> bool {
    ('\u{fdd0}'..='\u{fdef}').contains(&c) || (c as u32) & 0xfffe == 0xfffe
}

/// `s` with every [`hidden`] character as a visible escape: `\n`, `\r`,
/// `\t`, `\xNN` below U+0100, `\u{NNNN}` above; and the backslash itself
/// as `\\`, so that the text `\u{200b}` typed out never shows as a real
/// U+200B does.
pub fn visible(s: &str) -> Cow<'_, str> {
    escaped(s, true)
}

/// Values from a log longer than this many characters (an id, a type, an
/// agent) are cut where a person reads them: a value has no length limit,
/// and a report repeats it for every finding that cites it.
pub const SHOWN_VALUE_CHARS: usize = 80;

/// A value from a log (an id, a type, a task) as the reports people read
/// show it: [`visible`], and past [`SHOWN_VALUE_CHARS`] characters only the
/// first half of them, the length and the start of the value's BLAKE3 (two
/// long ids with one beginning must not read as one), as the rules'
/// `log_value` helper cuts it in messages. Machine formats (JSON, SARIF)
/// keep the whole value.
pub fn log_value(s: &str) -> Cow<'_, str> {
    if s.char_indices().nth(SHOWN_VALUE_CHARS).is_none() {
        return visible(s);
    }
    let cut = s
        .char_indices()
        .nth(SHOWN_VALUE_CHARS / 2)
        .map_or(s.len(), |(i, _)| i);
    let length = s.chars().count();
    let hash = blake3::hash(s.as_bytes()).to_hex();
    format!(
        "{}…[{length} characters, blake3 {}]",
        visible(&s[..cut]),
        &hash[..16]
    )
    .into()
}

/// `s` with every [`hidden`] character escaped as [`visible`] does, but the
/// backslash left as it is: for text that already holds escapes (a path as
/// `shown_path` gives it, a message or error naming one), which a second
/// [`visible`] would show with every backslash doubled. Text read from a
/// log (ids, messages) goes through [`visible`], so that an escape typed
/// into it stays distinct from the character it names.
pub fn hidden_escaped(s: &str) -> Cow<'_, str> {
    escaped(s, false)
}

/// [`visible`], or [`hidden_escaped`] when `backslash` is false.
fn escaped(s: &str, backslash: bool) -> Cow<'_, str> {
    if !s.chars().any(|c| (backslash && c == '\\') || hidden(c)) {
        return s.into();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\\' if !backslash => out.push(c),
            c => push_visible(&mut out, c),
        }
    }
    out.into()
}

/// Multi-line text (an explanation, a parser's error with the line it
/// quotes): each line as [`hidden_escaped`], the line breaks kept.
pub fn visible_lines(s: &str) -> String {
    s.split('\n')
        .map(hidden_escaped)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Push `c`, escaped if it is [`hidden`] or a backslash.
pub fn push_visible(out: &mut String, c: char) {
    match c {
        '\\' => out.push_str("\\\\"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if !hidden(c) => out.push(c),
        c if (c as u32) < 0x100 => out.push_str(&format!("\\x{:02x}", c as u32)),
        c => out.push_str(&format!("\\u{{{:04x}}}", c as u32)),
    }
}

/// A path as reports and messages show it: UTF-8 as it is, with hidden
/// characters (`crate::escape`), bytes that are not UTF-8 and the backslash
/// itself escaped (`\n`, `\x1b`, `\xff`, `\\`), so that a name can neither
/// drive a terminal nor pass for another name.
pub fn shown_path(path: &std::path::Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_os_str().as_bytes();
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            push_visible(&mut out, c);
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out
}

/// Why an id from a log may be taken for another, if it may: it is not in
/// NFKC (a decomposed é beside a composed one, a full-width letter), or it
/// mixes scripts (a Cyrillic а among Latin letters; Han and the Japanese
/// and Korean scripts written with it count as one). Such ids stay
/// distinct events; this says so to the reader, with the code points that
/// tell them apart (the first eight that are not ASCII).
pub fn look_alike(id: &str) -> Option<String> {
    use icu_properties::CodePointMapData;
    use icu_properties::props::Script;
    if id.is_ascii() {
        return None;
    }
    let scripts = CodePointMapData::<Script>::new();
    let mut seen: Vec<Script> = Vec::new();
    for c in id.chars() {
        let script = match scripts.get(c) {
            Script::Common | Script::Inherited | Script::Unknown => continue,
            Script::Hiragana | Script::Katakana | Script::Bopomofo | Script::Hangul => Script::Han,
            other => other,
        };
        if !seen.contains(&script) {
            seen.push(script);
        }
    }
    let mut why = Vec::new();
    if !icu_normalizer::ComposingNormalizerBorrowed::new_nfkc().is_normalized(id) {
        why.push("not in NFKC");
    }
    if seen.len() > 1 {
        why.push("mixes scripts");
    }
    if why.is_empty() {
        return None;
    }
    const SHOWN: usize = 8;
    let wide: Vec<char> = id.chars().filter(|c| !c.is_ascii()).collect();
    let mut points: Vec<String> = wide
        .iter()
        .take(SHOWN)
        .map(|c| format!("U+{:04X}", *c as u32))
        .collect();
    if wide.len() > SHOWN {
        points.push("…".into());
    }
    Some(format!(
        "look-alike: {}; {}",
        why.join(", "),
        points.join(" ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_values_are_cut_to_their_start_length_and_hash() {
        let whole = "é".repeat(SHOWN_VALUE_CHARS);
        assert_eq!(
            log_value(&whole),
            whole.as_str(),
            "80 characters, 160 bytes"
        );
        let long = format!("\u{1b}{}", "é".repeat(SHOWN_VALUE_CHARS));
        let hash = blake3::hash(long.as_bytes()).to_hex();
        assert_eq!(
            log_value(&long),
            format!(
                "\\x1b{}…[81 characters, blake3 {}]",
                "é".repeat(39),
                &hash[..16]
            )
        );
        let (a, b) = ("a".repeat(100) + "1", "a".repeat(100) + "2");
        assert_ne!(log_value(&a), log_value(&b));
    }

    #[test]
    fn ids_that_read_as_others_are_marked_and_plain_ones_are_not() {
        for plain in [
            "task_a",
            "café",
            "задача",
            "タスク漢字",
            "ｔ".repeat(0).as_str(),
            "a-b_c:1",
        ] {
            assert_eq!(look_alike(plain), None, "{plain}");
        }
        let marked = |id: &str| look_alike(id).unwrap_or_default();
        assert!(marked("task_\u{430}").contains("mixes scripts; U+0430"));
        assert!(marked("cafe\u{301}").contains("not in NFKC; U+0301"));
        assert!(marked("\u{ff54}ask").contains("not in NFKC; U+FF54"));
        assert!(marked(&"\u{430}x".repeat(20)).ends_with("U+0430 …"));
    }

    #[test]
    fn look_alike_ids_are_told_apart() {
        let ids = [
            "task_1",
            "task\u{200b}_1",
            "task\u{00ad}_1",
            "task\u{feff}_1",
            "task\u{2060}_1",
        ];
        let shown: std::collections::BTreeSet<String> =
            ids.iter().map(|i| visible(i).into_owned()).collect();
        assert_eq!(shown.len(), ids.len(), "{shown:?}");
        assert_eq!(visible("task\u{200b}_1"), "task\\u{200b}_1");
        assert_eq!(visible("plain id"), "plain id");
    }

    #[test]
    fn terminal_controls_and_bidi_are_escaped() {
        assert_eq!(visible("a\u{1b}]8;;x\u{7}b"), "a\\x1b]8;;x\\x07b");
        assert_eq!(visible("\u{202e}txt"), "\\u{202e}txt");
        assert_eq!(visible("x\ny"), "x\\ny");
        // XML 1.0 forbids these; other noncharacters are escaped with them.
        assert_eq!(visible("a\u{fffe}\u{ffff}b"), "a\\u{fffe}\\u{ffff}b");
        assert_eq!(
            visible("\u{fdd0}\u{1fffe}\u{10ffff}"),
            "\\u{fdd0}\\u{1fffe}\\u{10ffff}"
        );
        assert_eq!(visible("\u{7f}\u{85}\u{9f}"), "\\x7f\\x85\\x9f");
        // The shorthand format controls draw as nothing.
        assert_eq!(visible("a\u{1bca0}\u{1bca3}b"), "a\\u{1bca0}\\u{1bca3}b");
        // Letters of every script stay as they are.
        assert_eq!(visible("タスク_1 задача é"), "タスク_1 задача é");
    }

    #[test]
    fn an_escape_typed_out_is_not_the_character_it_names() {
        let real = visible("task\u{200b}_1").into_owned();
        let typed = visible("task\\u{200b}_1").into_owned();
        assert_ne!(real, typed);
        assert_eq!(typed, "task\\\\u{200b}_1");
        assert_ne!(visible("\u{1b}"), visible("\\x1b"));
        assert_eq!(visible("a\\b"), "a\\\\b");
    }

    #[test]
    fn text_already_shown_is_not_escaped_twice() {
        let shown = visible("dir\\a\u{1b}b").into_owned();
        assert_eq!(shown, "dir\\\\a\\x1bb");
        assert_eq!(hidden_escaped(&shown), shown);
        assert_eq!(hidden_escaped("a\u{1b}\\b"), "a\\x1b\\b");
    }

    #[test]
    fn every_character_the_former_hand_list_held_is_still_hidden() {
        let ranges = [
            ('\u{00ad}', '\u{00ad}'),
            ('\u{034f}', '\u{034f}'),
            ('\u{061c}', '\u{061c}'),
            ('\u{115f}', '\u{1160}'),
            ('\u{17b4}', '\u{17b5}'),
            ('\u{180b}', '\u{180f}'),
            ('\u{200b}', '\u{200f}'),
            ('\u{2028}', '\u{202e}'),
            ('\u{2060}', '\u{206f}'),
            ('\u{3164}', '\u{3164}'),
            ('\u{fe00}', '\u{fe0f}'),
            ('\u{feff}', '\u{feff}'),
            ('\u{ffa0}', '\u{ffa0}'),
            ('\u{fff0}', '\u{fff8}'),
            ('\u{1d173}', '\u{1d17a}'),
            ('\u{e0000}', '\u{e0fff}'),
        ];
        for (first, last) in ranges {
            for c in first..=last {
                assert!(hidden(c), "U+{:04X}", c as u32);
            }
        }
        for c in ['a', ' ', '~', 'é', 'я', 'タ', '\u{2067}'] {
            assert_eq!(hidden(c), c == '\u{2067}', "U+{:04X}", c as u32);
        }
    }
}
