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
