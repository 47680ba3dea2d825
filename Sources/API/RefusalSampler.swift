import NIOConcurrencyHelpers

/// Keeps refusals (4xx) from flooding the log: the first of each status in a window is logged, the rest only counted,
/// and the next logged line says how many were left out. A flood of bad keys or a scan of paths then writes a line a
/// second per status, not one per request.
final class RefusalSampler: Sendable {
    struct Window: Sendable {
        var start: ContinuousClock.Instant
        var suppressed: Int
    }

    let window: Duration
    private let windows = NIOLockedValueBox<[Int: Window]>([:])

    init(window: Duration = .seconds(1)) {
        self.window = window
    }

    /// Whether to log this refusal, and how many of its status were left out since the last logged one.
    func admit(status: Int, now: ContinuousClock.Instant = .now) -> (log: Bool, suppressed: Int) {
        windows.withLockedValue { windows in
            if var current = windows[status], current.start.duration(to: now) < window {
                current.suppressed += 1
                windows[status] = current
                return (false, 0)
            }
            let left = windows[status]?.suppressed ?? 0
            windows[status] = Window(start: now, suppressed: 0)
            return (true, left)
        }
    }
}
