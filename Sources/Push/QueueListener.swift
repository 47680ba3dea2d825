import APNs
import Logging
import Observability
import PostgresNIO
import Settings
import Storage
import Support

/// Keeps a `LISTEN push_queue` connection open and turns every NOTIFY into a wake-up. NOTIFYs are lost while the
/// connection is down, so it also wakes everyone after each (re)connect; the poll interval covers the rest.
///
/// A NOTIFY's payload is the lowest message id of the rows that became claimable (queued, given back, returned from
/// an expired lease): the claim cursors rewind to it. While it listens, the cursors rely on that (``PushQueue/Cursors``);
/// a payload that is not an id (a broadcast accepted, rows requeued) and each (re)connect rewind them to the start.
struct QueueListener: Sendable {
    let url: DatabaseURL
    let signal: QueueSignal
    let cursors: PushQueue.Cursors
    let logger: Logger

    /// The listener the daemon runs: on `database_url` when it reaches PostgreSQL directly, on `database_listen_url`
    /// behind a pooler (transaction pooling cannot carry `LISTEN`), or none (polling every `poll_interval`); said at
    /// start.
    static func choose(
        configuration: Configuration,
        session: DatabaseSession?,
        signal: QueueSignal,
        cursors: PushQueue.Cursors,
        logger: Logger
    ) -> QueueListener? {
        guard session?.isPooled == true else {
            return QueueListener(url: configuration.databaseURL, signal: signal, cursors: cursors, logger: logger)
        }
        if let listen = configuration.databaseListenURL {
            logger.info("Behind a pooler: LISTEN push_queue on database_listen_url (\(listen))")
            return QueueListener(url: listen, signal: signal, cursors: cursors, logger: logger)
        }
        logger.notice(
            "Behind a pooler and no database_listen_url: no LISTEN (a pooler in transaction mode cannot carry it); polling the queue every \(configuration.pollInterval.formatted)"
        )
        return nil
    }

    func run() async {
        var backoff = Backoff(initial: .milliseconds(500), maximum: .seconds(30))
        while !Task.isCancelled {
            do {
                try await Database.withConnection(url: url, applicationName: "pushchat-push-listen", logger: logger) { connection in
                    try await connection.listen(on: "push_queue") { notifications in
                        logger.debug("Listening for NOTIFY push_queue")
                        backoff.reset()
                        // What was queued while nobody listened is found from the start.
                        cursors.rewind(below: nil)
                        cursors.setListening(true)
                        signal.signal()
                        for try await notification in notifications {
                            cursors.rewind(below: Int64(notification.payload))
                            signal.signal()
                        }
                    }
                }
                cursors.setListening(false)
            } catch {
                cursors.setListening(false)
                if Task.isCancelled { return }
                let delay = backoff.next()
                logger.warning("Lost the LISTEN connection (\(DatabaseError.describe(error))); reconnecting in \(delay.formatted)")
                try? await Task.sleep(for: delay)
            }
        }
    }
}
