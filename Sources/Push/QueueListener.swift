import APNs
import Logging
import Observability
import PostgresNIO
import Settings
import Storage
import Support

/// Keeps a `LISTEN push_queue` connection open and turns every NOTIFY into a wake-up. NOTIFYs are lost while the
/// connection is down, so it also wakes everyone after each (re)connect; the poll interval covers the rest.
struct QueueListener: Sendable {
    let url: DatabaseURL
    let signal: QueueSignal
    let logger: Logger

    /// The listener the daemon runs: on `database_url` when it reaches PostgreSQL directly, on `database_listen_url`
    /// behind a pooler (transaction pooling cannot carry `LISTEN`), or none (polling every `poll_interval`); said at
    /// start.
    static func choose(configuration: Configuration, session: DatabaseSession?, signal: QueueSignal, logger: Logger) -> QueueListener? {
        guard session?.isPooled == true else {
            return QueueListener(url: configuration.databaseURL, signal: signal, logger: logger)
        }
        if let listen = configuration.databaseListenURL {
            logger.info("Behind a pooler: LISTEN push_queue on database_listen_url (\(listen))")
            return QueueListener(url: listen, signal: signal, logger: logger)
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
                        signal.signal()
                        for try await _ in notifications { signal.signal() }
                    }
                }
            } catch {
                if Task.isCancelled { return }
                let delay = backoff.next()
                logger.warning("Lost the LISTEN connection (\(DatabaseError.describe(error))); reconnecting in \(delay.formatted)")
                try? await Task.sleep(for: delay)
            }
        }
    }
}
