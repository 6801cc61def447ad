//! What the last request of a plan needed room for, so that the next one reserves
//! it at once instead of growing into it.
//!
//! A deep answer is written into a buffer of about 100 KB and gathers hundreds of
//! entity merges, and each of its entity fetches lists the places of hundreds of
//! objects and writes their representations; started small, each of these buffers
//! is copied again and again as it doubles. Requests of one plan are alike (the same
//! fetches answering the same selections), so each reserves what the one before it
//! used. Requests on other threads share the figures: they are read and written with
//! relaxed atomics, written only when they change, and capped, so that one
//! unusually large answer cannot make every later request of the plan reserve a
//! large buffer for long (the next request's own figure replaces it). A response
//! that came out much smaller than its reserved buffer is shrunk before it is sent
//! or stored, so a kept answer never holds the room of an earlier one.

use std::sync::atomic::{AtomicU32, Ordering};

/// One figure of room: what the last request used, capped at `MAX` so that one
/// unusually large request cannot make the next ones reserve much.
#[derive(Debug, Default)]
pub struct Room<const MAX: usize>(AtomicU32);

impl<const MAX: usize> Room<MAX> {
    /// The room to reserve.
    pub fn get(&self) -> usize {
        self.0.load(Ordering::Relaxed) as usize
    }

    /// What a request used.
    pub fn note(&self, used: usize) {
        let used = used.min(MAX) as u32;
        if self.0.load(Ordering::Relaxed) != used {
            self.0.store(used, Ordering::Relaxed);
        }
    }
}

/// The room one request of a plan used.
#[derive(Debug, Default)]
pub struct SizeHints {
    /// Bytes of the response (larger responses grow from 4 MiB).
    pub response: Room<{ 4 << 20 }>,
    /// Objects that entity answers were merged into.
    pub merges: Room<{ 1 << 16 }>,
}

/// The room one request used in one entity fetch ([`crate::plan::Fetch::room`]).
#[derive(Debug, Default)]
pub struct FetchRoom {
    /// The steps of its targets' places in the response (24 bytes each).
    pub steps: Room<{ 1 << 16 }>,
    /// Its representations' text, in bytes.
    pub text: Room<{ 1 << 20 }>,
    /// The most objects one of its paths reached.
    pub targets: Room<{ 1 << 14 }>,
}

#[cfg(test)]
mod tests {
    use super::Room;

    #[test]
    fn room_is_the_last_request_s_figure_capped() {
        let room = Room::<100_000>::default();
        assert_eq!(room.get(), 0);
        room.note(98_525);
        assert_eq!(room.get(), 98_525);
        // A smaller request replaces it; a huge one is capped.
        room.note(200);
        assert_eq!(room.get(), 200);
        room.note(usize::MAX);
        assert_eq!(room.get(), 100_000);
    }
}
