//! The Linux calls a connection's loop is made of: reads that carry the kernel's
//! arrival time, `ppoll` with a nanosecond timeout, a thread's timer slack, and an
//! abortive close.
//!
//! **Arrival times.** Every socket has `SO_TIMESTAMPNS` on, so `recvmsg` hands back the
//! time the kernel queued the last segment read (`CLOCK_REALTIME`). A chunk's delay
//! runs from there, not from when the proxy's thread got round to reading it: a thread
//! that was spinning towards another chunk's deadline, or descheduled on a busy
//! machine, does not lengthen the delay. Where the kernel gives no stamp, the time of
//! the read is used.
//!
//! **Timer slack.** Linux lets a sleeping thread's timeout expire up to its timer slack
//! late (50 µs by default) to batch wake-ups. The connection threads set it to 1 ns
//! (`PR_SET_TIMERSLACK`), so `ppoll` wakes them within the scheduler's latency.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Ask the kernel to time-stamp what arrives on `fd` (`SO_TIMESTAMPNS`).
pub fn enable_arrival_stamps(fd: &impl AsRawFd) -> io::Result<()> {
    set_int_option(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1)
}

fn set_int_option(fd: RawFd, level: libc::c_int, name: libc::c_int, value: i32) -> io::Result<()> {
    // SAFETY: `value` outlives the call and its size is passed.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const i32).cast(),
            std::mem::size_of::<i32>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Make the next close of `fd` send a RST instead of a FIN (`SO_LINGER` 0): how a
/// reset is passed on.
pub fn reset_on_close(fd: &impl AsRawFd) -> io::Result<()> {
    let linger = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: `linger` outlives the call and its size is passed.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&linger as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Let this thread's timed sleeps end on time (timer slack 1 ns instead of 50 µs).
pub fn tighten_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes an integer and touches only this thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

/// What one read gave.
pub enum Read {
    /// `n` bytes, and when the kernel received them.
    Data(usize, Instant),
    /// The peer closed its side (EOF).
    Closed,
    /// Nothing to read now.
    WouldBlock,
}

/// One non-blocking `recvmsg` into `buf`, with the arrival time of the data.
pub fn read_stamped(fd: &impl AsRawFd, buf: &mut [u8]) -> io::Result<Read> {
    // Room for one cmsg holding a timespec (SCM_TIMESTAMPNS); u64 for alignment.
    let mut control = [0u64; 8];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: an all-zero msghdr is valid; the pointers set below outlive the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: `msg` points at `buf` and `control`, both alive and of the sizes given.
    let n = unsafe { libc::recvmsg(fd.as_raw_fd(), &mut msg, libc::MSG_DONTWAIT) };
    let now = Instant::now();
    if n < 0 {
        let e = io::Error::last_os_error();
        return match e.kind() {
            io::ErrorKind::WouldBlock => Ok(Read::WouldBlock),
            io::ErrorKind::Interrupted => Ok(Read::WouldBlock),
            _ => Err(e),
        };
    }
    if n == 0 {
        return Ok(Read::Closed);
    }
    Ok(Read::Data(n as usize, arrival(&msg, now)))
}

/// How far apart the two monotonic readings around a wall-clock reading may be for
/// [`clock_pair`] to take them (a few vDSO reads take well under a microsecond).
const PAIR_GAP: Duration = Duration::from_micros(2);

/// This moment on both clocks: the wall clock read between two monotonic readings at
/// most [`PAIR_GAP`] apart, paired with their midpoint; after 8 tries, the closest pair.
/// A thread preempted between two plain readings would pair the wall clock with an
/// older monotonic time, and a stamp converted with them would come out early by as
/// much (which showed as round trips up to 46 µs shorter than `--rtt 500us`).
fn clock_pair() -> (Instant, SystemTime) {
    let mut best: Option<(Duration, Instant, SystemTime)> = None;
    for _ in 0..8 {
        let before = Instant::now();
        let wall = SystemTime::now();
        let gap = before.elapsed();
        let mid = before + gap / 2;
        if gap <= PAIR_GAP {
            return (mid, wall);
        }
        if best.is_none_or(|(closest, _, _)| gap < closest) {
            best = Some((gap, mid, wall));
        }
    }
    best.map_or_else(
        || (Instant::now(), SystemTime::now()),
        |(_, mid, wall)| (mid, wall),
    )
}

/// The kernel's stamp in `msg` as an `Instant` (`now` when there is none): its age
/// against the wall clock, read as a pair with the monotonic clock ([`clock_pair`]).
fn arrival(msg: &libc::msghdr, now: Instant) -> Instant {
    // SAFETY: CMSG_FIRSTHDR/NXTHDR walk the control buffer `msg` describes, which
    // recvmsg filled; a header's data is read only for SCM_TIMESTAMPNS, a timespec.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_TIMESTAMPNS
            {
                let ts: libc::timespec = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast());
                let stamped = UNIX_EPOCH + Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32);
                // A stamp in the future (the wall clock stepped back) counts as now; an
                // age over a second (stepped forward) is not believed.
                let (mono, wall) = clock_pair();
                let age = wall.duration_since(stamped).unwrap_or(Duration::ZERO);
                if age > Duration::from_secs(1) {
                    return now;
                }
                return mono.checked_sub(age).unwrap_or(now);
            }
            cmsg = libc::CMSG_NXTHDR(msg, cmsg);
        }
    }
    now
}

/// One non-blocking `send` of `data`; `Ok(None)` when the socket buffer is full.
pub fn write_some(fd: &impl AsRawFd, data: &[u8]) -> io::Result<Option<usize>> {
    // SAFETY: `data` is alive and its length is passed. MSG_NOSIGNAL: a closed peer is
    // an EPIPE error, not a SIGPIPE.
    let n = unsafe {
        libc::send(
            fd.as_raw_fd(),
            data.as_ptr().cast(),
            data.len(),
            libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
        )
    };
    if n >= 0 {
        return Ok(Some(n as usize));
    }
    let e = io::Error::last_os_error();
    match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(None),
        _ => Err(e),
    }
}

/// `ppoll` on `fds` for at most `timeout` (forever with `None`); returns how many
/// descriptors have events. An interrupted wait returns 0.
pub fn poll(fds: &mut [libc::pollfd], timeout: Option<Duration>) -> io::Result<usize> {
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs() as libc::time_t,
        tv_nsec: t.subsec_nanos() as _,
    });
    let ts_ptr = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `fds` and `ts` are alive for the call; no signal mask is changed.
    let n = unsafe {
        libc::ppoll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            ts_ptr,
            std::ptr::null(),
        )
    };
    if n >= 0 {
        return Ok(n as usize);
    }
    let e = io::Error::last_os_error();
    if e.kind() == io::ErrorKind::Interrupted {
        Ok(0)
    } else {
        Err(e)
    }
}
