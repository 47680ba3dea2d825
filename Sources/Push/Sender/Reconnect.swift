import APNs
import Logging
import Support

/// What ``SenderDriver`` does between connections and when it stops.
enum Reconnect {
    /// Waits out the next backoff delay before reconnecting. Queue NOTIFYs wake the wait but do not end it (a busy
    /// queue must not make the worker spin against a gateway that refuses it); shutdown does.
    static func pause(_ backoff: inout Backoff, signal: QueueSignal, shutdown: ShutdownFlag, logger: Logger) async {
        let delay = backoff.next()
        logger.info("Reconnecting in \(delay.formatted) (attempt \(backoff.failures))")
        let deadline = ContinuousClock.now + delay
        while !shutdown.isRequested, ContinuousClock.now < deadline {
            await signal.wait(after: signal.generation, timeout: deadline - .now)
        }
    }

    /// Between two connections: none after graceful shutdown (false: stop), at once after a connection that made
    /// progress (the gateway answered), else after the next backoff delay.
    static func next(
        _ backoff: inout Backoff,
        progressed: Bool,
        signal: QueueSignal,
        shutdown: ShutdownFlag,
        logger: Logger
    ) async -> Bool {
        if shutdown.isRequested { return false }
        if progressed {
            backoff.reset()
            return true
        }
        await pause(&backoff, signal: signal, shutdown: shutdown, logger: logger)
        return true
    }

    /// Gives rows that were never sent back to the queue for the next daemon.
    static func giveBack(_ carry: [QueuedNotification], outcomes: Outcomes, logger: Logger) {
        guard !carry.isEmpty else { return }
        outcomes.released(carry)
        logger.info("Returned \(carry.count) unsent notifications to the queue")
    }
}
