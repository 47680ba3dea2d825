import NIOConcurrencyHelpers

/// Set once at graceful shutdown; wakes every waiter so loops notice at once.
package final class ShutdownFlag: Sendable {
    private let requested = NIOLockedValueBox(false)
    private let signal: QueueSignal
    /// Signalled at shutdown only, for a loop that waits for something else than rows (the queue's signal wakes on
    /// every NOTIFY).
    package let requestedSignal = QueueSignal()

    package init(signal: QueueSignal) { self.signal = signal }

    package var isRequested: Bool { requested.withLockedValue { $0 } }

    package func request() {
        requested.withLockedValue { $0 = true }
        signal.signal()
        requestedSignal.signal()
    }
}
