import NIOConcurrencyHelpers
import Storage

/// What each app has waiting (``ProviderStore/backlog()``), read at most every `refresh` and shared by every request:
/// counting the queue per request would cost as much as the request.
final class AppBacklog: Sendable {
    private struct State {
        var counts: [String: Int] = [:]
        var readAt: ContinuousClock.Instant?
    }

    private let refresh: Duration
    private let state = NIOLockedValueBox(State())

    init(refresh: Duration = .seconds(5)) { self.refresh = refresh }

    /// What `app` has waiting, read again first when the last reading is older than `refresh`.
    func waiting(_ app: String, store: ProviderStore, now: ContinuousClock.Instant = .now) async throws -> Int {
        let stale = state.withLockedValue { state in
            guard let readAt = state.readAt, readAt.duration(to: now) < refresh else {
                // Whoever finds it stale reads it; the others use the last reading meanwhile.
                state.readAt = now
                return true
            }
            return false
        }
        if stale {
            do {
                let counts = try await store.backlog()
                state.withLockedValue { $0.counts = counts }
            } catch {
                state.withLockedValue { $0.readAt = nil }
                throw error
            }
        }
        return state.withLockedValue { $0.counts[app] ?? 0 }
    }
}
