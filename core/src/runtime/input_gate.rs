//! The input side of a task fed by several upstream subtasks: one bounded channel per upstream
//! subtask, barrier alignment (an input that delivered barrier N is not read until every input
//! has), and watermark merging (the minimum over live inputs).

use std::future::poll_fn;
use std::task::Poll;

use tokio::sync::mpsc;

use super::event::{Batch, Event};

/// What the task loop gets from its inputs.
#[derive(Debug)]
pub(crate) enum InputEvent<T> {
    Records(Batch<T>),
    Watermark(i64),
    /// Barrier `id` arrived on every live input.
    Barrier(u64),
    /// Every input ended.
    End,
    /// An input closed without ending: its upstream subtask failed or was cancelled (which
    /// the job reports). The input is not over, so a sink must not finish (and commit) on it.
    Broken,
}

pub(crate) struct InputGate<T> {
    inputs: Vec<Option<mpsc::Receiver<Event<T>>>>,
    /// Input `i` sent [`Event::End`].
    ended: Vec<bool>,
    blocked: Vec<bool>,
    aligning: Option<u64>,
    watermarks: Vec<i64>,
    emitted_watermark: i64,
    next: usize,
}

impl<T> InputGate<T> {
    pub(super) fn new(inputs: Vec<mpsc::Receiver<Event<T>>>) -> Self {
        let n = inputs.len();
        InputGate {
            inputs: inputs.into_iter().map(Some).collect(),
            ended: vec![false; n],
            blocked: vec![false; n],
            aligning: None,
            watermarks: vec![i64::MIN; n],
            emitted_watermark: i64::MIN,
            next: 0,
        }
    }

