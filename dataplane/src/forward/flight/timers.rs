//! The forwarder's timers: every question has one for its whole budget and one for each try.
//! Most fall due in the order they are set (a budget is the same length for every question;
//! a try's timeout changes only as its upstream's round-trip estimate does), so they wait in
//! two queues, one per kind, where setting and taking one costs a few instructions; the few
//! that would fall due before the last of their queue wait in a heap. One binary heap of all
//! of them holds thousands under load (a question's budget is 1.5 s), and each pop walks its
//! whole depth.
//!
//! Timers are never cancelled: the machine drops those of ended tries and questions as they
//! come up.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Instant;

/// One timer: when, and which question (its slot and serial) or try it is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Timer {
    pub(super) at: Instant,
    pub(super) serial: u64,
    pub(super) slot: usize,
    /// The try that times out, or `None` for the question's whole budget.
    pub(super) attempt: Option<usize>,
}

/// Timers in the order they fall due; of timers due at the same instant, any may come first.
#[derive(Debug, Default)]
pub(super) struct Timers {
    /// Question budgets, then try timeouts, each in the order they fall due.
    queues: [VecDeque<Timer>; 2],
    /// Those that fall due before the last timer of their kind.
    early: BinaryHeap<Reverse<Timer>>,
    /// Where the first timer waits, kept up to date by every push and pop: the machine asks
    /// for it more often than it sets timers.
    first: Option<First>,
}

/// Where the timer that falls due first waits.
#[derive(Debug, Clone, Copy)]
enum First {
    Queue(usize),
    Early,
}

impl Timers {
    /// Sets `timer`.
    pub(super) fn push(&mut self, timer: Timer) {
        let k = usize::from(timer.attempt.is_some());
        let queue = &mut self.queues[k];
        let at = timer.at;
        let place = if queue.back().is_none_or(|last| last.at <= at) {
            queue.push_back(timer);
            First::Queue(k)
        } else {
            self.early.push(Reverse(timer));
            First::Early
        };
        if self.peek().is_none_or(|first| at < first.at) {
            self.first = Some(place);
        }
    }

    /// The timer that falls due first.
    pub(super) fn peek(&self) -> Option<&Timer> {
        match self.first? {
            First::Queue(k) => self.queues[k].front(),
            First::Early => self.early.peek().map(|Reverse(t)| t),
        }
    }

    /// Takes the timer that falls due first.
    pub(super) fn pop(&mut self) -> Option<Timer> {
        let timer = match self.first? {
            First::Queue(k) => self.queues[k].pop_front(),
            First::Early => self.early.pop().map(|Reverse(t)| t),
        };
        self.first = self.find_first();
        timer
    }

    fn find_first(&self) -> Option<First> {
        let mut first: Option<(Instant, First)> = None;
        let fronts = [
            (self.queues[0].front(), First::Queue(0)),
            (self.queues[1].front(), First::Queue(1)),
            (self.early.peek().map(|Reverse(t)| t), First::Early),
        ];
        for (timer, place) in fronts {
            if let Some(timer) = timer {
                if first.is_none_or(|(at, _)| timer.at < at) {
                    first = Some((timer.at, place));
                }
            }
        }
        first.map(|(_, place)| place)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn timer(start: Instant, ms: u64, serial: u64, attempt: Option<usize>) -> Timer {
        Timer {
            at: start + Duration::from_millis(ms),
            serial,
            slot: 0,
            attempt,
        }
    }

    /// Whatever the order they are set in, timers come out in the order they fall due, as
    /// from one heap (of timers due at the same instant, in any order).
    #[test]
    fn timers_fall_due_in_order_whatever_the_order_they_were_set_in() {
        let start = Instant::now();
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut next = move |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        let mut timers = Timers::default();
        let mut reference = BinaryHeap::new();
        let mut popped = Vec::new();
        let mut now = 0;
        for serial in 0..5_000 {
            now += next(3);
            // Mostly in order (a fixed budget, a slowly moving timeout), sometimes not.
            let (ms, attempt) = match next(10) {
                0 => (now + next(1_500), None),
                1..=5 => (now + 1_500, None),
                _ => (now + 200 + next(50), Some(next(3) as usize)),
            };
            let t = timer(start, ms, serial, attempt);
            timers.push(t);
            reference.push(Reverse(t));
            if next(4) == 0 {
                popped.push(pop(&mut timers, &mut reference));
            }
        }
        while !reference.is_empty() {
            popped.push(pop(&mut timers, &mut reference));
        }
        assert_eq!(timers.pop(), None);
        assert_eq!(timers.peek(), None);
        let mut serials: Vec<u64> = popped.iter().map(|t| t.serial).collect();
        serials.sort_unstable();
        assert_eq!(serials, (0..5_000).collect::<Vec<_>>(), "every timer comes out once");
    }

    /// Pops from both, checking that the timer is one due first and that peek named it.
    fn pop(timers: &mut Timers, reference: &mut BinaryHeap<Reverse<Timer>>) -> Timer {
        let peeked = *timers.peek().expect("a timer is set");
        let timer = timers.pop().expect("a timer is set");
        assert_eq!(peeked, timer);
        let Reverse(due) = reference.pop().expect("as many as set");
        assert_eq!(timer.at, due.at, "{timer:?} came out before {due:?}");
        timer
    }
}
