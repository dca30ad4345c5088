//! ATLAHS' and LogGOPSim's GOAL schedules (text): every rank's sends,
//! receives and computations with their dependencies.
//!
//! ```text
//! num_ranks 2
//! rank 0 {
//! l1: calc 1000            // ns
//! l2: send 4096b to 1 tag 7
//! l2 requires l1           // l2 starts when l1 ends
//! }
//! rank 1 {
//! l1: recv 4096b from -1 tag -1 cpu 0 nic 0
//! l2: calc 500
//! l2 irequires l1          // l2 starts when l1 starts
//! }
//! ```
//!
//! The grammar is LogGOPSim's `txt2bin.re` (spcl/atlahs `sim/LogGOPSim`):
//! `num_ranks N` first, then one `rank R { ... }` block per rank, one
//! statement per line. Labels (`[A-Za-z][A-Za-z0-9_]*`) are per rank; an
//! operation needs none. `calc` times are nanoseconds (LogGOPSim's time unit;
//! ATLAHS' htsim backend multiplies them by 1000 into picoseconds). Sizes
//! carry a `b` suffix. A missing `tag` is tag 0, as in `txt2bin`; `-1` is
//! any source or any tag on a receive. `cpu` and `nic` pick one of a host's
//! cores and NICs in LogGOPSim; netsim gives a rank one of each, so they are
//! checked (0..=255, as `txt2bin` stores them) and otherwise ignored.
//!
//! Where netsim is stricter or looser than `txt2bin`:
//! - A zero-byte send or receive carries one byte: a flow needs at least
//!   one, and ATLAHS' htsim backend does the same ("size is at least 1").
//! - A dependency may name a label defined later in the same rank (`txt2bin`
//!   wants it defined first); a label never defined in the rank, a label
//!   defined twice, a rank outside `0..num_ranks`, a rank given twice or
//!   missing, an operation outside a rank block and a number beyond 64 bits
//!   are errors (`txt2bin` keeps the first of two labels and wraps numbers).
//! - A message from a rank to itself is refused: it is a local copy, and
//!   the network has no path from a host to itself.
//! - Comments (`//`, `/* */`) may follow a statement on its line.
//! - An operation's `label` in the [`Trace`] is its line: GOAL labels are
//!   names, and a line finds the operation in the file. A rank's `source`
//!   is `FILE:LINE` of its `rank R {`.
//! - Ranks are capped at [`MAX_RANKS`] so that a corrupt count cannot ask
//!   for unbounded memory; nothing is allocated per rank before its block.
//!
//! Dependency cycles are found when the trace is built into tasks.

use super::{Dep, Op, OpKind, Trace, TraceBuilder};
use crate::workload::file::WorkloadFileError;
use lex::{Lexer, Token};
use netsim_engine::SimTime;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

mod lex;

/// The most ranks a GOAL file may declare (about a million hosts).
pub const MAX_RANKS: u64 = 1 << 20;

/// Reads the GOAL schedule at `path`.
pub fn read(path: &Path) -> Result<Trace, WorkloadFileError> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| WorkloadFileError {
        path: name.clone(),
        line: 0,
        message: format!("cannot read GOAL file: {e}"),
    })?;
    parse(&text, &name)
}

/// Whether `path` is a readable file whose first 4 KiB [`looks_like`] GOAL.
pub fn is_goal(path: &Path) -> bool {
    use std::io::Read;
    let Ok(file) = std::fs::File::open(path) else {
        return false;
    };
    let mut head = Vec::with_capacity(4096);
    if file.take(4096).read_to_end(&mut head).is_err() {
        return false;
    }
    looks_like(&String::from_utf8_lossy(&head))
}

/// Whether `head`, the start of a file, is GOAL: its first token outside
/// comments is `num_ranks`.
pub fn looks_like(head: &str) -> bool {
    let mut lexer = Lexer::new(head);
    loop {
        match lexer.next() {
            Some(Ok((_, Token::Newline))) => {}
            first => return matches!(first, Some(Ok((_, Token::Word("num_ranks"))))),
        }
    }
}

/// Parses GOAL `text`; `path` names it in errors.
pub fn parse(text: &str, path: &str) -> Result<Trace, WorkloadFileError> {
    let mut parser = Parser {
        path,
        num_ranks: None,
        open: None,
        done: BTreeMap::new(),
        ops_total: 0,
    };
    let mut lexer = Lexer::new(text);
    let mut line_tokens = Vec::new();
    loop {
        match lexer.next() {
            Some(Ok((at, Token::Newline))) => {
                parser.line(&line_tokens, at)?;
                line_tokens.clear();
            }
            Some(Ok((_, token))) => line_tokens.push(token),
            Some(Err((at, message))) => return Err(parser.error(at, message)),
            None => break,
        }
    }
    parser.line(&line_tokens, lexer.line)?;
    // Errors about the whole file name its last line.
    parser.finish(text.lines().count().max(1))
}

