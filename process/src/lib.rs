//! Facts about the running process that runs and benchmarks report and
//! check sizes against; apart from the engine, which needs none of them.

/// Peak resident set size of this process in bytes (`VmHWM`), or 0 where
/// the platform does not expose it.
pub fn peak_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
            let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kib * 1024)
        })
        .unwrap_or(0)
}

/// The memory this process may use, in bytes: the smaller of the machine's
/// physical memory (`MemTotal`) and the address-space limit (`ulimit -v`),
/// or `u64::MAX` where neither is known. Counts a user's input asks for are
/// checked against it before anything is allocated for them.
pub fn memory_limit_bytes() -> u64 {
    let kib_field = |text: &str, key: &str| -> Option<u64> {
        let line = text.lines().find(|l| l.starts_with(key))?;
        line.split_whitespace().nth(1)?.parse::<u64>().ok()
    };
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| kib_field(&m, "MemTotal:"))
        .map_or(u64::MAX, |kib| kib.saturating_mul(1024));
    total.min(address_space_limit_bytes())
}

/// What this process holds against [`memory_limit_bytes`]: its address
/// space (`VmSize`) when an address-space limit is set, since that is what
/// the limit counts, else its resident set (`VmRSS`); 0 where unknown.
pub fn memory_in_use_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |key: &str| -> u64 {
        status
            .lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .map_or(0, |kib| kib * 1024)
    };
    if address_space_limit_bytes() != u64::MAX {
        field("VmSize:")
    } else {
        field("VmRSS:")
    }
}

/// What this process may still allocate: [`memory_limit_bytes`] less
/// [`memory_in_use_bytes`].
pub fn memory_left_bytes() -> u64 {
    memory_limit_bytes().saturating_sub(memory_in_use_bytes())
}

/// The soft address-space limit (`ulimit -v`), or `u64::MAX` when unlimited.
pub fn address_space_limit_bytes() -> u64 {
    // "Max address space   <soft> <hard> bytes", soft may be "unlimited".
    std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|l| {
            let line = l.lines().find(|l| l.starts_with("Max address space"))?;
            line.split_whitespace().nth(3)?.parse::<u64>().ok()
        })
        .unwrap_or(u64::MAX)
}

/// `bytes` for an error message: `3.2 GiB`, `512 MiB`.
pub fn human_bytes(bytes: u64) -> String {
    const GIB: f64 = (1u64 << 30) as f64;
    if bytes >= 1 << 30 {
        format!("{:.1} GiB", bytes as f64 / GIB)
    } else {
        format!("{} MiB", bytes.div_ceil(1 << 20))
    }
}
