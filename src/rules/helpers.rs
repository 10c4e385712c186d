//! Named helpers of the rule and view files (queries/README.md), expanded
//! into plain SQL when a file is loaded. The engine, and a Ballista cluster
//! (which receives the planned query), only ever see built-in functions:
//! a helper is a spelling, not a function anyone has to register.

use datafusion::sql::sqlparser::dialect::GenericDialect;
use datafusion::sql::sqlparser::tokenizer::{
    Location, Token, TokenWithSpan, Tokenizer, Whitespace,
};

/// One helper: `name(params...)` is replaced by `expand(arguments)`.
struct Helper {
    name: &'static str,
    params: &'static [&'static str],
    expand: fn(&[String]) -> String,
}

/// `time_order` keeps the seq in its last 19 digits (every seq is below
/// 10^19), and adds as much to the nanoseconds (every int64 is above
/// -10^19), so that every value is positive and `%` reads the seq back.
const SEQ_SPAN: &str = "10000000000000000000";

const HELPERS: &[Helper] = &[
    // An instant as the messages write it. `Date64` (milliseconds) covers
    // every year a log can carry; `to_char` of the microsecond timestamp
    // itself goes through nanoseconds, which end at the years 1677..2262.
    Helper {
        name: "instant_text",
        params: &["instant"],
        expand: |a| {
            format!(
                "to_char(arrow_cast({}, 'Date64'), '%Y-%m-%dT%H:%M:%S%.3fZ')",
                a[0]
            )
        },
    },
    // (ns, seq) as one sortable decimal: (ns + 10^19) * 10^19 + seq, 39
    // digits, so a Decimal256 (Decimal128 ends at 38). min() of it per group
    // is the group's first event in time order, ties in input order, and is
    // much cheaper than first_value(... ORDER BY ...).
    Helper {
        name: "time_order",
        params: &["ns", "seq"],
        expand: |a| {
            format!(
                "((CAST(({}) AS DECIMAL(39, 0)) + {SEQ_SPAN}) * {SEQ_SPAN} + ({}))",
                a[0], a[1]
            )
        },
    },
    // A value of the log as a message shows it. An id, type or agent name
    // has no length limit, and a message repeats it for every finding that
    // cites it: a 1 MiB id replayed 400 times would make 400 MiB of
    // messages. Past 80 characters only the first 40 are shown, with the
    // length and the start of the value's BLAKE3 (so that two long values
    // with one beginning still read apart); the finding's event ids,
    // locations and fingerprint keep the whole value. `escape::log_value`
    // cuts ids the same way in the reports people read. (`digest` is in
    // DataFusion's default functions.)
    Helper {
        name: "log_value",
        params: &["value"],
        expand: |a| {
            let t = &a[0];
            format!(
                "CASE WHEN character_length({t}) > 80 \
                 THEN concat(left({t}, 40), '…[', character_length({t}), ' characters, blake3 ', \
                 left(encode(digest({t}, 'blake3'), 'hex'), 16), ']') \
                 ELSE {t} END"
            )
        },
    },
    // The seq a `time_order` value carries.
    Helper {
        name: "seq_of",
        params: &["ord"],
        expand: |a| format!("CAST(({}) % {SEQ_SPAN} AS BIGINT)", a[0]),
    },
];

/// `sql` with every helper call replaced by its SQL (helpers in a helper's
/// arguments too). Text the tokenizer cannot read is returned as it is: the
/// engine reports its syntax error when the file runs.
pub fn expand(sql: &str) -> Result<String, String> {
    let lower = sql.to_ascii_lowercase();
    if !HELPERS.iter().any(|h| lower.contains(h.name)) {
        return Ok(sql.to_string());
    }
    let Ok(tokens) = Tokenizer::new(&GenericDialect {}, sql).tokenize_with_location() else {
        return Ok(sql.to_string());
    };
    let spans = Spans::of(sql, &tokens);
    expand_tokens(sql, &tokens, &spans, 0..tokens.len())
}

