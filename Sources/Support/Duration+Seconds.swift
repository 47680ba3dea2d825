extension Duration {
    /// The duration in seconds, fractions included (SQL intervals, metrics, `Retry-After`).
    package var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }

    /// Whole milliseconds, rounded down.
    package var milliseconds: Int64 { components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000 }

    /// Whole nanoseconds, rounded down (NIO's `TimeAmount`).
    package var nanoseconds: Int64 { components.seconds * 1_000_000_000 + components.attoseconds / 1_000_000_000 }

    /// `250 ms` or `1.5 s`, for log lines.
    package var formatted: String {
        milliseconds < 1000 ? "\(milliseconds) ms" : "\(Double(milliseconds) / 1000) s"
    }
}
