import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// The time limit ran out before the operation finished.
package struct DeadlineExceeded: PushChatError {
    package typealias Code = ErrorCode<DeadlineExceeded>
    package var code: Code { .timedOut }
    package let limit: Duration
    package var reason: String { "no answer within \(limit)" }
    package var description: String { reason }
}

extension ErrorCode where Domain == DeadlineExceeded {
    package static let timedOut = Self("timedOut")
}

/// Runs `body`, cancelling it and throwing ``DeadlineExceeded`` if it takes longer than `limit`.
///
/// Returns at the deadline even if `body` ignores its cancellation (a database client waiting for a connection
/// that never comes): the caller is never held longer than `limit`.
///
/// The deadline is a timer on an event loop, not a sleeping task: a cancelled `Task.sleep` keeps its task and its
/// dispatch timer in memory until the time it would have woken (swiftlang/swift#60441), so an API answering
/// thousands of requests a second held tens of megabytes of finished deadlines and its RSS kept growing.
@discardableResult
package func withDeadline<T: Sendable>(
    _ limit: Duration,
    _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    let work = Task { try await body() }
    let outcome = DeadlineOutcome<T>()
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { continuation in
            outcome.attach(continuation)
            let timer = MultiThreadedEventLoopGroup.singleton.any().scheduleTask(in: .nanoseconds(limit.nanoseconds)) {
                if outcome.finish(.failure(DeadlineExceeded(limit: limit))) { work.cancel() }
            }
            Task {
                let result = await work.result
                timer.cancel()
                outcome.finish(result)
            }
        }
    } onCancel: {
        work.cancel()
        outcome.finish(.failure(CancellationError()))
    }
}

/// Resumes the caller once: with the first of the result, the deadline or cancellation.
private final class DeadlineOutcome<T: Sendable>: Sendable {
    private struct State {
        var continuation: CheckedContinuation<T, any Error>?
        var early: Result<T, any Error>?
        var done = false
    }

    private let state = NIOLockedValueBox(State())

    func attach(_ continuation: CheckedContinuation<T, any Error>) {
        let early: Result<T, any Error>? = state.withLockedValue { state in
            if let early = state.early { return early }
            state.continuation = continuation
            return nil
        }
        if let early { continuation.resume(with: early) }
    }

    /// True when this call decided the outcome.
    @discardableResult
    func finish(_ result: Result<T, any Error>) -> Bool {
        let (decided, continuation): (Bool, CheckedContinuation<T, any Error>?) = state.withLockedValue { state in
            guard !state.done else { return (false, nil) }
            state.done = true
            guard let continuation = state.continuation else {
                state.early = result
                return (true, nil)
            }
            state.continuation = nil
            return (true, continuation)
        }
        continuation?.resume(with: result)
        return decided
    }
}