/// The words of `sql` (names, quoted or not, and keywords), lower-cased;
/// None when the tokenizer cannot read it.
pub fn words(sql: &str) -> Option<Vec<String>> {
    let tokens = Tokenizer::new(&GenericDialect {}, sql).tokenize().ok()?;
    Some(
        tokens
            .into_iter()
            .filter_map(|t| match t {
                Token::Word(w) => Some(w.value.to_lowercase()),
                _ => None,
            })
            .collect(),
    )
}

/// Whether `sql` holds a `*` other than in `count(*)` (true when the
/// tokenizer cannot read it).
pub fn has_wildcard(sql: &str) -> bool {
    let Ok(tokens) = Tokenizer::new(&GenericDialect {}, sql).tokenize() else {
        return true;
    };
    let tokens: Vec<&Token> = tokens
        .iter()
        .filter(|t| !matches!(t, Token::Whitespace(_)))
        .collect();
    tokens.iter().enumerate().any(|(i, t)| {
        let count_all = i >= 2
            && matches!(tokens[i - 1], Token::LParen)
            && matches!(tokens[i - 2], Token::Word(w) if w.value.eq_ignore_ascii_case("count"))
            && matches!(tokens.get(i + 1), Some(Token::RParen));
        matches!(t, Token::Mul) && !count_all
    })
}

/// The expansion of `tokens[range]`, as text.
fn expand_tokens(
    sql: &str,
    tokens: &[TokenWithSpan],
    spans: &Spans,
    range: std::ops::Range<usize>,
) -> Result<String, String> {
    let mut out = String::new();
    let mut i = range.start;
    while i < range.end {
        let call = helper_at(tokens, i, range.end)
            .and_then(|h| Some((h, call_args(tokens, i, range.end)?)));
        let Some((helper, (args, close))) = call else {
            out.push_str(spans.text(sql, i..i + 1));
            i += 1;
            continue;
        };
        let line = tokens[i].span.start.line;
        let signature = format!("{}({})", helper.name, helper.params.join(", "));
        if args.len() != helper.params.len() {
            return Err(format!(
                "line {line}: {signature} takes {} argument{}, given {}",
                helper.params.len(),
                if helper.params.len() == 1 { "" } else { "s" },
                args.len()
            ));
        }
        if args.iter().any(|a| is_blank(tokens, a)) {
            return Err(format!("line {line}: {signature} given an empty argument"));
        }
        let texts = args
            .into_iter()
            .map(|a| expand_tokens(sql, tokens, spans, trimmed(tokens, a)))
            .collect::<Result<Vec<_>, _>>()?;
        out.push_str(&(helper.expand)(&texts));
        i = close + 1;
    }
    Ok(out)
}

/// The helper named by the word at `i`, when it is called there: followed
/// by `(`, and not a qualified name (`t.seq_of` is someone's column).
fn helper_at(tokens: &[TokenWithSpan], i: usize, end: usize) -> Option<&'static Helper> {
    let Token::Word(w) = &tokens[i].token else {
        return None;
    };
    if w.quote_style.is_some() {
        return None;
    }
    let helper = HELPERS
        .iter()
        .find(|h| w.value.eq_ignore_ascii_case(h.name))?;
    let before = tokens[..i].iter().rev().find(|t| !is_space(&t.token));
    if before.is_some_and(|t| t.token == Token::Period) {
        return None;
    }
    let after = (i + 1..end).find(|&j| !is_space(&tokens[j].token))?;
    (tokens[after].token == Token::LParen).then_some(helper)
}

