//! Handover semantics: one-slot hand-off, error propagation, close from either side, wake-up.

use std::sync::Arc;
use std::thread;
use std::time::Duration;

use rivus_sdk::handover::{Handover, HandoverError, ProduceError};
use rivus_sdk::Error;

#[tokio::test]
async fn hands_over_in_order_from_a_blocking_thread() {
    let h = Arc::new(Handover::new());
    let p = Arc::clone(&h);
    let producer = thread::spawn(move || {
        for i in 0..1000u32 {
            p.produce(i).unwrap();
        }
        p.close();
    });
    let mut got = Vec::new();
    loop {
        match h.poll_next().await {
            Ok(v) => got.push(v),
            Err(HandoverError::Closed) => break,
            Err(e) => panic!("{e}"),
        }
    }
    producer.join().unwrap();
    // close() drops an element still in the slot; the producer only closes after its last
    // produce returned, which means the consumer may not have taken the last one yet.
    assert!(got.len() >= 999);
    assert!(got.iter().enumerate().all(|(i, v)| *v == i as u32));
}

#[tokio::test]
async fn producer_blocks_while_the_slot_is_full() {
    let h = Arc::new(Handover::new());
    h.produce(1).unwrap();
    let p = Arc::clone(&h);
    let (tx, rx) = std::sync::mpsc::channel();
    let producer = thread::spawn(move || {
        let r = p.produce(2);
        tx.send(()).unwrap();
        r
    });
    // The second produce cannot finish until the first element is taken.
    assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
    assert_eq!(h.poll_next().await.unwrap(), 1);
    rx.recv_timeout(Duration::from_secs(5))
        .expect("producer released");
    producer.join().unwrap().unwrap();
    assert_eq!(h.poll_next().await.unwrap(), 2);
}

#[tokio::test]
async fn error_reaches_the_consumer_once_and_stops_the_producer() {
    let h: Handover<u8> = Handover::new();
    h.report_error(Error::connector("poll loop", "broker went away"));
    h.report_error(Error::connector("poll loop", "second error is dropped"));
    match h.poll_next().await {
        Err(HandoverError::Failed(e)) => assert!(e.to_string().contains("broker went away")),
        other => panic!("expected the error, got {other:?}"),
    }
    assert!(matches!(h.poll_next().await, Err(HandoverError::Closed)));
    assert_eq!(h.produce(7), Err(ProduceError::Closed(7)));
}

#[tokio::test]
async fn close_from_the_consumer_side_wakes_a_blocked_producer() {
    let h = Arc::new(Handover::new());
    h.produce(1).unwrap();
    let p = Arc::clone(&h);
    let producer = thread::spawn(move || p.produce(2));
    thread::sleep(Duration::from_millis(20));
    h.close();
    assert_eq!(producer.join().unwrap(), Err(ProduceError::Closed(2)));
    assert!(matches!(h.poll_next().await, Err(HandoverError::Closed)));
}

#[tokio::test]
async fn close_from_the_producer_side_wakes_a_waiting_consumer() {
    let h: Arc<Handover<u8>> = Arc::new(Handover::new());
    let c = Arc::clone(&h);
    let consumer = tokio::spawn(async move { c.poll_next().await });
    tokio::time::sleep(Duration::from_millis(20)).await;
    h.close();
    assert!(matches!(
        consumer.await.unwrap(),
        Err(HandoverError::Closed)
    ));
}

#[tokio::test]
async fn wakeup_returns_the_element_to_the_producer() {
    let h = Arc::new(Handover::new());
    h.produce(1).unwrap();
    let p = Arc::clone(&h);
    let producer = thread::spawn(move || p.produce(2));
    thread::sleep(Duration::from_millis(20));
    h.wakeup_producer();
    assert_eq!(producer.join().unwrap(), Err(ProduceError::Wakeup(2)));
    // The handover is still usable afterwards.
    assert_eq!(h.poll_next().await.unwrap(), 1);
    h.produce_async(3).await.unwrap();
    assert_eq!(h.poll_next().await.unwrap(), 3);
}