    fn live(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.inputs.len()).filter(|&i| self.inputs[i].is_some())
    }

    /// If every live input is blocked on the current barrier, completes the alignment.
    fn try_align(&mut self) -> Option<InputEvent<T>> {
        let id = self.aligning?;
        if self.live().all(|i| self.blocked[i]) {
            self.aligning = None;
            self.blocked.iter_mut().for_each(|b| *b = false);
            return Some(InputEvent::Barrier(id));
        }
        None
    }

    fn min_watermark(&self) -> Option<i64> {
        let wm = self.live().map(|i| self.watermarks[i]).min()?;
        (wm > self.emitted_watermark).then_some(wm)
    }

    /// Interprets one event from input `i`; `None` when it produced nothing for the task.
    fn on_event(&mut self, i: usize, ev: Option<Event<T>>) -> Option<InputEvent<T>> {
        match ev {
            Some(Event::Records(b)) => Some(InputEvent::Records(b)),
            Some(Event::Watermark(w)) => {
                self.watermarks[i] = self.watermarks[i].max(w);
                let wm = self.min_watermark()?;
                self.emitted_watermark = wm;
                Some(InputEvent::Watermark(wm))
            }
            Some(Event::Barrier(id)) => {
                if self.aligning.is_none() {
                    self.aligning = Some(id);
                }
                self.blocked[i] = true;
                self.try_align()
            }
            Some(Event::End) => {
                // The channel closes next; until then the input counts as live.
                self.ended[i] = true;
                None
            }
            // Closed without `End`: the upstream subtask failed or was cancelled.
            None if !self.ended[i] => Some(InputEvent::Broken),
            None => {
                self.inputs[i] = None;
                self.blocked[i] = false;
                if self.live().next().is_none() {
                    return Some(InputEvent::End);
                }
                if let Some(ev) = self.try_align() {
                    return Some(ev);
                }
                let wm = self.min_watermark()?;
                self.emitted_watermark = wm;
                Some(InputEvent::Watermark(wm))
            }
        }
    }

    /// The next event if one is ready now, without waiting.
    pub(super) fn try_next(&mut self) -> Option<InputEvent<T>> {
        let n = self.inputs.len();
        if self.live().next().is_none() {
            return Some(InputEvent::End);
        }
        let mut tries = 0;
        while tries < n {
            let i = self.next % n;
            self.next = self.next.wrapping_add(1);
            tries += 1;
            if self.blocked[i] {
                continue;
            }
            let Some(rx) = self.inputs[i].as_mut() else {
                continue;
            };
            let ev = match rx.try_recv() {
                Ok(ev) => Some(ev),
                Err(mpsc::error::TryRecvError::Empty) => continue,
                Err(mpsc::error::TryRecvError::Disconnected) => None,
            };
            if let Some(out) = self.on_event(i, ev) {
                return Some(out);
            }
            tries = 0;
        }
        None
    }

    /// Waits for the next event. Cancel-safe.
    pub(super) async fn next(&mut self) -> InputEvent<T> {
        loop {
            if self.live().next().is_none() {
                return InputEvent::End;
            }
            let (i, ev) = poll_fn(|cx| {
                let n = self.inputs.len();
                for k in 0..n {
                    let i = (self.next + k) % n;
                    if self.blocked[i] {
                        continue;
                    }
                    if let Some(rx) = self.inputs[i].as_mut() {
                        if let Poll::Ready(ev) = rx.poll_recv(cx) {
                            self.next = i + 1;
                            return Poll::Ready((i, ev));
                        }
                    }
                }
                Poll::Pending
            })
            .await;
            if let Some(out) = self.on_event(i, ev) {
                return out;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn records(v: i32) -> Event<i32> {
        let mut b = Batch::with_capacity(1);
        b.push(v, None);
        Event::Records(b)
    }

    #[tokio::test]
    async fn aligns_barriers_and_blocks_aligned_inputs() {
        let (tx0, rx0) = mpsc::channel(8);
        let (tx1, rx1) = mpsc::channel(8);
        let mut gate = InputGate::new(vec![rx0, rx1]);
        tx0.send(Event::Barrier(1)).await.unwrap();
        tx0.send(records(10)).await.unwrap(); // after the barrier: must wait
        tx1.send(records(1)).await.unwrap();
        let mut seen = Vec::new();
        // Input 0 is blocked after its barrier, so only input 1's record is readable.
        while let Some(ev) = gate.try_next() {
            seen.push(format!("{ev:?}"));
        }
        assert_eq!(seen.len(), 1, "{seen:?}");
        assert!(seen[0].contains("[1]"), "{seen:?}");
        tx1.send(Event::Barrier(1)).await.unwrap();
        assert!(matches!(gate.next().await, InputEvent::Barrier(1)));
        match gate.next().await {
            InputEvent::Records(b) => assert_eq!(b.values, vec![10]),
            other => panic!("expected input 0's record, got {other:?}"),
        }
        for tx in [tx0, tx1] {
            tx.send(Event::End).await.unwrap();
        }
        assert!(matches!(gate.next().await, InputEvent::End));
    }

    #[tokio::test]
    async fn watermark_is_minimum_of_live_inputs() {
        let (tx0, rx0) = mpsc::channel(8);
        let (tx1, rx1) = mpsc::channel(8);
        let mut gate: InputGate<i32> = InputGate::new(vec![rx0, rx1]);
        tx0.send(Event::Watermark(50)).await.unwrap();
        tx1.send(Event::Watermark(20)).await.unwrap();
        assert!(matches!(gate.next().await, InputEvent::Watermark(20)));
        tx1.send(Event::End).await.unwrap();
        drop(tx1); // a finished input no longer holds the watermark back
        assert!(matches!(gate.next().await, InputEvent::Watermark(50)));
        tx0.send(Event::End).await.unwrap();
        drop(tx0);
        assert!(matches!(gate.next().await, InputEvent::End));
    }

    #[tokio::test]
    async fn an_input_closed_without_ending_is_broken_not_ended() {
        let (tx0, rx0) = mpsc::channel(8);
        let (tx1, rx1) = mpsc::channel(8);
        let mut gate = InputGate::new(vec![rx0, rx1]);
        tx0.send(records(1)).await.unwrap();
        tx0.send(Event::End).await.unwrap();
        drop(tx0);
        assert!(matches!(gate.next().await, InputEvent::Records(_)));
        // Input 0 ended; input 1's upstream fails: its channel closes without `End`.
        drop(tx1);
        assert!(matches!(gate.next().await, InputEvent::Broken));
    }
}
