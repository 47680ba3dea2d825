import NIOConcurrencyHelpers

/// Set once at graceful shutdown; wakes every waiter so loops notice at once.
public final class ShutdownFlag: Sendable {
    private let requested = NIOLockedValueBox(false)
    private let signal: QueueSignal

    public init(signal: QueueSignal) { self.signal = signal }

    public var isRequested: Bool { requested.withLockedValue { $0 } }

    public func request() {
        requested.withLockedValue { $0 = true }
        signal.signal()
    }
}