/// A rank's program while its block is read.
struct RankBlock<'a> {
    rank: u32,
    /// The line of `rank R {`.
    line: usize,
    ops: Vec<Op>,
    /// Label → (operation index in the rank, line of its definition).
    labels: HashMap<&'a str, (u32, usize)>,
    /// (label of the dependent operation, label it depends on, after its
    /// start, line), resolved when the block closes.
    deps: Vec<(&'a str, &'a str, bool, usize)>,
}

/// A rank's program once its block is closed.
struct RankProgram {
    line: usize,
    ops: Vec<Op>,
    /// (operation index in the rank, dependency on an index in the rank).
    deps: Vec<(u32, Dep)>,
}

struct Parser<'a> {
    path: &'a str,
    /// The declared count and its line.
    num_ranks: Option<(u32, usize)>,
    open: Option<RankBlock<'a>>,
    done: BTreeMap<u32, RankProgram>,
    /// Operations of every rank so far: indices are `u32`.
    ops_total: u64,
}

impl<'a> Parser<'a> {
    fn error(&self, line: usize, message: String) -> WorkloadFileError {
        WorkloadFileError {
            path: self.path.to_string(),
            line,
            message,
        }
    }

    /// One line's tokens: block structure, then at most one statement.
    fn line(&mut self, tokens: &[Token<'a>], line: usize) -> Result<(), WorkloadFileError> {
        let mut rest = tokens;
        while let Some(&first) = rest.first() {
            rest = match first {
                Token::Word("num_ranks") => self.num_ranks(rest, line),
                Token::Word("rank") => self.open_rank(rest, line),
                Token::Close => {
                    self.close_rank(line)
                        .map_err(|(at, message)| self.error(at, message))?;
                    Ok(&rest[1..])
                }
                _ => self.statement(rest, line),
            }
            .map_err(|message| self.error(line, message))?;
        }
        Ok(())
    }

    fn num_ranks<'t>(
        &mut self,
        tokens: &'t [Token<'a>],
        line: usize,
    ) -> Result<&'t [Token<'a>], String> {
        if let Some((_, first)) = self.num_ranks {
            return Err(format!("`num_ranks` given twice (first at line {first})"));
        }
        let n = match tokens.get(1) {
            Some(&Token::Int(n)) => n,
            other => return Err(expected("the number of ranks after `num_ranks`", other)),
        };
        if n == 0 || n > MAX_RANKS {
            return Err(format!("num_ranks {n} is not in 1..={MAX_RANKS}"));
        }
        self.num_ranks = Some((n as u32, line));
        Ok(&tokens[2..])
    }

    fn open_rank<'t>(
        &mut self,
        tokens: &'t [Token<'a>],
        line: usize,
    ) -> Result<&'t [Token<'a>], String> {
        if let Some(open) = &self.open {
            return Err(format!(
                "`rank` inside rank {}'s block (a `}}` is missing)",
                open.rank
            ));
        }
        let Some((ranks, _)) = self.num_ranks else {
            return Err("`rank` before `num_ranks N`".into());
        };
        let rank = match tokens.get(1) {
            Some(&Token::Int(r)) => r,
            other => return Err(expected("a rank number after `rank`", other)),
        };
        if rank >= ranks as u64 {
            return Err(format!("rank {rank} is out of range (num_ranks {ranks})"));
        }
        let rank = rank as u32;
        if let Some(done) = self.done.get(&rank) {
            return Err(format!(
                "rank {rank} given twice (first at line {})",
                done.line
            ));
        }
        if tokens.get(2) != Some(&Token::Open) {
            return Err(expected("`{` after `rank {rank}`", tokens.get(2)));
        }
        self.open = Some(RankBlock {
            rank,
            line,
            ops: Vec::new(),
            labels: HashMap::new(),
            deps: Vec::new(),
        });
        Ok(&tokens[3..])
    }

    /// Ends the open block: resolves its dependencies' labels. An error
    /// names the line of the dependency at fault, or of the `}`.
    fn close_rank(&mut self, line: usize) -> Result<(), (usize, String)> {
        let Some(block) = self.open.take() else {
            return Err((line, "`}` outside a rank block".into()));
        };
        let mut deps = Vec::with_capacity(block.deps.len());
        for &(op, on, on_start, at) in &block.deps {
            let index = |label: &str| match block.labels.get(label) {
                Some(&(i, _)) => Ok(i),
                None => Err((
                    at,
                    format!("label `{label}` is not defined in rank {}", block.rank),
                )),
            };
            deps.push((
                index(op)?,
                Dep {
                    op: index(on)?,
                    on_start,
                },
            ));
        }
        self.done.insert(
            block.rank,
            RankProgram {
                line: block.line,
                ops: block.ops,
                deps,
            },
        );
        Ok(())
    }

    /// A labelled or bare operation, or a dependency; ends at the line's
    /// end or a `}`.
    fn statement<'t>(
        &mut self,
        tokens: &'t [Token<'a>],
        line: usize,
    ) -> Result<&'t [Token<'a>], String> {
        let end = tokens
            .iter()
            .position(|&t| t == Token::Close)
            .unwrap_or(tokens.len());
        let (statement, rest) = tokens.split_at(end);
        let Some(block) = self.open.as_mut() else {
            return Err(format!(
                "{} outside a `rank R {{ }}` block",
                statement[0].describe()
            ));
        };
        let (label, op) = match statement {
            [Token::Word(w), ..] if is_operation(w) => (None, statement),
            [Token::Word(label), Token::Colon, op @ ..] => (Some(*label), op),
            [Token::Word(a), Token::Word(kind @ ("requires" | "irequires")), Token::Word(b)] => {
                block.deps.push((a, b, *kind == "irequires", line));
                return Ok(rest);
            }
            [Token::Word(label), next, ..] => {
                return Err(format!(
                    "expected `:`, `requires` or `irequires` after `{label}`, found {}",
                    next.describe()
                ))
            }
            [first, ..] => {
                return Err(format!(
                    "expected an operation or a label, found {}",
                    first.describe()
                ))
            }
            [] => unreachable!("a statement starts with a token"),
        };
        let ranks = self.num_ranks.map_or(0, |(n, _)| n);
        let kind = operation(op, ranks)?;
        let peer = match kind {
            OpKind::Send { to, .. } => Some(to),
            OpKind::Recv { from, .. } => from,
            _ => None,
        };
        if peer == Some(block.rank) {
            return Err(format!(
                "rank {} sends to or receives from itself: a local copy, which netsim does not \
                 model (no path leads from a host to itself)",
                block.rank
            ));
        }
        if self.ops_total >= u32::MAX as u64 {
            return Err(format!("more than {} operations", u32::MAX));
        }
        self.ops_total += 1;
        let index = block.ops.len() as u32;
        if let Some(label) = label {
            if let Some(&(_, first)) = block.labels.get(label) {
                return Err(format!(
                    "label `{label}` defined twice in rank {} (first at line {first})",
                    block.rank
                ));
            }
            block.labels.insert(label, (index, line));
        }
        block.ops.push(Op {
            kind,
            label: line as u64,
        });
        Ok(rest)
    }

    /// Checks every rank has its block; assembles the trace in rank order.
    fn finish(mut self, last_line: usize) -> Result<Trace, WorkloadFileError> {
        if let Some(open) = &self.open {
            let message = format!(
                "rank {}'s block (line {}) is not closed",
                open.rank, open.line
            );
            return Err(self.error(last_line, message));
        }
        let Some((ranks, line)) = self.num_ranks else {
            return Err(self.error(last_line, "no `num_ranks N`: not a GOAL file".into()));
        };
        if let Some(missing) = (0..ranks).find(|r| !self.done.contains_key(r)) {
            let message = format!("rank {missing} has no block (num_ranks {ranks})");
            return Err(self.error(line, message));
        }
        let mut builder = TraceBuilder::new();
        let mut base = 0u32;
        for program in std::mem::take(&mut self.done).into_values() {
            let mut deps = program.deps;
            deps.sort_by_key(|&(op, _)| op);
            let mut next = 0;
            for (i, &op) in program.ops.iter().enumerate() {
                let start = next;
                while next < deps.len() && deps[next].0 == i as u32 {
                    next += 1;
                }
                let own: Vec<Dep> = deps[start..next]
                    .iter()
                    .map(|&(_, d)| Dep {
                        op: base + d.op,
                        on_start: d.on_start,
                    })
                    .collect();
                builder.op(op, &own);
            }
            base += program.ops.len() as u32;
            builder.end_rank(format!("{}:{}", self.path, program.line));
        }
        Ok(builder.finish())
    }
}

