//! CPU time and memory of processes, threads and the whole machine, read from Linux.
//!
//! The bench uses it to report its own CPU use (and warn when it may be the bottleneck);
//! the matrix runner uses it for the gateway's CPU and peak RSS. Sources: `getrusage(2)`
//! for this process and its threads, `/proc/<pid>/stat` for other processes,
//! `/proc/<pid>/status` for RSS (now and peak), `/proc/stat` for the machine.

use std::time::Duration;

/// Clock ticks per second of the `/proc` time fields.
fn ticks_per_second() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(ticks).ok().filter(|t| *t > 0).unwrap_or(100)
}

fn ticks_to_duration(ticks: u64) -> Duration {
    let per_second = ticks_per_second();
    Duration::from_secs(ticks / per_second)
        + Duration::from_nanos((ticks % per_second) * 1_000_000_000 / per_second)
}

/// User + system CPU time of this process (all threads), microsecond resolution.
pub fn own_cpu_time() -> Duration {
    // SAFETY: getrusage writes into the struct we hand it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    if rc != 0 {
        return Duration::ZERO;
    }
    timeval(usage.ru_utime) + timeval(usage.ru_stime)
}

/// User + system CPU time of the calling thread, microsecond resolution.
pub fn current_thread_cpu_time() -> Duration {
    // SAFETY: getrusage writes into the struct we hand it.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let rc = unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    if rc != 0 {
        return Duration::ZERO;
    }
    timeval(usage.ru_utime) + timeval(usage.ru_stime)
}

fn timeval(t: libc::timeval) -> Duration {
    Duration::from_secs(t.tv_sec.max(0) as u64) + Duration::from_micros(t.tv_usec.max(0) as u64)
}

/// utime + stime from the text of a `/proc/.../stat` file.
pub fn parse_stat_cpu(stat: &str) -> Option<Duration> {
    // The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    // After ')': state is field 3, so utime (field 14) is the 12th, stime the 13th.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(ticks_to_duration(utime + stime))
}

/// CPU time of a process, 1/CLK_TCK resolution.
pub fn process_cpu_time(pid: u32) -> Option<Duration> {
    parse_stat_cpu(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// From the text of a `/proc/<pid>/stat` file: the parent's PID, and the CPU time of
/// the process and of its children that ended and were waited for (utime + stime +
/// cutime + cstime).
pub fn parse_stat_parent_and_cpu(stat: &str) -> Option<(u32, Duration)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let number = |i: usize| fields.get(i)?.parse::<u64>().ok();
    // After ')': state, ppid, …, utime (12th), stime, cutime, cstime.
    let ppid = u32::try_from(number(1)?).ok()?;
    let ticks = number(11)? + number(12)? + number(13)? + number(14)?;
    Some((ppid, ticks_to_duration(ticks)))
}

/// CPU time of a process and of every process below it (a Node gateway's forked
/// workers, say): the live ones' clocks and the ended ones' that were waited for.
pub fn tree_cpu_time(pid: u32) -> Option<Duration> {
    let (_, own) =
        parse_stat_parent_and_cpu(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)?;
    let mut all: Vec<(u32, u32, Duration)> = Vec::new();
    for entry in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(p) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if let Some((ppid, cpu)) = std::fs::read_to_string(format!("/proc/{p}/stat"))
            .ok()
            .and_then(|s| parse_stat_parent_and_cpu(&s))
        {
            all.push((p, ppid, cpu));
        }
    }
    let mut total = own;
    let mut parents = vec![pid];
    while let Some(parent) = parents.pop() {
        for (child, _, cpu) in all.iter().filter(|(_, ppid, _)| *ppid == parent) {
            total += *cpu;
            parents.push(*child);
        }
    }
    Some(total)
}

