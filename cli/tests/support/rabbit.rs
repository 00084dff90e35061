//! RabbitMQ steps the command's tests share: a channel with durable queues, a queue's depth.
#![allow(dead_code)] // each includer uses a part

use lapin::options::QueueDeclareOptions;

/// A channel on the broker at `amqp`, with `queues` declared durable.
pub(crate) async fn durable_queues(amqp: &str, queues: &[&str]) -> lapin::Channel {
    let channel = lapin::Connection::connect(amqp, Default::default())
        .await
        .unwrap()
        .create_channel()
        .await
        .unwrap();
    for q in queues {
        channel
            .queue_declare(
                (*q).into(),
                QueueDeclareOptions {
                    durable: true,
                    ..Default::default()
                },
                Default::default(),
            )
            .await
            .unwrap();
    }
    channel
}

/// The messages ready in `queue`, or `None` when it does not exist or the broker at `amqp`
/// cannot be asked (a connection of its own: a failed passive declare closes its channel).
pub(crate) async fn depth(amqp: &str, queue: &str) -> Option<u32> {
    let connection = lapin::Connection::connect(amqp, Default::default())
        .await
        .ok()?;
    let declared = match connection.create_channel().await {
        Ok(channel) => channel
            .queue_declare(
                queue.into(),
                QueueDeclareOptions {
                    passive: true,
                    ..Default::default()
                },
                Default::default(),
            )
            .await
            .ok(),
        Err(_) => None,
    };
    let _ = connection.close(200, "done".into()).await;
    declared.map(|q| q.message_count())
}
