//! GOAL's tokens: words, numbers, `-1`, `:`, braces and line ends, with
//! `//` and `/* */` comments dropped and lines counted.

/// One lexical token.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Token<'a> {
    /// A keyword or a label: `[A-Za-z][A-Za-z0-9_]*`.
    Word(&'a str),
    Int(u64),
    /// `-1`: any source or tag.
    Any,
    Colon,
    Open,
    Close,
    Newline,
}

impl Token<'_> {
    pub(super) fn describe(self) -> String {
        match self {
            Token::Word(w) => format!("`{w}`"),
            Token::Int(n) => format!("`{n}`"),
            Token::Any => "`-1`".into(),
            Token::Colon => "`:`".into(),
            Token::Open => "`{`".into(),
            Token::Close => "`}`".into(),
            Token::Newline => "the end of the line".into(),
        }
    }
}

/// Splits text into tokens with their line numbers, comments dropped.
pub(super) struct Lexer<'a> {
    text: &'a str,
    at: usize,
    /// The line the next token is on.
    pub(super) line: usize,
}

impl<'a> Lexer<'a> {
    pub(super) fn new(text: &'a str) -> Lexer<'a> {
        Lexer {
            text,
            at: 0,
            line: 1,
        }
    }

    /// The next token and its line, or the line and what is wrong.
    #[allow(clippy::type_complexity)]
    pub(super) fn next(&mut self) -> Option<Result<(usize, Token<'a>), (usize, String)>> {
        let bytes = self.text.as_bytes();
        loop {
            let rest = &bytes[self.at..];
            let c = *rest.first()?;
            let line = self.line;
            if c == b'\n' {
                self.at += 1;
                self.line += 1;
                return Some(Ok((line, Token::Newline)));
            }
            if c == b' ' || c == b'\t' || c == b'\r' {
                self.at += 1;
            } else if rest.starts_with(b"//") {
                self.at += rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
            } else if rest.starts_with(b"/*") {
                let Some(end) = rest.windows(2).position(|w| w == b"*/") else {
                    return Some(Err((line, "`/*` comment is not closed".into())));
                };
                self.line += rest[..end].iter().filter(|&&b| b == b'\n').count();
                self.at += end + 2;
            } else {
                return Some(self.token(line));
            }
        }
    }

    fn token(&mut self, line: usize) -> Result<(usize, Token<'a>), (usize, String)> {
        let rest = &self.text[self.at..];
        let c = rest.as_bytes()[0];
        let single = match c {
            b':' => Some(Token::Colon),
            b'{' => Some(Token::Open),
            b'}' => Some(Token::Close),
            _ => None,
        };
        if let Some(token) = single {
            self.at += 1;
            return Ok((line, token));
        }
        if c.is_ascii_alphabetic() {
            let len = rest
                .find(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '_'))
                .unwrap_or(rest.len());
            self.at += len;
            return Ok((line, Token::Word(&rest[..len])));
        }
        let negative = c == b'-';
        let digits = &rest[negative as usize..];
        let len = digits
            .find(|ch: char| !ch.is_ascii_digit())
            .unwrap_or(digits.len());
        if len == 0 {
            let ch = rest.chars().next().unwrap_or('?');
            return Err((line, format!("unexpected character {ch:?}")));
        }
        let number = &rest[..negative as usize + len];
        self.at += number.len();
        if negative {
            return match number {
                "-1" => Ok((line, Token::Any)),
                _ => Err((
                    line,
                    format!("negative number {number} (only -1, any, is allowed)"),
                )),
            };
        }
        match number.parse::<u64>() {
            Ok(n) => Ok((line, Token::Int(n))),
            Err(_) => Err((line, format!("number {number} does not fit in 64 bits"))),
        }
    }
}