/// A `Key:   N kB` line of `/proc/<pid>/status`, in bytes.
fn parse_status_kib(status: &str, key: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with(key))?;
    let kib: u64 = line[key.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// `VmHWM` (peak resident set size) from the text of `/proc/<pid>/status`, in bytes.
pub fn parse_peak_rss(status: &str) -> Option<u64> {
    parse_status_kib(status, "VmHWM:")
}

/// `VmRSS` (resident set size now) from the text of `/proc/<pid>/status`, in bytes.
pub fn parse_rss(status: &str) -> Option<u64> {
    parse_status_kib(status, "VmRSS:")
}

/// Resident set size of a live process now, in bytes.
pub fn rss_bytes(pid: u32) -> Option<u64> {
    parse_rss(&std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?)
}

/// Peak resident set size of a live process, in bytes.
pub fn peak_rss_bytes(pid: u32) -> Option<u64> {
    parse_peak_rss(&std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?)
}

/// What [`sample_rss`] saw of one process: every VmRSS reading and when it was taken.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RssTrack {
    pub samples: Vec<(std::time::Instant, u64)>,
}

impl RssTrack {
    /// The largest reading, in bytes.
    pub fn peak(&self) -> Option<u64> {
        self.samples.iter().map(|s| s.1).max()
    }

    /// The largest reading taken before `t`, in bytes.
    pub fn peak_before(&self, t: std::time::Instant) -> Option<u64> {
        self.samples.iter().filter(|s| s.0 < t).map(|s| s.1).max()
    }

    /// The last reading, in bytes.
    pub fn last(&self) -> Option<u64> {
        self.samples.last().map(|s| s.1)
    }
}

/// Read the VmRSS of every process in `pids` at once, then every `every`, and a last
/// time at `until` (if that is still ahead), on a thread of its own. Join the handle for
/// one [`RssTrack`] per PID, in order.
pub fn sample_rss(
    pids: Vec<u32>,
    every: Duration,
    until: std::time::Instant,
) -> std::io::Result<std::thread::JoinHandle<Vec<RssTrack>>> {
    std::thread::Builder::new()
        .name("rss-sampler".into())
        .spawn(move || {
            let mut tracks = vec![RssTrack::default(); pids.len()];
            loop {
                for (track, pid) in tracks.iter_mut().zip(&pids) {
                    if let Some(rss) = rss_bytes(*pid) {
                        track.samples.push((std::time::Instant::now(), rss));
                    }
                }
                let now = std::time::Instant::now();
                if now >= until {
                    return tracks;
                }
                std::thread::sleep(every.min(until - now));
            }
        })
}

/// Busy and total CPU time of the whole machine since boot, summed over cores.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MachineTicks {
    pub busy: u64,
    pub total: u64,
}

/// The aggregate `cpu` line of `/proc/stat`.
pub fn parse_machine_ticks(proc_stat: &str) -> Option<MachineTicks> {
    let line = proc_stat.lines().find(|l| l.starts_with("cpu "))?;
    let values: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    if values.len() < 4 {
        return None;
    }
    // user nice system idle iowait irq softirq steal guest guest_nice; guest time is
    // already inside user/nice, so only the first eight count.
    let counted = &values[..values.len().min(8)];
    let total: u64 = counted.iter().sum();
    let idle = values[3] + values.get(4).copied().unwrap_or(0);
    Some(MachineTicks {
        busy: total - idle,
        total,
    })
}

pub fn machine_ticks() -> Option<MachineTicks> {
    parse_machine_ticks(&std::fs::read_to_string("/proc/stat").ok()?)
}

/// Cores of the whole machine kept busy between two samples taken `wall` apart.
pub fn machine_busy_cores(
    before: MachineTicks,
    after: MachineTicks,
    wall: Duration,
) -> Option<f64> {
    let busy = after.busy.checked_sub(before.busy)?;
    let wall_s = wall.as_secs_f64();
    (wall_s > 0.0).then(|| ticks_to_duration(busy).as_secs_f64() / wall_s)
}

