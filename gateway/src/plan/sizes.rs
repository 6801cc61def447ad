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

/// The room one request of a plan used.
#[derive(Debug, Default)]
pub struct SizeHints {
    /// Bytes of the response.
    response: AtomicU32,
    /// Objects that entity answers were merged into.
    merges: AtomicU32,
}

impl SizeHints {
    /// The most a hint asks for: larger responses grow from here.
    const MAX_RESPONSE: usize = 4 << 20;
    /// The most merges a hint asks room for.
    const MAX_MERGES: usize = 1 << 16;

    /// The response bytes to reserve.
    pub fn response(&self) -> usize {
        self.response.load(Ordering::Relaxed) as usize
    }

    /// The objects with merged entity answers to reserve room for.
    pub fn merges(&self) -> usize {
        self.merges.load(Ordering::Relaxed) as usize
    }

    /// What a request used: its response's bytes.
    pub fn note_response(&self, bytes: usize) {
        store(&self.response, bytes.min(Self::MAX_RESPONSE));
    }

    /// What a request used: the objects it merged entity answers into.
    pub fn note_merges(&self, merges: usize) {
        store(&self.merges, merges.min(Self::MAX_MERGES));
    }
}

/// The room one request used in one entity fetch ([`crate::plan::Fetch::room`]):
/// the steps of its targets' places in the response, and its representations' text.
#[derive(Debug, Default)]
pub struct FetchRoom {
    steps: AtomicU32,
    text: AtomicU32,
}

impl FetchRoom {
    /// The most steps a hint asks room for (each is 24 bytes).
    const MAX_STEPS: usize = 1 << 16;
    /// The most representation bytes a hint asks room for.
    const MAX_TEXT: usize = 1 << 20;

    /// The steps to reserve.
    pub fn steps(&self) -> usize {
        self.steps.load(Ordering::Relaxed) as usize
    }

    /// The representation bytes to reserve.
    pub fn text(&self) -> usize {
        self.text.load(Ordering::Relaxed) as usize
    }

    /// What a request used: its steps and its representations' bytes.
    pub fn note(&self, steps: usize, text: usize) {
        store(&self.steps, steps.min(Self::MAX_STEPS));
        store(&self.text, text.min(Self::MAX_TEXT));
    }
}

fn store(slot: &AtomicU32, value: usize) {
    let value = value as u32;
    if slot.load(Ordering::Relaxed) != value {
        slot.store(value, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::{FetchRoom, SizeHints};

    #[test]
    fn a_hint_is_the_last_request_s_figure_capped() {
        let hints = SizeHints::default();
        assert_eq!((hints.response(), hints.merges()), (0, 0));
        hints.note_response(98_525);
        hints.note_merges(700);
        assert_eq!((hints.response(), hints.merges()), (98_525, 700));
        // A smaller request replaces it; a huge one is capped.
        hints.note_response(200);
        assert_eq!(hints.response(), 200);
        hints.note_response(usize::MAX);
        hints.note_merges(usize::MAX);
        assert_eq!(hints.response(), SizeHints::MAX_RESPONSE);
        assert_eq!(hints.merges(), SizeHints::MAX_MERGES);
    }

    #[test]
    fn a_fetch_s_room_is_its_last_request_s_capped() {
        let room = FetchRoom::default();
        assert_eq!((room.steps(), room.text()), (0, 0));
        room.note(2_000, 30_000);
        assert_eq!((room.steps(), room.text()), (2_000, 30_000));
        room.note(3, usize::MAX);
        assert_eq!((room.steps(), room.text()), (3, FetchRoom::MAX_TEXT));
    }
}
