//! Making text from a log safe to show: characters a terminal or viewer
//! acts on, characters that are invisible, and characters XML 1.0 forbids
//! become visible escapes. Every report format shows log text through
//! [`visible`], so one list decides what no report carries raw.

use std::borrow::Cow;

/// Whether `c` must not reach a display as it is: a control character (C0,
/// DEL, C1), a bidi control or line separator, which could move the cursor,
/// recolor, retitle or reorder what is shown; or an invisible character
/// (zero-width space and joiners, soft hyphen, byte order mark, fillers,
/// variation selectors, tags), which would let two different ids look the
/// same; or a noncharacter (U+FDD0..U+FDEF, and the last two code points
/// of every plane), among them U+FFFE and U+FFFF, which XML 1.0 forbids as
/// it forbids C0 controls (surrogates cannot occur in a Rust string).
pub fn hidden(c: char) -> bool {
    c.is_control()
        || noncharacter(c)
        || matches!(
            c,
            '\u{00ad}'
                | '\u{034f}'
                | '\u{061c}'
                | '\u{115f}'
                | '\u{1160}'
                | '\u{17b4}'
                | '\u{17b5}'
                | '\u{3164}'
                | '\u{feff}'
                | '\u{ffa0}'
        )
        || ('\u{180b}'..='\u{180f}').contains(&c)
        || ('\u{200b}'..='\u{200f}').contains(&c)
        || ('\u{2028}'..='\u{202e}').contains(&c)
        || ('\u{2060}'..='\u{206f}').contains(&c)
        || ('\u{fe00}'..='\u{fe0f}').contains(&c)
        || ('\u{fff0}'..='\u{fff8}').contains(&c)
        || ('\u{1d173}'..='\u{1d17a}').contains(&c)
        || ('\u{e0000}'..='\u{e0fff}').contains(&c)
}

/// U+FDD0..U+FDEF and U+nFFFE, U+nFFFF of every plane: code points Unicode
/// keeps for a program's own use, never for interchange.
fn noncharacter(c: char) -> bool {
    ('\u{fdd0}'..='\u{fdef}').contains(&c) || (c as u32) & 0xfffe == 0xfffe
}

/// `s` with every [`hidden`] character as a visible escape: `\n`, `\r`,
/// `\t`, `\xNN` below U+0100, `\u{NNNN}` above.
pub fn visible(s: &str) -> Cow<'_, str> {
    if !s.chars().any(hidden) {
        return s.into();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        push_visible(&mut out, c);
    }
    out.into()
}

/// Push `c`, escaped if it is [`hidden`].
pub fn push_visible(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if hidden(c) && (c as u32) < 0x100 => out.push_str(&format!("\\x{:02x}", c as u32)),
        c if hidden(c) => out.push_str(&format!("\\u{{{:04x}}}", c as u32)),
        c => out.push(c),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        // Letters of every script stay as they are.
        assert_eq!(visible("タスク_1 задача é"), "タスク_1 задача é");
    }
}