/// Number of cores this process may run on.
pub fn available_cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_tree_counts_the_children_too() {
        use super::*;
        let stat = "42 (node (x)) S 7 42 42 0 -1 4194304 1 0 0 0 100 50 30 20 20 0 1 0";
        let (ppid, cpu) = parse_stat_parent_and_cpu(stat).unwrap();
        let tick = ticks_to_duration(1);
        assert_eq!((ppid, cpu), (7, tick * 200));
        // A child that spends CPU, then sleeps: the tree holds at least both clocks.
        let mut child = std::process::Command::new("sh")
            .args([
                "-c",
                "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; sleep 5",
            ])
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let mut child_cpu = Duration::ZERO;
        while child_cpu < tick * 5 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
            child_cpu = process_cpu_time(child.id()).unwrap_or_default();
        }
        let own = process_cpu_time(std::process::id()).unwrap();
        let child_cpu = process_cpu_time(child.id()).unwrap();
        let tree = tree_cpu_time(std::process::id()).unwrap();
        let _ = child.kill();
        let _ = child.wait();
        assert!(child_cpu >= tick * 5, "the child spent {child_cpu:?}");
        assert!(
            tree >= own + child_cpu,
            "tree {tree:?} < own {own:?} + child {child_cpu:?}"
        );
    }

    use super::*;

    #[test]
    fn stat_cpu_survives_odd_command_names() {
        let ticks = ticks_per_second();
        let stat = format!(
            "42 (we ird) (x)) S 1 42 42 0 -1 4194560 100 0 0 0 {} {} 0 0 20 0 1 0 5 0 0",
            ticks * 2,
            ticks
        );
        assert_eq!(parse_stat_cpu(&stat), Some(Duration::from_secs(3)));
        assert_eq!(parse_stat_cpu("garbage"), None);
    }

    #[test]
    fn peak_rss_is_read_in_bytes() {
        let status = "Name:\tgateway\nVmPeak:\t  10000 kB\nVmHWM:\t    2048 kB\nVmRSS:\t 1000 kB\n";
        assert_eq!(parse_peak_rss(status), Some(2048 * 1024));
        assert_eq!(parse_peak_rss("Name: x\n"), None);
        assert_eq!(parse_rss(status), Some(1000 * 1024));
        assert_eq!(parse_rss("Name: x\n"), None);
    }

    #[test]
    fn rss_is_sampled_until_the_deadline() {
        let started = std::time::Instant::now();
        let until = started + Duration::from_millis(350);
        let tracks = sample_rss(
            vec![std::process::id(), u32::MAX],
            Duration::from_millis(100),
            until,
        )
        .unwrap()
        .join()
        .unwrap();
        assert!(started.elapsed() >= Duration::from_millis(350));
        assert!(started.elapsed() < Duration::from_secs(10));
        let own = &tracks[0];
        // At 0, 100, 200, 300 and 350 ms (fewer if the machine stalls the thread).
        let n = own.samples.len();
        assert!((2..=6).contains(&n), "{own:?}");
        assert!(own.peak().unwrap() >= own.last().unwrap() && own.last().unwrap() > 0);
        assert!(own.samples.windows(2).all(|w| w[0].0 <= w[1].0));
        assert_eq!(own.peak_before(started), None);
        assert_eq!(own.peak_before(until + Duration::from_secs(1)), own.peak());
        // No such process: no readings, no figures.
        assert_eq!(tracks[1], RssTrack::default());
    }

    #[test]
    fn machine_ticks_count_idle_and_iowait_as_idle() {
        let t = parse_machine_ticks("cpu  10 0 5 80 5 0 0 0 0 0\ncpu0 1 2 3 4\n").unwrap();
        assert_eq!(
            t,
            MachineTicks {
                busy: 15,
                total: 100
            }
        );
    }

    #[test]
    fn own_process_and_thread_are_readable() {
        // Burn a little CPU so the counters move.
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        assert!(x != 1);
        assert!(own_cpu_time() > Duration::ZERO);
        assert!(current_thread_cpu_time() > Duration::ZERO);
        assert!(process_cpu_time(std::process::id()).is_some());
        assert!(peak_rss_bytes(std::process::id()).unwrap() > 0);
        assert!(rss_bytes(std::process::id()).unwrap() > 0);
        assert!(machine_ticks().unwrap().total > 0);
    }
}