/// Whether `word` starts an unlabelled operation.
fn is_operation(word: &str) -> bool {
    matches!(word, "send" | "recv" | "calc")
}

/// "expected WHAT, found ..." for a token that is not what the grammar wants.
fn expected(what: &str, found: Option<&Token>) -> String {
    match found {
        Some(t) => format!("expected {what}, found {}", t.describe()),
        None => format!("expected {what}, found the end of the line"),
    }
}

/// `send <n>b to <r> [tag t] [cpu c] [nic n]`, `recv <n>b from <r|-1>
/// [tag t|-1] [cpu c] [nic n]` or `calc <ns> [cpu c]`.
fn operation(tokens: &[Token], ranks: u32) -> Result<OpKind, String> {
    let (name, rest) = match tokens {
        [Token::Word(w), rest @ ..] if is_operation(w) => (*w, rest),
        [first, ..] => {
            return Err(format!(
                "unknown operation {} (expected send, recv or calc)",
                first.describe()
            ))
        }
        [] => return Err(expected("send, recv or calc after the label", None)),
    };
    if name == "calc" {
        let ns = match rest.first() {
            Some(&Token::Int(ns)) => ns,
            other => return Err(expected("a time in ns after `calc`", other)),
        };
        let duration = SimTime::try_from_ns(ns).map_err(|e| format!("calc {ns}: {e}"))?;
        options(&rest[1..], &["cpu"])?;
        return Ok(OpKind::Compute { duration });
    }
    let bytes = match rest {
        [Token::Int(n), Token::Word("b"), ..] => *n,
        [Token::Int(_), other, ..] => {
            return Err(expected(
                &format!("`b` after the size of `{name}`"),
                Some(other),
            ))
        }
        [other, ..] => {
            return Err(expected(
                &format!("a size in bytes after `{name}`"),
                Some(other),
            ))
        }
        [] => return Err(expected(&format!("a size in bytes after `{name}`"), None)),
    };
    // A zero-byte message is carried as one byte: a flow needs at least one.
    let bytes = bytes.max(1);
    let (preposition, peer) = if name == "send" {
        ("to", "a rank")
    } else {
        ("from", "a rank or -1")
    };
    if rest.get(2) != Some(&Token::Word(preposition)) {
        return Err(expected(
            &format!("`{preposition}` after the size"),
            rest.get(2),
        ));
    }
    let peer = match rest.get(3) {
        Some(&Token::Int(r)) if r < ranks as u64 => Some(r as u32),
        Some(&Token::Int(r)) => {
            return Err(format!("rank {r} is out of range (num_ranks {ranks})"))
        }
        Some(&Token::Any) if name == "recv" => None,
        other => return Err(expected(&format!("{peer} after `{preposition}`"), other)),
    };
    let tag = options(&rest[4..], &["tag", "cpu", "nic"])?;
    if name == "send" {
        let tag = match tag {
            Some(Some(t)) => t,
            None => 0,
            Some(None) => return Err("tag -1 (any tag) is only for a recv".into()),
        };
        let to = peer.expect("a send's peer is a rank");
        return Ok(OpKind::Send { to, bytes, tag });
    }
    Ok(OpKind::Recv {
        from: peer,
        bytes,
        tag: tag.unwrap_or(Some(0)),
    })
}