/// The token ranges of the arguments of the call whose name is at `i`
/// (blank ones included; none for `f()`), and where its `)` is; None when
/// it is never closed.
fn call_args(
    tokens: &[TokenWithSpan],
    i: usize,
    end: usize,
) -> Option<(Vec<std::ops::Range<usize>>, usize)> {
    let open = (i + 1..end).find(|&j| tokens[j].token == Token::LParen)?;
    let mut args = Vec::new();
    let mut depth = 0usize;
    let mut start = open + 1;
    for j in open + 1..end {
        match tokens[j].token {
            Token::LParen | Token::LBracket | Token::LBrace => depth += 1,
            Token::RParen if depth == 0 => {
                args.push(start..j);
                if let [only] = args.as_slice()
                    && is_blank(tokens, only)
                {
                    args.clear();
                }
                return Some((args, j));
            }
            Token::RParen | Token::RBracket | Token::RBrace => depth = depth.saturating_sub(1),
            Token::Comma if depth == 0 => {
                args.push(start..j);
                start = j + 1;
            }
            _ => {}
        }
    }
    None
}

fn is_space(t: &Token) -> bool {
    matches!(t, Token::Whitespace(_))
}

/// `range` without the blanks at its ends; comments stay (a line comment
/// keeps its newline, so the text after it is not commented out).
fn trimmed(tokens: &[TokenWithSpan], range: std::ops::Range<usize>) -> std::ops::Range<usize> {
    let blank = |j: &usize| {
        matches!(
            tokens[*j].token,
            Token::Whitespace(Whitespace::Space | Whitespace::Newline | Whitespace::Tab)
        )
    };
    let start = range.clone().find(|j| !blank(j)).unwrap_or(range.end);
    let end = range.rev().find(|j| !blank(j)).map_or(start, |j| j + 1);
    start..end
}

fn is_blank(tokens: &[TokenWithSpan], range: &std::ops::Range<usize>) -> bool {
    tokens[range.clone()].iter().all(|t| is_space(&t.token))
}

/// Where each token starts in the text, in bytes (the tokenizer gives lines
/// and columns in characters); the last entry is the text's end.
struct Spans(Vec<usize>);

impl Spans {
    fn of(sql: &str, tokens: &[TokenWithSpan]) -> Spans {
        let mut starts = Vec::with_capacity(tokens.len() + 1);
        let mut chars = sql.char_indices().peekable();
        let mut at = Location::new(1, 1);
        for t in tokens {
            while (at.line, at.column) < (t.span.start.line, t.span.start.column) {
                match chars.next() {
                    Some((_, '\n')) => at = Location::new(at.line + 1, 1),
                    Some(_) => at.column += 1,
                    None => break,
                }
            }
            starts.push(chars.peek().map_or(sql.len(), |&(b, _)| b));
        }
        starts.push(sql.len());
        Spans(starts)
    }

    /// The text of `tokens[range]` (whitespace and comments included).
    fn text<'a>(&self, sql: &'a str, range: std::ops::Range<usize>) -> &'a str {
        &sql[self.0[range.start]..self.0[range.end]]
    }
}

#[cfg(test)]
mod tests {
    use super::{expand, has_wildcard};

    #[test]
    fn a_wildcard_is_any_star_but_count_star() {
        for sql in [
            "SELECT * FROM events",
            "SELECT e.* FROM events e",
            "SELECT seq * 2 FROM events",
            "SELECT count(*), * FROM events",
            "SELECT 'unterminated",
        ] {
            assert!(has_wildcard(sql), "{sql}");
        }
        for sql in [
            "SELECT count(*) FROM events",
            "SELECT COUNT ( * ), '*' FROM ev -- *",
        ] {
            assert!(!has_wildcard(sql), "{sql}");
        }
    }

