//! Exact decimal parsing and printing of rates and latencies: text like `0.000025ms` or
//! `2880Gbps` maps to integer picoseconds and bits per second with no floating point.

/// Parses a non-negative decimal (`12`, `0.5`, `.5` is rejected) scaled by `10^exp` into an
/// integer; `None` if malformed, not a whole number after scaling, or overflowing.
pub fn parse_decimal(s: &str, exp: u32) -> Option<u64> {
    let (int, frac) = match s.split_once('.') {
        Some((i, f)) => (i, f),
        None => (s, ""),
    };
    if int.is_empty() || !int.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    if !frac.bytes().all(|c| c.is_ascii_digit()) || (s.contains('.') && frac.is_empty()) {
        return None;
    }
    let scale = 10u64.checked_pow(exp)?;
    let mut v = int.parse::<u64>().ok()?.checked_mul(scale)?;
    for (i, c) in frac.bytes().enumerate() {
        let d = (c - b'0') as u64;
        if (i as u32) < exp {
            v = v.checked_add(d * 10u64.pow(exp - 1 - i as u32))?;
        } else if d != 0 {
            // A digit below the unit (e.g. a fraction of a picosecond) cannot be represented.
            return None;
        }
    }
    Some(v)
}

/// Prints `v / 10^exp` as a decimal with no trailing zeros (`500000, 9` -> `0.0005`).
pub fn format_decimal(v: u64, exp: u32) -> String {
    let scale = 10u64.pow(exp);
    let (int, frac) = (v / scale, v % scale);
    if frac == 0 {
        return int.to_string();
    }
    let digits = format!("{frac:0width$}", width = exp as usize);
    format!("{int}.{}", digits.trim_end_matches('0'))
}

fn parse_with_units(tok: &str, units: &[(&str, u32)], what: &str) -> Result<u64, String> {
    for &(suffix, exp) in units {
        if let Some(num) = tok.strip_suffix(suffix) {
            return parse_decimal(num, exp).ok_or_else(|| {
                format!("`{tok}`: `{num}` is not a non-negative decimal that is a whole number of {what}")
            });
        }
    }
    let names: Vec<&str> = units.iter().map(|u| u.0).collect();
    Err(format!(
        "`{tok}` has no known unit; expected a number followed by one of {}",
        names.join(", ")
    ))
}

/// Parses a SimAI/ns-3 rate such as `400Gbps` into bits per second (> 0).
pub fn parse_bandwidth_bps(tok: &str) -> Result<u64, String> {
    let v = parse_with_units(
        tok,
        &[
            ("Tbps", 12),
            ("Gbps", 9),
            ("Mbps", 6),
            ("Kbps", 3),
            ("kbps", 3),
            ("bps", 0),
        ],
        "bits per second",
    )?;
    if v == 0 {
        return Err(format!("`{tok}`: bandwidth must be > 0"));
    }
    check_bandwidth(v).map_err(|m| format!("`{tok}`: {m}"))
}

/// The highest link bandwidth accepted, 100 Tb/s: the bandwidths of a
/// node's 65,535 ports at most still add up within 64 bits (partition
/// weights, a switch's capacity).
pub const MAX_BANDWIDTH_BPS: u64 = 100_000_000_000_000;

/// `bps` if it is at most [`MAX_BANDWIDTH_BPS`].
pub fn check_bandwidth(bps: u64) -> Result<u64, String> {
    if bps > MAX_BANDWIDTH_BPS {
        return Err(format!(
            "bandwidth {bps} b/s is above the highest link bandwidth supported, 100 Tb/s"
        ));
    }
    Ok(bps)
}

/// Parses a SimAI/ns-3 time such as `0.0005ms` into picoseconds (>= 1).
pub fn parse_latency_ps(tok: &str) -> Result<u64, String> {
    let v = parse_with_units(
        tok,
        &[("ms", 9), ("us", 6), ("ns", 3), ("ps", 0), ("s", 12)],
        "picoseconds",
    )?;
    if v == 0 {
        return Err(format!("`{tok}`: latency must be >= 1 ps"));
    }
    check_latency(v).map_err(|m| format!("`{tok}`: {m}"))
}

/// The longest link latency accepted, 100 ms: with at most 2^26 nodes a
/// path's summed latency stays below 2^63 ps, so routing distances and the
/// times the model adds to them never overflow.
pub const MAX_LATENCY_PS: u64 = 100_000_000_000;

/// `ps` if it is at most [`MAX_LATENCY_PS`].
pub fn check_latency(ps: u64) -> Result<u64, String> {
    if ps > MAX_LATENCY_PS {
        return Err(format!(
            "latency {ps} ps is above the longest link latency supported, 100 ms"
        ));
    }
    Ok(ps)
}

/// Parses a command-line bandwidth in Gb/s (`100`, `12.5`) into bits per second (> 0).
pub fn parse_gbps(s: &str) -> Result<u64, String> {
    match parse_decimal(s, 9) {
        Some(0) => Err("bandwidth must be > 0".to_string()),
        Some(v) => check_bandwidth(v),
        None => Err(format!("`{s}` is not a decimal number of Gb/s")),
    }
}

/// Parses a command-line latency in ns (`500`, `0.025`) into picoseconds (>= 1).
pub fn parse_ns(s: &str) -> Result<u64, String> {
    match parse_decimal(s, 3) {
        Some(0) => Err("latency must be >= 1 ps".to_string()),
        Some(v) => check_latency(v),
        None => Err(format!(
            "`{}` is not a decimal number of ns with at most 3 decimals (whole picoseconds)",
            s
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_round_trip() {
        assert_eq!(parse_latency_ps("0.0005ms"), Ok(500_000));
        assert_eq!(parse_latency_ps("0.000025ms"), Ok(25_000));
        assert_eq!(parse_latency_ps("1us"), Ok(1_000_000));
        assert_eq!(parse_bandwidth_bps("2880Gbps"), Ok(2_880_000_000_000));
        assert_eq!(parse_bandwidth_bps("12.5Gbps"), Ok(12_500_000_000));
        assert_eq!(format_decimal(500_000, 9), "0.0005");
        assert_eq!(format_decimal(25_000, 9), "0.000025");
        assert_eq!(format_decimal(400_000_000_000, 9), "400");
        assert_eq!(format_decimal(12_500_000_000, 9), "12.5");
        assert_eq!(parse_ns("0.025"), Ok(25));
        assert_eq!(parse_gbps("100"), Ok(100_000_000_000));
    }

    #[test]
    fn rejects_bad_input() {
        assert!(parse_bandwidth_bps("400GBps").is_err());
        assert!(parse_bandwidth_bps("400").is_err());
        assert!(parse_bandwidth_bps("0Gbps").is_err());
        assert!(parse_latency_ps("0.0000000000001ms").is_err());
        assert!(parse_latency_ps("-1ms").is_err());
        assert!(parse_latency_ps("1e-3ms").is_err());
        assert!(parse_ns("0.0001").is_err());
        assert!(parse_gbps("abc").is_err());
        assert!(parse_decimal("1.", 3).is_none());
        assert!(parse_decimal("99999999999999999999", 0).is_none());
    }
}