/// Checks the trailing `name value` options, each one of `allowed` and
/// given at most once; `cpu` and `nic` must fit a byte. Returns the tag:
/// `None` when absent, `Some(None)` for `-1`.
fn options(mut tokens: &[Token], allowed: &[&str]) -> Result<Option<Option<u64>>, String> {
    let mut seen: Vec<&str> = Vec::new();
    let mut tag = None;
    while let Some(first) = tokens.first() {
        let name = match first {
            Token::Word(w) if allowed.contains(w) => *w,
            other => {
                return Err(format!(
                    "expected {} or the end of the line, found {}",
                    or_list(allowed),
                    other.describe()
                ))
            }
        };
        if seen.contains(&name) {
            return Err(format!("`{name}` given twice"));
        }
        seen.push(name);
        let value = match (tokens.get(1), name) {
            (Some(&Token::Int(v)), _) => Some(v),
            (Some(&Token::Any), "tag") => None,
            (other, _) => return Err(expected(&format!("a number after `{name}`"), other)),
        };
        match (name, value) {
            ("tag", v) => tag = Some(v),
            (_, Some(v)) if v > u8::MAX as u64 => {
                return Err(format!("{name} {v} is not in 0..=255"))
            }
            _ => {}
        }
        tokens = &tokens[2..];
    }
    Ok(tag)
}

/// "`a`, `b` or `c`".
fn or_list(words: &[&str]) -> String {
    let quoted: Vec<String> = words.iter().map(|w| format!("`{w}`")).collect();
    match quoted.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}
