/// Exponential backoff with jitter for reconnects: each failure doubles the delay up to a cap; the actual wait is
/// drawn from the upper half of the current delay, so many daemons do not reconnect in lockstep.
package struct Backoff: Sendable {
    package let initial: Duration
    package let maximum: Duration
    package private(set) var failures = 0

    package init(initial: Duration = .seconds(1), maximum: Duration = .seconds(60)) {
        self.initial = initial
        self.maximum = maximum
    }

    /// The delay before the next attempt, counting one more failure.
    package mutating func next<Generator: RandomNumberGenerator>(using generator: inout Generator) -> Duration {
        let exponent = min(failures, 30)
        failures += 1
        var ceiling = initial * Double(1 << exponent)
        if ceiling > maximum { ceiling = maximum }
        let fraction = Double.random(in: 0.5...1.0, using: &generator)
        return ceiling * fraction
    }

    package mutating func next() -> Duration {
        var generator = SystemRandomNumberGenerator()
        return next(using: &generator)
    }

    /// A success: the next failure starts from the initial delay again.
    package mutating func reset() { failures = 0 }
}
