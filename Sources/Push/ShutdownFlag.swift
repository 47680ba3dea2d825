import NIOConcurrencyHelpers

/// Set once at graceful shutdown; wakes every waiter so loops notice at once.
package final class ShutdownFlag: Sendable {
    private let requested = NIOLockedValueBox(false)
    private let signal: QueueSignal

    package init(signal: QueueSignal) { self.signal = signal }

    package var isRequested: Bool { requested.withLockedValue { $0 } }

    package func request() {
        requested.withLockedValue { $0 = true }
        signal.signal()
    }
}