    #[test]
    fn each_helper_expands_to_its_built_in_sql() {
        assert_eq!(
            expand("SELECT instant_text(e.created_at) FROM ev e").unwrap(),
            "SELECT to_char(arrow_cast(e.created_at, 'Date64'), '%Y-%m-%dT%H:%M:%S%.3fZ') FROM ev e"
        );
        assert_eq!(
            expand("min(time_order(created_ns, seq))").unwrap(),
            "min(((CAST((created_ns) AS DECIMAL(39, 0)) + 10000000000000000000) \
             * 10000000000000000000 + (seq)))"
        );
        assert_eq!(
            expand("log_value(r.id)").unwrap(),
            "CASE WHEN character_length(r.id) > 80 THEN concat(left(r.id, 40), '…[', \
             character_length(r.id), ' characters, blake3 ', \
             left(encode(digest(r.id, 'blake3'), 'hex'), 16), ']') ELSE r.id END"
        );
        assert_eq!(
            expand("e.seq = seq_of(l.ord)").unwrap(),
            "e.seq = CAST((l.ord) % 10000000000000000000 AS BIGINT)"
        );
    }

    #[test]
    fn arguments_may_be_expressions_and_helpers() {
        assert_eq!(
            expand("INSTANT_TEXT ( to_timestamp_micros(a + b * 1000) )").unwrap(),
            "to_char(arrow_cast(to_timestamp_micros(a + b * 1000), 'Date64'), \
             '%Y-%m-%dT%H:%M:%S%.3fZ')"
        );
        assert_eq!(
            expand("seq_of(min(time_order(ns, make_array(1, 2)[1])))").unwrap(),
            "CAST((min(((CAST((ns) AS DECIMAL(39, 0)) + 10000000000000000000) \
             * 10000000000000000000 + (make_array(1, 2)[1])))) % 10000000000000000000 AS BIGINT)"
        );
    }

    #[test]
    fn names_in_strings_comments_quotes_and_qualified_names_stay() {
        let kept = [
            "SELECT 'instant_text(x)' AS a -- instant_text(x)\n FROM t",
            "SELECT /* seq_of(x) */ \"seq_of\"(x), t.seq_of, seq_of FROM t",
            "SELECT t.time_order(a, b)",
            // what does not tokenize or never closes is the engine's to report
            "SELECT seq_of(x), 'unclosed",
            "SELECT seq_of(x",
        ];
        for sql in kept {
            assert_eq!(expand(sql).unwrap(), sql);
        }
        // the text around a call stays byte for byte, multibyte text included
        assert_eq!(
            expand("SELECT 'é' || seq_of(k) -- ü\nFROM t").unwrap(),
            "SELECT 'é' || CAST((k) % 10000000000000000000 AS BIGINT) -- ü\nFROM t"
        );
    }

    #[test]
    fn a_comment_in_an_argument_does_not_swallow_the_expansion() {
        assert_eq!(
            expand("seq_of(\n  k -- the key\n)").unwrap(),
            "CAST((k -- the key\n) % 10000000000000000000 AS BIGINT)"
        );
    }

    #[test]
    fn the_built_in_files_say_the_idioms_only_through_the_helpers() {
        let queries = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("queries");
        for dir in ["rules", "views"] {
            for entry in std::fs::read_dir(queries.join(dir)).unwrap() {
                let path = entry.unwrap().path();
                let text = std::fs::read_to_string(&path).unwrap();
                for spelled_out in ["'Date64'", "10000000000000000000"] {
                    assert!(
                        !text.contains(spelled_out),
                        "{}: {spelled_out} (use the helper, queries/README.md)",
                        path.display()
                    );
                }
            }
        }
    }

    #[test]
    fn a_call_with_the_wrong_arguments_is_an_error_with_its_line() {
        assert_eq!(
            expand("SELECT\n  time_order(created_ns) FROM ev").unwrap_err(),
            "line 2: time_order(ns, seq) takes 2 arguments, given 1"
        );
        assert_eq!(
            expand("SELECT instant_text()").unwrap_err(),
            "line 1: instant_text(instant) takes 1 argument, given 0"
        );
        assert_eq!(
            expand("SELECT time_order(a, )").unwrap_err(),
            "line 1: time_order(ns, seq) given an empty argument"
        );
        // an error inside an argument is found too
        assert!(expand("SELECT seq_of(instant_text(a, b))").is_err());
    }
}
